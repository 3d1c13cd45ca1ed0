#include "tfm/classifier.h"

#include <algorithm>

#include "api/inference.h"

#include "autograd/autograd.h"
#include "data/image_processor.h"
#include "decode/family_checkpoint.h"
#include "models/vit.h"
#include "ops/convert.h"
#include "ops/softmax.h"
#include "tensor/error.h"

namespace tfm {

struct Classifier::Impl : api::FamilyModel<models::ViT> {
  decode::VitClasses classes;
  Impl(const std::string& path, const ModelOptions& o)
      : FamilyModel(path, "vit", "a ViT from `tfm vit train`", o),
        classes(decode::recorded_vit_classes(checkpoint.file.metadata, model.config().classes, path)) {}
};

Classifier::Classifier(const std::string& checkpoint, const ModelOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Classifier::~Classifier() = default;

int64_t Classifier::image_size() const { return impl_->model.config().image_size; }
int64_t Classifier::patch_size() const { return impl_->model.config().patch; }
int64_t Classifier::channels() const { return impl_->model.config().channels; }
int64_t Classifier::classes() const { return impl_->model.config().classes; }
const std::vector<std::string>& Classifier::class_names() const { return impl_->classes.names; }

std::vector<uint8_t> Classifier::pixels_of(const Image& image) const {
  TFM_CHECK((image.channels == 1 || image.channels == 3) && image.height >= 1 && image.width >= 1 &&
                static_cast<int64_t>(image.pixels.size()) == image.height * image.width * image.channels,
            "an image of " << image.height << "x" << image.width << " pixels, " << image.channels << " channels, holds "
                           << image.pixels.size() << " bytes");
  const int64_t S = image_size();
  const bool resizes = impl_->classes.resizes;  // trained on an image folder, or a Hugging Face ViT
  TFM_CHECK(resizes || (image.height == S && image.width == S),
            "the model takes " << S << "x" << S << " images; this one is " << image.width << "x" << image.height << " (resize it first)");
  return data::vit_pixels({image.height, image.width, image.channels, image.pixels}, channels(), S);
}

Classification Classifier::classify(const std::vector<uint8_t>& pixels, int64_t count) const {
  const int64_t C = channels(), S = image_size(), K = classes();
  TFM_CHECK(count >= 0 && static_cast<int64_t>(pixels.size()) == count * C * S * S,
            pixels.size() << " pixels given for " << count << " images of " << C << "x" << S << "x" << S << " (" << C * S * S << " each)");
  Classification out{count, K, {}, {}};
  if (count == 0) return out;
  autograd::NoGradGuard no_grad;
  const Tensor images = ops::from_pixels(Tensor::from_values({count, C, S, S}, pixels));   // [count, C, S, S]
  const Tensor logits = impl_->model.forward(images);                                     // [count, classes]
  const std::vector<float> scores = logits.to_vector();
  expect_finite(scores.data(), scores.size(), "class scores");
  out.probabilities = ops::softmax(logits).to_vector();
  for (int64_t i = 0; i < count; ++i) {
    const float* row = out.probabilities.data() + i * K;
    out.labels.push_back(std::max_element(row, row + K) - row);
  }
  return out;
}

AttentionWeights Classifier::attention(const std::vector<uint8_t>& pixels) const {
  const int64_t C = channels(), S = image_size();
  TFM_CHECK(static_cast<int64_t>(pixels.size()) == C * S * S, pixels.size() << " pixels given for one image of " << C << "x" << S << "x" << S);
  nn::AttentionMaps maps;
  autograd::NoGradGuard no_grad;
  impl_->model.forward(ops::from_pixels(Tensor::from_values({1, C, S, S}, pixels)), &maps);
  return api::weights_of(maps.self);
}

}  // namespace tfm
