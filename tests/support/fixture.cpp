#include "support/fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io/checkpoint.h"
#include "models/tokens.h"
#include "tensor/error.h"

namespace tfm::testing {

std::string fixture_path(const std::string& name) { return std::string(TFM_FIXTURE_DIR) + "/" + name; }

std::string hf_fixture_path(const std::string& name) {
  const std::string path = std::string(TFM_HF_FIXTURE_DIR) + "/" + name;
  if (!std::filesystem::exists(path))
    throw Error(path + ": missing; the Hugging Face fixtures are ../shared/fixtures/hf beside the checkout (or cmake -DTFM_HF_FIXTURES=DIR)");
  return path;
}

const Tensor& ModelFixture::get(const std::string& name) const {
  const Tensor* t = file.find(name);
  TFM_CHECK(t, "fixture has no tensor '" << name << "'");
  return *t;
}

models::Tokens ModelFixture::tokens(const std::string& name) const {
  const Tensor& t = get(name);
  std::vector<int> ids;
  for (float v : t.to_vector()) ids.push_back(static_cast<int>(std::lround(v)));
  return models::Tokens(ids, t.size(0), t.size(1));
}

void ModelFixture::load_weights(nn::Module& model) const {
  io::SafeTensors weights;  // only the parameters: the other entries are test data
  for (const auto& [name, t] : file.tensors)
    if (name.find("input.") != 0 && name.find("trace.") != 0 && name.find("grad.") != 0 && name.find("train.") != 0 && name != "loss")
      weights.tensors.emplace_back(name, t);
  io::load_parameters(model.named_parameters(), weights, "fixture");
}

std::unique_ptr<models::EncoderDecoder> ModelFixture::make_model() const {
  auto model = std::make_unique<models::EncoderDecoder>(config);
  load_weights(*model);
  return model;
}

ModelFixture load_model_fixture(const std::string& name) {
  ModelFixture f;
  f.file = io::read_safetensors(fixture_path(name));
  io::Checkpoint info = io::checkpoint_info(f.file, name);
  f.config_json = info.config_json;
  if (info.model_kind == "encoder_decoder") f.config = models::TransformerConfig::from_json(info.config_json, name);
  return f;
}

namespace {

// The translation model's encoder runs on the source's real tokens only (see
// EncoderDecoder::forward): its outputs are [1, tokens, d_model], PyTorch's
// [batch, src_len, d_model] at every position. These are PyTorch's at the real
// tokens' positions (what it computes at padding, nothing ever reads).
Tensor at_real_source_tokens(const ModelFixture& f, const std::string& module, const Tensor& expected) {
  if (module.rfind("transformer.encoder.", 0) != 0) return expected;
  return models::at_tokens(expected, models::unpad(f.tokens("input.src"), f.config.pad_id));
}

}  // namespace

int expect_traces_match(const ModelFixture& f, const nn::TraceRecorder& recorder, double tol, WorstDifference& worst) {
  int compared = 0;
  for (const auto& [name, all_positions] : f.file.tensors) {
    if (name.rfind("trace.", 0) != 0) continue;
    const std::string module = name.substr(6);
    auto it = recorder.outputs.find(module);
    EXPECT_NE(it, recorder.outputs.end()) << "tfm recorded no output for " << module;
    if (it == recorder.outputs.end()) continue;
    const Tensor expected = at_real_source_tokens(f, module, all_positions);
    EXPECT_TENSOR_NEAR(module, it->second, expected, tol);
    worst.add(module, compare(it->second, expected));
    ++compared;
  }
  return compared;
}

int expect_grads_match(const ModelFixture& f, const nn::Module& model, double tol, WorstDifference& worst) {
  int compared = 0;
  for (const auto& [name, param] : model.named_parameters()) {
    const Tensor& expected = f.get("grad." + name);
    EXPECT_TENSOR_NEAR("grad." + name, param.grad(), expected, tol);
    worst.add("grad." + name, compare(param.grad(), expected));
    ++compared;
  }
  return compared;
}

}  // namespace tfm::testing
