#include "data/image.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "data/image_codecs.h"
#include "io/input_file.h"
#include "tensor/error.h"

namespace tfm::data {

void check_dimensions(int64_t width, int64_t height, const std::string& origin, int64_t max_pixels) {
  TFM_CHECK(width > 0 && height > 0, origin << ": no pixels (" << width << "x" << height << ")");
  TFM_CHECK(width * height <= std::min(max_pixels, kMaxImagePixels),
            origin << ": " << width << "x" << height << " pixels, more than the " << std::min(max_pixels, kMaxImagePixels)
                   << (max_pixels < kMaxImagePixels ? " allowed here" : " tfm reads"));
}

Image decode_image(std::string_view bytes, const std::string& origin, int64_t max_pixels) {
  if (bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return decode_png(bytes, origin, max_pixels);
  if (bytes.substr(0, 3) == std::string_view("\xff\xd8\xff", 3)) return decode_jpeg(bytes, origin, max_pixels);
  throw Error(origin + ": neither PNG nor JPEG (by its first bytes)");
}

Image read_image(const std::string& path) {
  io::check_input_file(path, int64_t{1} << 28, "image");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TFM_CHECK(!in.bad(), path << ": cannot read the image");
  return decode_image(bytes, path);
}

namespace {

// Pillow's convert("RGB") of a grey image: the value in every channel.
Image grey_to_rgb(const Image& grey) {
  Image out{grey.height, grey.width, 3, {}};
  out.pixels.reserve(grey.pixels.size() * 3);
  for (uint8_t v : grey.pixels) out.pixels.insert(out.pixels.end(), {v, v, v});
  return out;
}

// Pillow's convert("L"): ITU-R 601-2 luma in 16-bit fixed point, rounded (the weights sum to 2^16).
Image rgb_to_grey(const Image& rgb) {
  Image out{rgb.height, rgb.width, 1, {}};
  out.pixels.reserve(rgb.pixels.size() / 3);
  for (size_t p = 0; p < rgb.pixels.size(); p += 3)
    out.pixels.push_back(static_cast<uint8_t>((19595u * rgb.pixels[p] + 38470u * rgb.pixels[p + 1] + 7471u * rgb.pixels[p + 2] + 0x8000u) >> 16));
  return out;
}

}  // namespace

Image with_channels(const Image& image, int64_t channels) {
  TFM_CHECK(channels == 1 || channels == 3, "images have 1 or 3 channels, not " << channels);
  if (image.channels == channels) return image;
  return channels == 3 ? grey_to_rgb(image) : rgb_to_grey(image);
}

std::vector<uint8_t> channel_major(const Image& image) {
  const int64_t plane = image.height * image.width, C = image.channels;
  std::vector<uint8_t> out(image.pixels.size());
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < C; ++c) out[static_cast<size_t>(c * plane + p)] = image.pixels[static_cast<size_t>(p * C + c)];
  return out;
}

}  // namespace tfm::data
