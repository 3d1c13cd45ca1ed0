// libFuzzer target: PyTorch checkpoints (pytorch_model.bin): the zip archive with the state
// dict's pickle and storages, and the restricted pickle reader alone (a mutated pickle inside
// an archive mostly fails its CRC-32 before the reader sees it).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/torch_checkpoint.h"
#include "io/torch_pickle.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    tfm::io::parse_torch_checkpoint(bytes, "fuzz");
  } catch (const tfm::Error&) {
  }
  try {
    tfm::io::unpickle_state_dict(bytes, "fuzz");
  } catch (const tfm::Error&) {
  }
  return 0;
}
