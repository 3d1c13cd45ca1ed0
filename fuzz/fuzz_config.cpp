// libFuzzer target: model configurations (JSON from --config files and checkpoint metadata).
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/config.h"
#include "models/stack_config.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tfm::models::TransformerConfig::from_json(text, "fuzz");
  } catch (const tfm::Error&) {
  }
  try {
    tfm::models::StackConfig::from_json(text, "fuzz");
  } catch (const tfm::Error&) {
  }
  return 0;
}
