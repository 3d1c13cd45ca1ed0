#include "tfm/classifier.h"

#include <algorithm>
#include <map>
#include <optional>

#include "api/inference.h"

#include "autograd/autograd.h"
#include "data/image_processor.h"
#include "decode/family_checkpoint.h"
#include "models/vit.h"
#include "ops/convert.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "tensor/error.h"

namespace tfm {

struct Classifier::Impl : api::FamilyModel<models::ViT> {
  decode::VitClasses classes;
  std::optional<data::ImageProcessor> processor;  // none: tfm's own pixels
  Impl(const std::string& path, const ModelOptions& o)
      : FamilyModel(path, "vit", "a ViT from `tfm vit train`", o),
        classes(decode::recorded_vit_classes(checkpoint.file.metadata, model.config().classes, path)),
        processor(decode::recorded_image_processor(checkpoint.file.metadata, path)) {}

  // `count` images of pixels as the model takes them: normalised as its image processor
  // says, or as tfm's training did (pixels / 127.5 - 1).
  Tensor input(const std::vector<uint8_t>& pixels, int64_t count) const {
    const models::StackConfig& c = model.config();
    const int64_t C = c.channels, S = c.image_size;
    if (!processor) return ops::from_pixels(Tensor::from_values({count, C, S, S}, pixels));
    return Tensor::from_values({count, C, S, S}, processor->normalise(pixels, C, S, S));
  }
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
  const data::Image d{image.height, image.width, image.channels, image.pixels};
  if (impl_->processor) {  // a Hugging Face ViT's own steps
    const auto [h, w] = impl_->processor->output_size(image.height, image.width);
    TFM_CHECK(h == S && w == S, "the model's image processor makes this " << image.width << "x" << image.height << " image " << w << "x" << h
                                                                          << " pixels; the model takes " << S << "x" << S);
    return impl_->processor->pixels(d, channels());
  }
  const bool resizes = impl_->classes.resizes;  // trained on an image folder
  TFM_CHECK(resizes || (image.height == S && image.width == S),
            "the model takes " << S << "x" << S << " images; this one is " << image.width << "x" << image.height << " (resize it first)");
  return data::vit_pixels(d, channels(), S);
}

namespace {

void check_pixels(const std::vector<uint8_t>& pixels, int64_t count, int64_t C, int64_t S) {
  TFM_CHECK(count >= 0 && static_cast<int64_t>(pixels.size()) == count * C * S * S,
            pixels.size() << " pixels given for " << count << " images of " << C << "x" << S << "x" << S << " (" << C * S * S << " each)");
}

}  // namespace

bool Classifier::has_classifier() const { return impl_->model.has_classifier(); }
bool Classifier::has_pooler() const { return impl_->model.config().pooler; }
int64_t Classifier::dim() const { return impl_->model.config().d_model; }

Embeddings Classifier::embed(const std::vector<uint8_t>& pixels, int64_t count, const std::string& pool) const {
  const std::string chosen = pool.empty() ? (has_pooler() ? "pooler" : "cls") : pool;
  TFM_CHECK(chosen == "cls" || chosen == "pooler", "image features are pooled by 'pooler' or 'cls', not '" << pool << "'");
  TFM_CHECK(chosen == "cls" || has_pooler(), "this model has no pooler (a classifier's checkpoint keeps none): take its 'cls' features");
  check_pixels(pixels, count, channels(), image_size());
  Embeddings out{count, dim(), {}, 0};
  if (count == 0) return out;
  autograd::NoGradGuard no_grad;
  const Tensor hidden = impl_->model.hidden_states(impl_->input(pixels, count));  // [count, tokens, d]
  const Tensor vectors = chosen == "pooler" ? impl_->model.pooled(hidden) : ops::slice(hidden, 1, 0, 1);
  out.values = ops::contiguous(ops::to(vectors, Device::CPU)).to_vector();
  expect_finite(out.values.data(), out.values.size(), "image features");
  return out;
}

Classification Classifier::classify(const std::vector<uint8_t>& pixels, int64_t count) const {
  const int64_t K = classes();
  TFM_CHECK(has_classifier(), impl_->checkpoint.path << ": " << kNoClassifier);
  check_pixels(pixels, count, channels(), image_size());
  Classification out{count, K, {}, {}};
  if (count == 0) return out;
  autograd::NoGradGuard no_grad;
  const Tensor logits = impl_->model.forward(impl_->input(pixels, count));  // [count, classes]
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
  impl_->model.hidden_states(impl_->input(pixels, 1), &maps);
  return api::weights_of(maps.self);
}

}  // namespace tfm
