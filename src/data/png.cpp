// PNG through libpng's low-level interface (its simplified one converts 16-bit samples
// and alpha through linear light, which Pillow does not). libpng reports errors by
// longjmp, which must not cross C++ objects with destructors: each step that may fail
// runs in a function of plain C types that returns false instead.
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "data/image_codecs.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

constexpr size_t kMessageSize = 256;

// libpng's error, copied into the buffer its error pointer names.
void on_error(png_structp png, png_const_charp message) {
  std::snprintf(static_cast<char*>(png_get_error_ptr(png)), kMessageSize, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // what libpng goes on after (a bad ancillary chunk), so do we

struct PngSource {
  std::string_view bytes;
  size_t offset = 0;
  char message[kMessageSize] = "";  // libpng's error
};

void on_read(png_structp png, png_bytep out, size_t n) {
  PngSource& s = *static_cast<PngSource*>(png_get_io_ptr(png));
  if (s.bytes.size() - s.offset < n) png_error(png, "the file ends early");
  std::memcpy(out, s.bytes.data() + s.offset, n);
  s.offset += n;
}

struct PngShape {
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  bool grey16 = false;  // 16-bit grey rows, to clip
};

// Reads the header and asks for 8-bit grey or RGB rows: palettes looked up, grey of
// 1, 2 or 4 bits widened, 16-bit samples cut to their high byte (Pillow's RGB;16B and
// LA;16B), alpha (and a tRNS chunk) dropped, interlaced passes assembled. 16-bit grey
// stays 16-bit: Pillow reads it as integers (mode I) and clips them to 0..255 when it
// makes L or RGB pixels of them, which decode_png does too.
bool read_header(png_structp png, png_infop info, PngShape& shape) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const int type = png_get_color_type(png, info);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
  shape.grey16 = type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) == 16;
  if (!shape.grey16) png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  shape.width = png_get_image_width(png, info), shape.height = png_get_image_height(png, info), shape.channels = png_get_channels(png, info);
  return true;
}

bool read_rows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  return true;
}

// The read structures, destroyed however decoding ends.
struct PngReader {
  png_structp png;
  png_infop info = nullptr;
  explicit PngReader(PngSource& source) : png(png_create_read_struct(PNG_LIBPNG_VER_STRING, source.message, on_error, on_warning)) {
    TFM_CHECK(png, "libpng cannot start (out of memory)");
    info = png_create_info_struct(png);
    png_set_read_fn(png, &source, on_read);
  }
  ~PngReader() { png_destroy_read_struct(&png, &info, nullptr); }
};

}  // namespace

Image decode_png(std::string_view bytes, const std::string& origin, int64_t max_pixels) {
  PngSource source{bytes};
  PngReader reader(source);
  PngShape shape;
  TFM_CHECK(reader.info && read_header(reader.png, reader.info, shape), origin << ": not a readable PNG (" << source.message << ")");
  check_dimensions(shape.width, shape.height, origin, max_pixels);
  const size_t samples = size_t{shape.width} * shape.height * shape.channels, bytes_per_sample = shape.grey16 ? 2 : 1;
  std::vector<uint8_t> raw(samples * bytes_per_sample);
  std::vector<png_bytep> rows(shape.height);
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = raw.data() + y * shape.width * shape.channels * bytes_per_sample;
  TFM_CHECK(read_rows(reader.png, rows.data()), origin << ": not a readable PNG (" << source.message << ")");
  if (shape.grey16)  // big-endian samples, clipped to 0..255
    for (size_t i = 0; i < samples; ++i) raw[i] = static_cast<uint8_t>(std::min(255, raw[2 * i] << 8 | raw[2 * i + 1]));
  raw.resize(samples);
  return Image{shape.height, shape.width, shape.channels, std::move(raw)};
}

namespace {

void on_write(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}

bool write_png(png_structp png, png_infop info, const Image& image) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               image.channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < image.height; ++y) png_write_row(png, image.pixels.data() + y * image.width * image.channels);
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

std::string encode_png(const Image& image) {
  TFM_CHECK(image.channels == 1 || image.channels == 3, "a PNG is written from 1 or 3 channels, not " << image.channels);
  std::string bytes;
  char message[kMessageSize] = "";
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, message, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  png_set_write_fn(png, &bytes, on_write, nullptr);
  const bool ok = info && write_png(png, info, image);
  png_destroy_write_struct(&png, &info);
  TFM_CHECK(ok, "cannot encode a PNG (" << message << ")");
  return bytes;
}

}  // namespace tfm::data
