#pragma once
// Loading the PyTorch reference fixtures written by tests/reference/make_fixtures.py.
#include <memory>
#include <string>

#include "io/safetensors.h"
#include "models/encoder_decoder.h"
#include "nn/trace.h"
#include "support/compare.h"

namespace tfm::testing {

std::string fixture_path(const std::string& name);
// A file or directory of the Hugging Face fixtures (../shared/fixtures/hf, its README
// says what each holds); throws, naming the place looked at, where it is missing.
std::string hf_fixture_path(const std::string& name);

// A fixture file: model weights under their state_dict names plus
// "input.*", "trace.*", "grad.*", "train.*" and "loss" entries.
struct ModelFixture {
  io::SafeTensors file;
  std::string config_json;             // "tfm.config"
  models::TransformerConfig config;    // parsed for encoder-decoder fixtures only
  const Tensor& get(const std::string& name) const;
  models::Tokens tokens(const std::string& name) const;  // an "input.*" id matrix
  // Copies the fixture's weights into `model`.
  void load_weights(nn::Module& model) const;
  // An encoder-decoder with the fixture's configuration and weights.
  std::unique_ptr<models::EncoderDecoder> make_model() const;
};

ModelFixture load_model_fixture(const std::string& name);

// Every "trace.<module>" of the fixture against the output `recorder` holds for that
// module (relative tolerance `tol`); returns how many were compared.
int expect_traces_match(const ModelFixture& f, const nn::TraceRecorder& recorder, double tol, WorstDifference& worst);
// Every parameter's gradient against the fixture's "grad.<name>"; returns how many.
int expect_grads_match(const ModelFixture& f, const nn::Module& model, double tol, WorstDifference& worst);

}  // namespace tfm::testing
