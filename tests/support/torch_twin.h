#pragma once
// Hugging Face directories of pytorch_model.bin for the tests: a directory of
// tests/fixtures/hf with its model.safetensors replaced by the torch.save files of
// tests/fixtures/torch/<name>/ (the same weights, tests/reference/make_torch_fixtures.py).
#include <string>

#include "support/process.h"

namespace tfm::testing {

// The directory `name` made in `tmp`; returns its path.
std::string torch_twin(const TempDir& tmp, const std::string& name);

}  // namespace tfm::testing
