#pragma once
// Image files: PNG and JPEG decoded to 8-bit pixels with 1 (grey) or 3 (RGB) channels,
// as Pillow's Image.open(f).convert("L" or "RGB") gives them: alpha dropped (not
// composited), palettes looked up, grey of 1, 2 or 4 bits stretched to 0..255, interlaced
// PNGs and progressive JPEGs assembled, 16-bit colour cut to its high byte and 16-bit
// grey clipped to 0..255 (Pillow's ways). CMYK JPEGs are refused. Every error is one line
// naming the file (or `origin`), and a file whose header claims more than kMaxImagePixels
// (or a caller's smaller budget) is refused before anything is allocated for it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::data {

// 8,192 x 8,192 pixels, 192 MiB in RGB: above any photograph a ViT is given.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

struct Image {
  int64_t height = 0, width = 0, channels = 0;  // channels: 1 (grey) or 3 (RGB)
  std::vector<uint8_t> pixels;                  // [height, width, channels], row by row

  uint8_t at(int64_t y, int64_t x, int64_t c) const { return pixels[static_cast<size_t>((y * width + x) * channels + c)]; }
};

// PNG or JPEG, told apart by their first bytes; `origin` names the bytes in errors; one
// claiming more than `max_pixels` is refused.
Image decode_image(std::string_view bytes, const std::string& origin, int64_t max_pixels = kMaxImagePixels);
// The file at `path` (a regular file of at most 256 MiB).
Image read_image(const std::string& path);

// The image with `channels` channels, as Pillow's convert(): grey to RGB repeats the
// grey value; RGB to grey is ITU-R 601-2 luma, L = (19595 R + 38470 G + 7471 B + 2^15) >> 16.
Image with_channels(const Image& image, int64_t channels);

// [channels, height, width]: the channel-major layout a model takes.
std::vector<uint8_t> channel_major(const Image& image);

// An 8-bit grey or RGB PNG of the image (not interlaced, zlib's default compression).
std::string encode_png(const Image& image);

}  // namespace tfm::data
