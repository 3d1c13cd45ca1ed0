// libFuzzer target: PNG and JPEG decoding, and the resize of what decodes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "data/image.h"
#include "data/resize.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tfm::data::Image image = tfm::data::decode_image(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (image.height * image.width <= 1 << 16) tfm::data::resize(image, 7, 5, tfm::data::Resample::Bicubic);
  } catch (const tfm::Error&) {
  }
  return 0;
}
