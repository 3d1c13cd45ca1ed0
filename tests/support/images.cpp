#include "support/images.h"

// jpeglib.h needs size_t and FILE declared before it.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
#include <png.h>

#include <stdexcept>

namespace tfm::testing {

std::string png_bytes(const PngSpec& spec) {
  std::string bytes;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) throw std::runtime_error("the test's PNG writer failed");
  png_set_write_fn(
      png, &bytes, [](png_structp p, png_bytep d, size_t n) { static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<char*>(d), n); },
      nullptr);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, spec.color_type,
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> palette;
  for (size_t i = 0; i + 2 < spec.palette.size(); i += 3) palette.push_back({spec.palette[i], spec.palette[i + 1], spec.palette[i + 2]});
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  if (!spec.transparency.empty())
    png_set_tRNS(png, info, spec.transparency.data(), static_cast<int>(spec.transparency.size()), nullptr);
  png_write_info(png, info);
  std::vector<std::string> rows = spec.rows;
  std::vector<png_bytep> pointers;
  for (std::string& r : rows) pointers.push_back(reinterpret_cast<png_bytep>(r.data()));
  png_set_interlace_handling(png);
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return bytes;
}

namespace {

// A sample as the compressor takes it: CMYK as ink (255 - RGB), with no black.
unsigned char sample(const data::Image& image, int64_t y, int64_t x, int c, bool cmyk) {
  if (!cmyk) return image.at(y, x, c);
  return c < 3 ? static_cast<unsigned char>(255 - image.at(y, x, c)) : 0;
}

}  // namespace

std::string jpeg_bytes(const data::Image& image, int quality, bool cmyk) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &out, &size);
  info.image_width = static_cast<JDIMENSION>(image.width), info.image_height = static_cast<JDIMENSION>(image.height);
  info.input_components = cmyk ? 4 : static_cast<int>(image.channels);
  info.in_color_space = cmyk ? JCS_CMYK : image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  std::vector<unsigned char> row(static_cast<size_t>(image.width * info.input_components));
  for (int64_t y = 0; y < image.height; ++y) {
    for (int64_t x = 0; x < image.width; ++x)
      for (int c = 0; c < info.input_components; ++c)
        row[static_cast<size_t>(x * info.input_components + c)] = sample(image, y, x, c, cmyk);
    unsigned char* p = row.data();
    jpeg_write_scanlines(&info, &p, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::string bytes(reinterpret_cast<char*>(out), size);
  free(out);
  return bytes;
}

}  // namespace tfm::testing
