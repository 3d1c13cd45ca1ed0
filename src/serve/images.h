#pragma once
// Images sent to POST /v1/classify and /v1/attention: PNG or JPEG bytes as the pixels a ViT takes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/classifier.h"

namespace tfm::serve {

// `bytes` (PNG or JPEG) as `classifier` takes them (tfm::Classifier::pixels_of), if its
// header claims at most `budget` pixels, which the image's are taken from; what the
// library refuses (neither format, a broken file, a size the model does not take, more
// pixels than the budget) is an HttpError 400 saying so. One small PNG can claim 64
// million pixels (8000 x 8000 of one colour compresses to 62 KB and took 360 MB to
// decode and resize), so at most two images are decoded at once, whatever the number
// of connections, and the memory of a large one is given back to the system after.
std::vector<uint8_t> model_pixels(std::string_view bytes, const Classifier& classifier, int64_t& budget);

// Standard base64 (RFC 4648, padding optional, whitespace ignored); 400 where malformed.
std::string decode_base64(std::string_view text);

}  // namespace tfm::serve
