// JPEG through libjpeg(-turbo) with its default decoding (islow DCT, fancy upsampling),
// as Pillow decodes. libjpeg reports errors through a callback that must not return:
// it longjmps back, which must not cross C++ objects with destructors, so each step
// that may fail runs in a function of plain C types that returns false instead.
//
// jpeglib.h needs size_t and FILE declared before it.
#include <cstddef>
#include <cstdio>
#include <csetjmp>

#include <jpeglib.h>
#include <jerror.h>

#include <vector>

#include "data/image_codecs.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf back;
  char message[JMSG_LENGTH_MAX] = "";
};

void on_error(j_common_ptr info) {
  JpegErrors& e = *reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, e.message);
  std::longjmp(e.back, 1);
}

// Warnings pass (extraneous bytes, as Pillow lets them), except a file that ends early,
// which libjpeg would fill with grey: Pillow refuses it too.
void on_message(j_common_ptr info, int level) {
  if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) on_error(info);
}

struct JpegShape {
  JDIMENSION width = 0, height = 0;
  int channels = 0;
  bool cmyk = false;
};

// Reads the header and asks for grey (a greyscale file) or RGB (any other but CMYK).
bool read_header(jpeg_decompress_struct& info, JpegErrors& errors, std::string_view bytes, JpegShape& shape) {
  if (setjmp(errors.back)) return false;
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(&info, TRUE);
  const J_COLOR_SPACE space = info.jpeg_color_space;
  info.out_color_space = space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
  shape = {info.image_width, info.image_height, space == JCS_GRAYSCALE ? 1 : 3, space == JCS_CMYK || space == JCS_YCCK};
  return true;
}

bool read_rows(jpeg_decompress_struct& info, JpegErrors& errors, unsigned char* out, size_t row_bytes) {
  if (setjmp(errors.back)) return false;
  jpeg_start_decompress(&info);
  while (info.output_scanline < info.output_height) {
    unsigned char* row = out + info.output_scanline * row_bytes;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  return true;
}

// The decompressor and its error manager, destroyed however decoding ends.
struct JpegReader {
  jpeg_decompress_struct info{};
  JpegErrors errors;
  JpegReader() {
    info.err = jpeg_std_error(&errors.manager);
    errors.manager.error_exit = on_error;
    errors.manager.emit_message = on_message;
  }
  ~JpegReader() { jpeg_destroy_decompress(&info); }
};

}  // namespace

Image decode_jpeg(std::string_view bytes, const std::string& origin, int64_t max_pixels) {
  JpegReader reader;
  JpegShape shape;
  TFM_CHECK(read_header(reader.info, reader.errors, bytes, shape), origin << ": not a readable JPEG (" << reader.errors.message << ")");
  TFM_CHECK(!shape.cmyk, origin << ": a CMYK JPEG, which tfm does not read (convert it to RGB)");
  check_dimensions(shape.width, shape.height, origin, max_pixels);
  Image image{shape.height, shape.width, shape.channels, std::vector<uint8_t>(size_t{shape.width} * shape.height * shape.channels)};
  TFM_CHECK(read_rows(reader.info, reader.errors, image.pixels.data(), size_t{shape.width} * shape.channels),
            origin << ": not a readable JPEG (" << reader.errors.message << ")");
  return image;
}

}  // namespace tfm::data
