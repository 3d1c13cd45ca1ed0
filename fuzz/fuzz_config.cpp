// libFuzzer target: model configurations (JSON from --config files and checkpoint metadata),
// and the models a small valid one builds: a size that passes validation must never
// overflow a shape.
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/bert.h"
#include "models/config.h"
#include "models/encoder_decoder.h"
#include "models/gpt.h"
#include "models/stack_config.h"
#include "models/vit.h"
#include "tensor/error.h"

namespace {

constexpr int64_t kBuildLimit = int64_t{1} << 16;  // weights: keeps each input fast

template <class Model, class Config, class... Args>
void build_if_small(const Config& c, Args... args) {
  if (c.weight_floats() <= kBuildLimit) Model model(c, args...);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    build_if_small<tfm::models::EncoderDecoder>(tfm::models::TransformerConfig::from_json(text, "fuzz"));
  } catch (const tfm::Error&) {
  }
  for (const char* family : {"gpt", "bert", "vit"}) {
    try {
      const tfm::models::StackConfig c = tfm::models::StackConfig::from_json(text, "fuzz", family);
      if (c.family == "gpt") build_if_small<tfm::models::GPT>(c);
      if (c.family == "bert") build_if_small<tfm::models::BERT>(c, /*pad_id=*/0);
      if (c.family == "vit") build_if_small<tfm::models::ViT>(c);
    } catch (const tfm::Error&) {
    }
  }
  return 0;
}
