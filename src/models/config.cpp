#include "models/config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/error.h"

namespace tfm::models {

using nlohmann::json;

nn::LayerOptions TransformerConfig::layer_options() const {
  return {d_model, heads, d_ff, dropout, activation, norm_first};
}

std::string TransformerConfig::to_json() const {
  json j = {{"src_vocab", src_vocab},     {"tgt_vocab", tgt_vocab},
            {"d_model", d_model},         {"heads", heads},
            {"d_ff", d_ff},               {"encoder_layers", encoder_layers},
            {"decoder_layers", decoder_layers}, {"dropout", dropout},
            {"activation", nn::to_string(activation)}, {"norm_first", norm_first},
            {"share_embeddings", share_embeddings}, {"max_len", max_len},
            {"pad_id", pad_id}};
  return j.dump();
}

namespace {

template <class T>
void read_field(const json& j, const char* key, T& out, const std::string& origin) {
  if (!j.contains(key)) return;  // absent fields keep their defaults
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(origin + ": field '" + key + "' has the wrong type (" + j.at(key).dump() + ")");
  }
}

}  // namespace

TransformerConfig TransformerConfig::from_json(const std::string& text, const std::string& origin, bool validate) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  TFM_CHECK(j.is_object(), origin << ": expected a JSON object of model settings");
  static const char* known[] = {"src_vocab", "tgt_vocab", "d_model", "heads", "d_ff", "encoder_layers", "decoder_layers",
                                "dropout", "activation", "norm_first", "share_embeddings", "max_len", "pad_id"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    TFM_CHECK(ok, origin << ": unknown setting '" << it.key() << "'");
  }
  TransformerConfig c;
  read_field(j, "src_vocab", c.src_vocab, origin);
  read_field(j, "tgt_vocab", c.tgt_vocab, origin);
  read_field(j, "d_model", c.d_model, origin);
  read_field(j, "heads", c.heads, origin);
  read_field(j, "d_ff", c.d_ff, origin);
  read_field(j, "encoder_layers", c.encoder_layers, origin);
  read_field(j, "decoder_layers", c.decoder_layers, origin);
  read_field(j, "dropout", c.dropout, origin);
  std::string activation = nn::to_string(c.activation);
  read_field(j, "activation", activation, origin);
  try {
    c.activation = nn::parse_activation(activation);
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
  read_field(j, "norm_first", c.norm_first, origin);
  read_field(j, "share_embeddings", c.share_embeddings, origin);
  read_field(j, "max_len", c.max_len, origin);
  read_field(j, "pad_id", c.pad_id, origin);
  if (validate) c.validate(origin);
  return c;
}

TransformerConfig TransformerConfig::from_file(const std::string& path, bool validate) {
  std::ifstream in(path);
  TFM_CHECK(in, path << ": cannot open the configuration file");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path, validate);
}

TransformerConfig preset(const std::string& name) {
  TransformerConfig c;
  if (name == "base") return c;
  TFM_CHECK(name == "small", "unknown preset '" << name << "' (expected base or small)");
  c.d_model = 256, c.d_ff = 1024, c.heads = 4, c.encoder_layers = c.decoder_layers = 3;
  return c;
}

void TransformerConfig::validate(const std::string& origin) const {
  TFM_CHECK(src_vocab > 0 && tgt_vocab > 0, origin << ": src_vocab and tgt_vocab must be positive");
  TFM_CHECK(d_model > 0 && heads > 0 && d_ff > 0, origin << ": d_model, heads and d_ff must be positive");
  TFM_CHECK(d_model % heads == 0, origin << ": d_model " << d_model << " is not divisible by heads " << heads);
  TFM_CHECK(encoder_layers >= 1 && decoder_layers >= 1, origin << ": need at least one encoder and one decoder layer");
  TFM_CHECK(dropout >= 0.0f && dropout < 1.0f, origin << ": dropout " << dropout << " outside [0, 1)");
  TFM_CHECK(max_len > 0, origin << ": max_len must be positive");
  TFM_CHECK(pad_id >= 0 && pad_id < src_vocab && pad_id < tgt_vocab, origin << ": pad_id " << pad_id << " outside the vocabulary");
  TFM_CHECK(!share_embeddings || src_vocab == tgt_vocab, origin << ": share_embeddings needs src_vocab == tgt_vocab");
}

}  // namespace tfm::models
