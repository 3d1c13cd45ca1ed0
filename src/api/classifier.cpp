#include "tfm/classifier.h"

#include <algorithm>

#include "autograd/autograd.h"
#include "decode/family_checkpoint.h"
#include "io/checkpoint.h"
#include "models/vit.h"
#include "ops/convert.h"
#include "ops/reduced_precision.h"
#include "ops/softmax.h"
#include "tensor/error.h"

namespace tfm {

struct Classifier::Impl {
  std::unique_ptr<models::ViT> model;

  Impl(const std::string& path, const ClassifierOptions& o) {
    decode::FamilyCheckpoint c = decode::open_family_checkpoint(path, "vit", "a ViT from `tfm vit train`");
    model = std::make_unique<models::ViT>(c.config);
    io::load_parameters(model->named_parameters(), c.file, path);
    model->eval();
    model->products().set_precision(ops::parse_precision(o.precision));
    model->products().freeze();
  }
};

Classifier::Classifier(const std::string& checkpoint, const ClassifierOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Classifier::~Classifier() = default;

int64_t Classifier::image_size() const { return impl_->model->config().image_size; }
int64_t Classifier::channels() const { return impl_->model->config().channels; }
int64_t Classifier::classes() const { return impl_->model->config().classes; }

Classification Classifier::classify(const std::vector<uint8_t>& pixels, int64_t count) const {
  const int64_t C = channels(), S = image_size(), K = classes();
  TFM_CHECK(count >= 0 && static_cast<int64_t>(pixels.size()) == count * C * S * S,
            pixels.size() << " pixels given for " << count << " images of " << C << "x" << S << "x" << S << " (" << C * S * S << " each)");
  Classification out{count, K, {}, {}};
  if (count == 0) return out;
  autograd::NoGradGuard no_grad;
  const Tensor images = ops::from_pixels(Tensor::from_values({count, C, S, S}, pixels));   // [count, C, S, S]
  out.probabilities = ops::softmax(impl_->model->forward(images)).to_vector();            // [count, classes]
  for (int64_t i = 0; i < count; ++i) {
    const float* row = out.probabilities.data() + i * K;
    out.labels.push_back(std::max_element(row, row + K) - row);
  }
  return out;
}

}  // namespace tfm
