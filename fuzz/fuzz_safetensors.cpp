// libFuzzer target: the safetensors reader and the checkpoint metadata on top of it
// (every byte of a checkpoint comes from outside).
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/checkpoint.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tfm::io::SafeTensors file = tfm::io::parse_safetensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    tfm::io::checkpoint_info(file, "fuzz");
  } catch (const tfm::Error&) {
  }
  return 0;
}
