#include "models/stack_config.h"

#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "models/json_fields.h"
#include "tensor/error.h"

namespace tfm::models {

namespace {

// What Hugging Face's ViT variants add to tfm's: DeiT's distillation token, its position and
// its classifier, ViTModel's pooler (a base's missing classifier counts 0 in classes).
int64_t hf_vit_floats(const StackConfig& c) {
  if (c.family != "vit") return 0;
  const int64_t distillation = c.distilled ? 2 * c.d_model + (c.distill_head ? (c.d_model + 1) * c.classes : 0) : 0;
  return distillation + (c.pooler ? (c.d_model + 1) * c.d_model : 0);
}

constexpr std::pair<ops::RotaryLayout, const char*> kRotaryLayouts[] = {{ops::RotaryLayout::half, "half"},
                                                                        {ops::RotaryLayout::interleaved, "interleaved"}};

std::string layout_name(ops::RotaryLayout layout) {
  for (const auto& [l, name] : kRotaryLayouts)
    if (l == layout) return name;
  return "?";
}

ops::RotaryLayout parse_layout(const std::string& name, const std::string& origin) {
  for (const auto& [l, n] : kRotaryLayouts)
    if (name == n) return l;
  throw Error(origin + ": rope_layout '" + name + "' is not half or interleaved");
}

// The Llama family's settings where they differ from the defaults (GPT-2's).
void write_llama_settings(const StackConfig& c, nlohmann::json& j) {
  const StackConfig d;
  if (c.rms_norm) j["rms_norm"] = true;
  if (c.gated) j["gated"] = true;
  if (c.kv_heads != d.kv_heads) j["kv_heads"] = c.kv_heads;
  if (!c.qkv_bias) j["qkv_bias"] = false;
  if (!c.out_bias) j["out_bias"] = false;
  if (!c.ff_bias) j["ff_bias"] = false;
  if (!c.tied_head) j["tied_head"] = false;
  if (!c.rotary) return;
  j.update({{"rotary", true}, {"rope_theta", c.rope.theta}, {"rope_layout", layout_name(c.rope.layout)}});
  const ops::RopeScaling& s = c.rope.scaling;
  if (!s.type.empty())
    j.update({{"rope_scaling", s.type}, {"rope_factor", s.factor}, {"rope_low_freq_factor", s.low_freq_factor},
              {"rope_high_freq_factor", s.high_freq_factor}, {"rope_original_max_positions", s.original_max_positions}});
}

void read_llama_settings(const JsonFields& f, StackConfig& c, const std::string& origin) {
  f.read("rms_norm", c.rms_norm);
  f.read("gated", c.gated);
  f.read("kv_heads", c.kv_heads);
  f.read("qkv_bias", c.qkv_bias);
  f.read("out_bias", c.out_bias);
  f.read("ff_bias", c.ff_bias);
  f.read("tied_head", c.tied_head);
  f.read("rotary", c.rotary);
  f.read("rope_theta", c.rope.theta);
  std::string layout = layout_name(c.rope.layout);
  f.read("rope_layout", layout);
  c.rope.layout = parse_layout(layout, origin);
  ops::RopeScaling& s = c.rope.scaling;
  f.read("rope_scaling", s.type);
  f.read("rope_factor", s.factor);
  f.read("rope_low_freq_factor", s.low_freq_factor);
  f.read("rope_high_freq_factor", s.high_freq_factor);
  f.read("rope_original_max_positions", s.original_max_positions);
}

}  // namespace

nn::LayerOptions StackConfig::layer_options() const {
  return {.d_model = d_model, .heads = heads, .d_ff = d_ff, .dropout = dropout, .activation = activation, .norm_first = norm_first,
          .norm_eps = norm_eps, .final_norm = final_norm, .rms_norm = rms_norm, .gated = gated, .ff_bias = ff_bias,
          .attention = {kv_heads, qkv_bias, out_bias, rotary ? std::optional<ops::Rope>(rope) : std::nullopt}};
}

std::string StackConfig::to_json() const {
  nlohmann::json j = {{"family", family},   {"d_model", d_model}, {"heads", heads},     {"d_ff", d_ff},
                      {"layers", layers},   {"dropout", dropout}, {"activation", nn::to_string(activation)},
                      {"norm_first", norm_first}};
  if (family == "vit") {
    j.update({{"image_size", image_size}, {"channels", channels}, {"patch", patch}, {"classes", classes}});
  } else {
    j.update({{"vocab", vocab}, {"max_len", max_len}});
    if (family == "gpt") j["learned_positions"] = learned_positions;
  }
  // Written only where they differ from tfm's own, so that older tfm reads what this one writes.
  const StackConfig d;
  if (norm_eps != d.norm_eps) j["norm_eps"] = norm_eps;
  if (final_norm != d.final_norm) j["final_norm"] = final_norm;
  if (type_vocab != d.type_vocab) j["type_vocab"] = type_vocab;
  if (pooler != d.pooler) j["pooler"] = pooler;
  if (family == "bert" && head != d.head) j["head"] = head;
  if (classifies_text()) j["classes"] = classes;
  if (multi_label != d.multi_label) j["multi_label"] = multi_label;
  if (scores_by_layer != d.scores_by_layer) j["scores_by_layer"] = scores_by_layer;
  if (distilled != d.distilled) j["distilled"] = distilled;
  if (distill_head != d.distill_head) j["distill_head"] = distill_head;
  write_llama_settings(*this, j);
  return j.dump();
}

StackConfig StackConfig::from_json(const std::string& text, const std::string& origin, const std::string& family, StackConfig base,
                                   bool validate) {
  JsonFields f(text, origin, {"family", "vocab", "max_len", "d_model", "heads", "d_ff", "layers", "dropout", "activation", "norm_first",
                              "distilled", "distill_head",
                              "learned_positions", "image_size", "channels", "patch", "classes", "norm_eps", "final_norm", "type_vocab",
                              "pooler", "scores_by_layer", "head", "multi_label", "rms_norm", "gated", "kv_heads", "qkv_bias", "out_bias",
                              "ff_bias", "tied_head", "rotary", "rope_theta", "rope_layout", "rope_scaling", "rope_factor",
                              "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_max_positions"});
  StackConfig c = std::move(base);
  c.family = family;
  f.read("family", c.family);
  TFM_CHECK(c.family == family, origin << ": is a configuration of family '" << c.family << "', not " << family);
  f.read("vocab", c.vocab);
  f.read("max_len", c.max_len);
  f.read("d_model", c.d_model);
  f.read("heads", c.heads);
  f.read("d_ff", c.d_ff);
  f.read("layers", c.layers);
  f.read("dropout", c.dropout);
  f.read_activation("activation", c.activation);
  f.read("norm_first", c.norm_first);
  f.read("learned_positions", c.learned_positions);
  f.read("image_size", c.image_size);
  f.read("channels", c.channels);
  f.read("patch", c.patch);
  f.read("classes", c.classes);
  f.read("distilled", c.distilled);
  f.read("distill_head", c.distill_head);
  f.read("norm_eps", c.norm_eps);
  f.read("final_norm", c.final_norm);
  f.read("type_vocab", c.type_vocab);
  f.read("scores_by_layer", c.scores_by_layer);
  f.read("pooler", c.pooler);
  f.read("head", c.head);
  f.read("multi_label", c.multi_label);
  read_llama_settings(f, c, origin);
  return validate ? c.validated(origin) : c;
}

StackConfig StackConfig::validated(const std::string& origin) const {
  validate(origin);
  StackConfig c = *this;
  if (c.family == "vit") c.max_len = c.vit_tokens();
  return c;
}

StackConfig StackConfig::from_json(const std::string& text, const std::string& origin, const std::string& family) {
  return from_json(text, origin, family, StackConfig());
}

StackConfig StackConfig::from_file(const std::string& path, const std::string& family, const StackConfig& base, bool validate) {
  return from_json(read_config_file(path), path, family, base, validate);
}

void StackConfig::validate(const std::string& origin) const {
  TFM_CHECK(family == "gpt" || family == "bert" || family == "vit", origin << ": family '" << family << "' is not gpt, bert or vit");
  check_widths(origin, d_model, heads, d_ff);
  check_range(origin, "layers", layers, 1, kMaxLayers);
  TFM_CHECK(dropout >= 0.0f && dropout < 1.0f, origin << ": dropout " << dropout << " outside [0, 1)");
  TFM_CHECK(norm_eps > 0.0f && norm_eps < 1.0f, origin << ": norm_eps " << norm_eps << " outside (0, 1)");
  check_range(origin, "type_vocab", type_vocab, 0, family == "bert" ? 1024 : 0);
  TFM_CHECK(!pooler || family == "bert" || family == "vit", origin << ": pooler is a setting of bert and vit, not " << family);
  TFM_CHECK((!distilled && !distill_head) || family == "vit", origin << ": distilled and distill_head are settings of vit, not " << family);
  TFM_CHECK(distilled || !distill_head, origin << ": distill_head needs distilled (the distillation token it reads)");
  TFM_CHECK(!scores_by_layer || family == "gpt", origin << ": scores_by_layer is a setting of gpt, not " << family);
  if (family == "bert") validate_bert_head(origin);
  validate_llama_settings(origin);
  if (family == "vit") {
    check_range(origin, "image_size", image_size, 1, kMaxImageSize);
    check_range(origin, "patch", patch, 1, image_size);
    TFM_CHECK(image_size % patch == 0, origin << ": image_size " << image_size << " is not a multiple of patch " << patch);
    const int64_t patches = (image_size / patch) * (image_size / patch);  // (the sequence attention runs over: 16.7M asked 24 GB)
    TFM_CHECK(patches <= kMaxPositions, origin << ": image_size " << image_size << " in patches of " << patch << " makes " << patches
                                               << " patches, more than the " << kMaxPositions << " positions a model may have");
    check_range(origin, "channels", channels, 1, kMaxChannels);
    if (classes != 0) check_range(origin, "classes", classes, 2, kMaxVocab);  // 0: a base, without a classifier
    TFM_CHECK(classes != 0 || !distill_head, origin << ": distill_head is a classifier, but classes is 0");
  } else {
    check_range(origin, "vocab", vocab, 1, kMaxVocab);
    check_range(origin, "max_len", max_len, 1, kMaxPositions);
  }
  check_weight_floats(origin, weight_floats(), family == "vit" ? "image_size, patch, d_model, d_ff and layers" : "vocab, max_len, d_model, d_ff and layers");
}

void StackConfig::validate_bert_head(const std::string& origin) const {
  TFM_CHECK(head == "mlm" || head == "none" || head == "sequence" || head == "token",
            origin << ": head '" << head << "' is not mlm, none, sequence or token");
  TFM_CHECK(head != "sequence" || pooler, origin << ": a sequence classifier (head sequence) needs the pooler");
  TFM_CHECK(!multi_label || head == "sequence", origin << ": multi_label is a setting of a sequence classifier (head sequence)");
  if (classifies_text()) check_range(origin, "classes", classes, multi_label ? 1 : 2, kMaxVocab);
}

void StackConfig::validate_llama_settings(const std::string& origin) const {
  const StackConfig d;
  const bool llama = rms_norm || rotary || gated || kv_heads != d.kv_heads || !qkv_bias || !out_bias || !ff_bias || !tied_head;
  TFM_CHECK(!llama || family == "gpt",
            origin << ": rms_norm, rotary, gated, kv_heads, the biases and tied_head are settings of gpt, not " << family);
  check_range(origin, "kv_heads", kv_heads, 0, heads);
  TFM_CHECK(kv_heads == 0 || heads % kv_heads == 0, origin << ": " << heads << " heads cannot share " << kv_heads << " kv_heads");
  TFM_CHECK(!rotary || !learned_positions, origin << ": rotary positions take the place of learned_positions (set it false)");
  if (!rotary) return;
  TFM_CHECK(rope.theta > 0.0, origin << ": rope_theta " << rope.theta << " is not positive");
  try {
    ops::rotary_frequencies(d_model / heads, rope);  // the head width and the scaling's settings
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
}

// The layers and final LayerNorm, then the family's inputs and outputs: patch projection,
// [CLS], positions and head (vit); token and position tables and BERT's MLM head (a bound
// for gpt). The bounds validate() checks first keep every product far inside int64.
int64_t StackConfig::weight_floats() const {
  const int64_t gate = gated ? layers * d_model * d_ff : 0, own_head = tied_head ? 0 : vocab * d_model;  // (beyond GPT-2's)
  const int64_t stack = layers * encoder_layer_floats(d_model, d_ff) + (final_norm ? 2 * d_model : 0) + hf_vit_floats(*this) + gate + own_head;
  if (family == "vit") return stack + (channels * patch * patch + patches() + 3 + classes) * d_model + classes;
  const bool mlm = family == "bert" && head == "mlm";
  const int64_t heads = (pooler ? d_model * d_model + d_model : 0) + (pooler && mlm ? 2 * d_model + 2 : 0) +  // pooler, next-sentence head
                        (classifies_text() ? (d_model + 1) * classes : 0) + (mlm ? d_model * d_model + 3 * d_model + vocab : 0);  // MLM head
  return stack + (vocab + max_len + type_vocab + 2) * d_model + heads;
}

}  // namespace tfm::models
