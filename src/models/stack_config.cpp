#include "models/stack_config.h"

#include <nlohmann/json.hpp>

#include "models/json_fields.h"
#include "tensor/error.h"

namespace tfm::models {

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
  return j.dump();
}

StackConfig StackConfig::from_json(const std::string& text, const std::string& origin) {
  JsonFields f(text, origin, {"family", "vocab", "max_len", "d_model", "heads", "d_ff", "layers", "dropout", "activation", "norm_first",
                              "learned_positions", "image_size", "channels", "patch", "classes"});
  StackConfig c;
  f.read("family", c.family);
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
  c.validate(origin);
  if (c.family == "vit") c.max_len = c.patches() + 1;
  return c;
}

StackConfig StackConfig::from_file(const std::string& path) { return from_json(read_config_file(path), path); }

void StackConfig::validate(const std::string& origin) const {
  TFM_CHECK(family == "gpt" || family == "bert" || family == "vit", origin << ": family '" << family << "' is not gpt, bert or vit");
  TFM_CHECK(d_model > 0 && heads > 0 && d_ff > 0 && layers > 0, origin << ": d_model, heads, d_ff and layers must be positive");
  TFM_CHECK(d_model % heads == 0, origin << ": d_model " << d_model << " is not divisible by heads " << heads);
  TFM_CHECK(dropout >= 0.0f && dropout < 1.0f, origin << ": dropout " << dropout << " outside [0, 1)");
  if (family == "vit") {
    TFM_CHECK(patch > 0 && image_size > 0 && image_size % patch == 0,
              origin << ": image_size " << image_size << " is not a positive multiple of patch " << patch);
    TFM_CHECK(channels > 0 && classes > 1, origin << ": need channels >= 1 and classes >= 2");
  } else {
    TFM_CHECK(vocab > 0, origin << ": vocab must be positive");
    TFM_CHECK(max_len > 0, origin << ": max_len must be positive");
  }
}

}  // namespace tfm::models
