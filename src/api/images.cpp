#include "tfm/images.h"

#include "data/image.h"

namespace tfm {

namespace {

Image public_image(data::Image&& d) { return {d.height, d.width, d.channels, std::move(d.pixels)}; }

}  // namespace

Image decode_image(std::string_view bytes, const std::string& origin, int64_t max_pixels) {
  return public_image(data::decode_image(bytes, origin, max_pixels));
}

Image read_image(const std::string& path) { return public_image(data::read_image(path)); }

}  // namespace tfm
