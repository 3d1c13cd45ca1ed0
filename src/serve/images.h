#pragma once
// Images sent to POST /v1/classify and /v1/attention: PNG or JPEG bytes as the pixels a ViT takes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/classifier.h"

namespace tfm::serve {

// `bytes` (PNG or JPEG) as `classifier` takes them (tfm::Classifier::pixels_of); what the
// library refuses (neither format, a broken file, a size the model does not take) is an
// HttpError 400 saying so.
std::vector<uint8_t> model_pixels(std::string_view bytes, const Classifier& classifier);

// Standard base64 (RFC 4648, padding optional, whitespace ignored); 400 where malformed.
std::string decode_base64(std::string_view text);

}  // namespace tfm::serve
