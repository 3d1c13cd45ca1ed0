#pragma once
// Image files for the tests, made with libpng and libjpeg directly: every PNG colour type,
// bit depth and interlacing, and JPEGs (tfm itself writes only 8-bit PNGs and reads JPEGs).
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace tfm::testing {

struct PngSpec {
  int width = 0, height = 0;
  int color_type = 0;  // PNG_COLOR_TYPE_*
  int bit_depth = 8;
  bool interlaced = false;
  std::vector<std::string> rows;       // each row's samples as the PNG stores them (packed bits, big-endian 16-bit)
  std::vector<uint8_t> palette;        // PNG_COLOR_TYPE_PALETTE: r, g, b per entry
  std::vector<uint8_t> transparency;   // a tRNS chunk: one alpha per palette entry
};
std::string png_bytes(const PngSpec& spec);

// A baseline JPEG of `image` (1 or 3 channels) at `quality`; with `cmyk`, a 4-channel
// Adobe CMYK file of the RGB image (K = 0).
std::string jpeg_bytes(const data::Image& image, int quality = 95, bool cmyk = false);

}  // namespace tfm::testing
