#pragma once
// The decoders behind data::decode_image (image.h), one file each: png.cpp and jpeg.cpp.
#include <cstdint>
#include <string>
#include <string_view>

#include "data/image.h"

namespace tfm::data {

Image decode_png(std::string_view bytes, const std::string& origin, int64_t max_pixels);
Image decode_jpeg(std::string_view bytes, const std::string& origin, int64_t max_pixels);

// Refuses a header's dimensions (zero, or more than max_pixels) before the pixels are allocated.
void check_dimensions(int64_t width, int64_t height, const std::string& origin, int64_t max_pixels);

}  // namespace tfm::data
