// libFuzzer target: the IDX image/label format.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/idx.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tfm::data::parse_idx(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const tfm::Error&) {
  }
  return 0;
}
