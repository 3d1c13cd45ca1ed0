#pragma once
// Image files for the Vision Transformer: PNG and JPEG decoded as Pillow's
// Image.open(f).convert("L" or "RGB") gives them (8-bit, 1 or 3 channels, alpha dropped).
//
//   tfm::Image image = tfm::read_image("cat.jpg");        // [height, width, channels] bytes
//   tfm::Classifier classifier("runs/vit/best.safetensors");
//   tfm::Classification c = classifier.classify(classifier.pixels_of(image), 1);
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/export.h"

namespace tfm {

struct Image {
  int64_t height = 0, width = 0, channels = 0;  // channels: 1 (grey) or 3 (RGB)
  std::vector<uint8_t> pixels;                  // [height, width, channels], row by row
};

// PNG (grey, grey + alpha, RGB, RGBA, palette; 1 to 16 bits; interlaced or not) or JPEG
// (grey or colour; CMYK is refused), told apart by their first bytes. Throws
// std::runtime_error with one line naming `origin` where the bytes are neither, cannot be
// decoded, or claim more than `max_pixels` pixels (at most 67,108,864: 8,192 x 8,192),
// before their pixels are allocated.
TFM_API Image decode_image(std::string_view bytes, const std::string& origin = "the image", int64_t max_pixels = int64_t{1} << 26);
// The file at `path`, named in errors.
TFM_API Image read_image(const std::string& path);

}  // namespace tfm
