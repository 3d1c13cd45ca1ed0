#include "serve/images.h"

// jpeglib.h needs size_t and FILE declared before it.
#include <cstddef>
#include <cstdio>
#include <csetjmp>

#include <jpeglib.h>
#include <png.h>

#include "serve/request.h"

namespace tfm::serve {

namespace {

constexpr int64_t kMaxPixels = 4096 * 4096;  // a larger image is refused before it is decoded

struct Decoded {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // [height, width, channels] as the file's libraries give them
};

Decoded decode_png(std::string_view bytes, int64_t channels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    throw HttpError(400, std::string("the PNG image cannot be read: ") + image.message);
  if (int64_t{image.width} * image.height > kMaxPixels) {
    png_image_free(&image);
    throw HttpError(400, "the image is larger than 4096x4096 pixels");
  }
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  Decoded d{image.width, image.height, std::vector<uint8_t>(PNG_IMAGE_SIZE(image))};
  if (!png_image_finish_read(&image, nullptr, d.pixels.data(), 0, nullptr))
    throw HttpError(400, std::string("the PNG image cannot be read: ") + image.message);
  return d;
}

// libjpeg reports errors through a callback that must not return: it jumps back here.
struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf back;
  char message[JMSG_LENGTH_MAX];
};

void on_jpeg_error(j_common_ptr info) {
  JpegError* e = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, e->message);
  std::longjmp(e->back, 1);
}

Decoded decode_jpeg(std::string_view bytes, int64_t channels) {
  jpeg_decompress_struct info{};
  JpegError error{};
  info.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = on_jpeg_error;
  error.manager.emit_message = [](j_common_ptr, int) {};  // warnings (a truncated file) are not the server's log's
  Decoded d;
  if (setjmp(error.back)) {  // no C++ object with a destructor is made between here and the jumps
    jpeg_destroy_decompress(&info);
    throw HttpError(400, std::string("the JPEG image cannot be read: ") + error.message);
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(&info, TRUE);
  info.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  d.width = info.image_width, d.height = info.image_height;
  if (d.width * d.height > kMaxPixels) {
    jpeg_destroy_decompress(&info);
    throw HttpError(400, "the image is larger than 4096x4096 pixels");
  }
  d.pixels.resize(static_cast<size_t>(d.width * d.height * channels));
  jpeg_start_decompress(&info);
  while (info.output_scanline < info.output_height) {
    unsigned char* row = d.pixels.data() + static_cast<size_t>(info.output_scanline) * static_cast<size_t>(d.width * channels);
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return d;
}

}  // namespace

std::vector<uint8_t> decode_image(std::string_view bytes, int64_t channels, int64_t size) {
  const bool png = bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8);
  const bool jpeg = bytes.substr(0, 3) == std::string_view("\xff\xd8\xff", 3);
  if (!png && !jpeg) throw HttpError(400, "the image is neither PNG nor JPEG");
  const Decoded d = png ? decode_png(bytes, channels) : decode_jpeg(bytes, channels);
  if (d.width != size || d.height != size)
    throw HttpError(400, "the model takes " + std::to_string(size) + "x" + std::to_string(size) + " images; this one is " +
                             std::to_string(d.width) + "x" + std::to_string(d.height) + " (resize it first)");
  std::vector<uint8_t> out(d.pixels.size());  // [height, width, channels] -> [channels, height, width]
  const int64_t plane = size * size;
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < channels; ++c) out[static_cast<size_t>(c * plane + p)] = d.pixels[static_cast<size_t>(p * channels + c)];
  return out;
}

std::string decode_base64(std::string_view text) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char ch : text) {
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+') v = 62;
    else if (ch == '/') v = 63;
    else if (ch == '=' || ch == '\n' || ch == '\r' || ch == ' ') continue;
    else throw HttpError(400, "an image is not valid base64");
    bits = (bits << 6) | static_cast<uint32_t>(v), count += 6;
    if (count >= 8) count -= 8, out.push_back(static_cast<char>((bits >> count) & 0xff));
  }
  return out;
}

}  // namespace tfm::serve
