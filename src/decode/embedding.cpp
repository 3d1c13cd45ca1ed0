#include "decode/embedding.h"

#include "autograd/autograd.h"
#include "ops/convert.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::decode {

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::mean;
  if (name == "cls") return Pooling::cls;
  TFM_CHECK(false, "unknown pooling '" << name << "' (mean or cls)");
  return Pooling::mean;
}

std::vector<float> sentence_vector(models::BERT& model, const std::vector<int>& ids, Pooling pool) {
  autograd::NoGradGuard no_grad;
  const int64_t len = static_cast<int64_t>(ids.size()), D = model.config().d_model;
  const Tensor hidden = ops::contiguous(ops::to(model.encode({ids, 1, len}), Device::CPU));  // [1, len, d_model]
  // [CLS] alone, or the mean over the tokens after it ([CLS] too for an empty sentence).
  const int64_t first = pool == Pooling::cls || len == 1 ? 0 : 1, last = pool == Pooling::cls ? 1 : len;
  std::vector<double> sum(static_cast<size_t>(D), 0.0);
  for (int64_t t = first; t < last; ++t)
    for (int64_t i = 0; i < D; ++i) sum[static_cast<size_t>(i)] += hidden.data()[t * D + i] / static_cast<double>(last - first);
  std::vector<float> out(sum.begin(), sum.end());
  expect_finite(out.data(), out.size(), "embeddings");
  return out;
}

}  // namespace tfm::decode
