#include "models/config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "models/json_fields.h"
#include "tensor/error.h"

namespace tfm::models {

using nlohmann::json;

ops::SinusoidLayout TransformerConfig::sinusoid_layout() const {
  if (positions == "split") return ops::SinusoidLayout::split;
  return positions == "fairseq" ? ops::SinusoidLayout::fairseq : ops::SinusoidLayout::interleaved;
}

// fairseq's sinusoids start at pad + 1; mBART's learned table holds position p at row p + 2.
nn::PositionOptions TransformerConfig::position_options() const {
  const int64_t first = positions == "fairseq" ? pad_id + 1 : positions == "learned" ? 2 : 0;
  return {sinusoid_layout(), first, positions == "learned", embed_norm, norm_eps};
}

nn::LayerOptions TransformerConfig::layer_options() const {
  return {d_model, heads, d_ff, dropout, activation, norm_first, norm_eps, final_norm};
}

std::string TransformerConfig::to_json() const {
  json j = {{"src_vocab", src_vocab},     {"tgt_vocab", tgt_vocab},
            {"d_model", d_model},         {"heads", heads},
            {"d_ff", d_ff},               {"encoder_layers", encoder_layers},
            {"decoder_layers", decoder_layers}, {"dropout", dropout},
            {"activation", nn::to_string(activation)}, {"norm_first", norm_first},
            {"share_embeddings", share_embeddings}, {"max_len", max_len},
            {"pad_id", pad_id}};
  // Written only where they differ from tfm's own, so that older tfm reads what this one writes.
  const TransformerConfig d;
  if (positions != d.positions) j["positions"] = positions;
  if (norm_eps != d.norm_eps) j["norm_eps"] = norm_eps;
  if (final_norm != d.final_norm) j["final_norm"] = final_norm;
  if (embed_norm != d.embed_norm) j["embed_norm"] = embed_norm;
  if (scale_embedding != d.scale_embedding) j["scale_embedding"] = scale_embedding;
  if (tie_generator != d.tie_generator) j["tie_generator"] = tie_generator;
  if (bos_id != d.bos_id || eos_id != d.eos_id) j.update({{"bos_id", bos_id}, {"eos_id", eos_id}});
  if (hf_search) j.update({{"hf_search", hf_search}, {"forced_eos", forced_eos}, {"renormalize", renormalize}, {"max_length", max_length}});
  return j.dump();
}

TransformerConfig TransformerConfig::from_json(const std::string& text, const std::string& origin, const TransformerConfig& base,
                                             bool validate) {
  JsonFields f(text, origin, {"src_vocab", "tgt_vocab", "d_model", "heads", "d_ff", "encoder_layers", "decoder_layers", "dropout",
                              "activation", "norm_first", "share_embeddings", "tie_generator", "max_len", "pad_id", "positions", "norm_eps",
                              "final_norm", "embed_norm", "scale_embedding", "bos_id", "eos_id", "hf_search", "forced_eos", "renormalize",
                              "max_length"});
  TransformerConfig c = base;
  f.read("src_vocab", c.src_vocab);
  f.read("tgt_vocab", c.tgt_vocab);
  f.read("d_model", c.d_model);
  f.read("heads", c.heads);
  f.read("d_ff", c.d_ff);
  f.read("encoder_layers", c.encoder_layers);
  f.read("decoder_layers", c.decoder_layers);
  f.read("dropout", c.dropout);
  f.read_activation("activation", c.activation);
  f.read("norm_first", c.norm_first);
  f.read("share_embeddings", c.share_embeddings);
  f.read("tie_generator", c.tie_generator);
  f.read("max_len", c.max_len);
  f.read("pad_id", c.pad_id);
  f.read("positions", c.positions);
  f.read("norm_eps", c.norm_eps);
  f.read("final_norm", c.final_norm);
  f.read("embed_norm", c.embed_norm);
  f.read("scale_embedding", c.scale_embedding);
  f.read("bos_id", c.bos_id);
  f.read("eos_id", c.eos_id);
  f.read("hf_search", c.hf_search);
  f.read("forced_eos", c.forced_eos);
  f.read("renormalize", c.renormalize);
  f.read("max_length", c.max_length);
  if (validate) c.validate(origin);
  return c;
}

TransformerConfig TransformerConfig::from_json(const std::string& text, const std::string& origin) {
  return from_json(text, origin, TransformerConfig());
}

TransformerConfig TransformerConfig::from_file(const std::string& path, const TransformerConfig& base, bool validate) {
  return from_json(read_config_file(path), path, base, validate);
}

TransformerConfig preset(const std::string& name) {
  TransformerConfig c;
  if (name == "base") return c;
  TFM_CHECK(name == "small", "unknown preset '" << name << "' (expected base or small)");
  c.d_model = 256, c.d_ff = 1024, c.heads = 4, c.encoder_layers = c.decoder_layers = 3;
  return c;
}

void TransformerConfig::validate(const std::string& origin) const {
  check_range(origin, "src_vocab", src_vocab, 1, kMaxVocab);
  check_range(origin, "tgt_vocab", tgt_vocab, 1, kMaxVocab);
  check_widths(origin, d_model, heads, d_ff);
  check_range(origin, "encoder_layers", encoder_layers, 1, kMaxLayers);
  check_range(origin, "decoder_layers", decoder_layers, 1, kMaxLayers);
  check_range(origin, "max_len", max_len, 1, kMaxPositions);
  check_range(origin, "pad_id", pad_id, 0, std::min(src_vocab, tgt_vocab) - 1);
  check_range(origin, "bos_id", bos_id, 0, tgt_vocab - 1);
  check_range(origin, "eos_id", eos_id, 0, tgt_vocab - 1);
  check_range(origin, "max_length", max_length, 0, kMaxPositions);
  TFM_CHECK(positions == "interleaved" || positions == "split" || positions == "fairseq" || positions == "learned",
            origin << ": positions '" << positions << "' is not interleaved, split, fairseq or learned");
  TFM_CHECK(positions != "fairseq" || d_model % 2 == 0, origin << ": fairseq's positions need an even d_model, not " << d_model);
  TFM_CHECK(norm_eps > 0.0f && norm_eps < 1.0f, origin << ": norm_eps " << norm_eps << " outside (0, 1)");
  TFM_CHECK(dropout >= 0.0f && dropout < 1.0f, origin << ": dropout " << dropout << " outside [0, 1)");
  TFM_CHECK(!share_embeddings || src_vocab == tgt_vocab, origin << ": share_embeddings needs src_vocab == tgt_vocab");
  TFM_CHECK(!share_embeddings || !tie_generator, origin << ": tie_generator is for separate embeddings (share_embeddings ties all three)");
  check_weight_floats(origin, weight_floats(), "the vocabularies, d_model, d_ff, max_len and the layers");
}

// Embeddings and generator, the two position tables (a learned one's rows before position
// 0 counted), the layers and the final (and embedding) LayerNorms. The bounds validate()
// checks first keep every product far inside int64.
int64_t TransformerConfig::weight_floats() const {
  const nn::PositionOptions p = position_options();
  const int64_t table_rows = max_len + (p.learned ? p.first : 0);
  return (src_vocab + 2 * tgt_vocab) * d_model + tgt_vocab + 2 * table_rows * d_model + (embed_norm ? 8 : 4) * d_model +
         encoder_layers * encoder_layer_floats(d_model, d_ff) + decoder_layers * decoder_layer_floats(d_model, d_ff);
}

}  // namespace tfm::models
