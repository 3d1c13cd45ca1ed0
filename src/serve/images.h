#pragma once
// Images sent to POST /v1/classify: PNG or JPEG bytes decoded to the pixels a ViT takes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::serve {

// `bytes` (PNG or JPEG, told apart by their signatures) as `channels` (1: grey, 3: RGB)
// x size x size pixels, channel-major as the model takes them. An image of another size,
// or bytes that are neither, is an HttpError 400 saying so.
std::vector<uint8_t> decode_image(std::string_view bytes, int64_t channels, int64_t size);

// Standard base64 (RFC 4648, padding optional, whitespace ignored); 400 where malformed.
std::string decode_base64(std::string_view text);

}  // namespace tfm::serve
