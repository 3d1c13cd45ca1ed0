#pragma once
// Loading the PyTorch reference fixtures written by tests/reference/make_fixtures.py.
#include <memory>
#include <string>

#include "io/safetensors.h"
#include "models/encoder_decoder.h"

namespace tfm::testing {

std::string fixture_path(const std::string& name);

// A fixture file: model weights under their state_dict names plus
// "input.*", "trace.*", "grad.*", "train.*" and "loss" entries.
struct ModelFixture {
  io::SafeTensors file;
  models::TransformerConfig config;
  const Tensor& get(const std::string& name) const;
  models::Tokens tokens(const std::string& name) const;  // an "input.*" id matrix
  // A model with the fixture's configuration and weights.
  std::unique_ptr<models::EncoderDecoder> make_model() const;
};

ModelFixture load_model_fixture(const std::string& name);

}  // namespace tfm::testing
