#include "support/fixture.h"

#include <cmath>

#include "io/checkpoint.h"
#include "tensor/error.h"

namespace tfm::testing {

std::string fixture_path(const std::string& name) { return std::string(TFM_FIXTURE_DIR) + "/" + name; }

const Tensor& ModelFixture::get(const std::string& name) const {
  const Tensor* t = file.find(name);
  TFM_CHECK(t, "fixture has no tensor '" << name << "'");
  return *t;
}

models::Tokens ModelFixture::tokens(const std::string& name) const {
  const Tensor& t = get(name);
  models::Tokens out{{}, t.size(0), t.size(1)};
  for (float v : t.to_vector()) out.ids.push_back(static_cast<int>(std::lround(v)));
  return out;
}

std::unique_ptr<models::EncoderDecoder> ModelFixture::make_model() const {
  auto model = std::make_unique<models::EncoderDecoder>(config);
  io::SafeTensors weights;  // only the parameters: the other entries are test data
  for (const auto& [name, t] : file.tensors)
    if (name.find("input.") != 0 && name.find("trace.") != 0 && name.find("grad.") != 0 && name.find("train.") != 0 && name != "loss")
      weights.tensors.emplace_back(name, t);
  io::load_parameters(*model, weights, "fixture");
  return model;
}

ModelFixture load_model_fixture(const std::string& name) {
  ModelFixture f;
  f.file = io::read_safetensors(fixture_path(name));
  f.config = models::TransformerConfig::from_json(io::checkpoint_info(f.file, name).config_json, name);
  return f;
}

}  // namespace tfm::testing
