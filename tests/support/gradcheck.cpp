#include "support/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/autograd.h"
#include "ops/convert.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "tensor/rng.h"

namespace tfm::testing {

Tensor random_tensor(const Shape& shape, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(rng.uniform(lo, hi));
  return t;
}

Tensor bool_tensor(const Shape& shape, const std::vector<uint8_t>& flags) {
  return ops::to(Tensor::from_values<uint8_t>(shape, flags), DType::boolean);
}

namespace {

// sum(out * weights) in double, so the reduction adds no float32 rounding.
double weighted_sum(const Tensor& out, const std::vector<float>& weights) {
  std::vector<float> v = out.to_vector();
  double acc = 0.0;
  for (size_t i = 0; i < v.size(); ++i) acc += static_cast<double>(v[i]) * weights[i];
  return acc;
}

}  // namespace

GradcheckResult gradcheck(const OpFn& op, std::vector<Tensor> inputs, double eps) {
  for (Tensor& t : inputs) t.set_requires_grad(true);
  Tensor out = op(inputs);
  Tensor w = random_tensor(out.shape(), 12345, 0.5f, 1.5f);
  std::vector<float> weights = w.to_vector();
  // Analytic: backward of sum(out * w) through the op under test.
  Tensor scalar = ops::sum(ops::mul(out, w));
  autograd::backward(scalar);

  GradcheckResult result;
  autograd::NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor analytic = inputs[k].grad();
    std::vector<float> a = analytic.defined() ? analytic.to_vector() : std::vector<float>(inputs[k].numel(), 0.0f);
    float* x = inputs[k].data();
    for (int64_t i = 0; i < inputs[k].numel(); ++i) {
      const float saved = x[i];
      x[i] = static_cast<float>(saved + eps);
      const double up = weighted_sum(op(inputs), weights);
      x[i] = static_cast<float>(saved - eps);
      const double down = weighted_sum(op(inputs), weights);
      x[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      const double err = std::abs(a[i] - numeric) / std::max(1.0, std::abs(numeric));
      if (err > result.worst_error) {
        result.worst_error = err;
        std::ostringstream os;
        os << "input " << k << " element " << i << ": analytic " << a[i] << " numeric " << numeric;
        result.where = os.str();
      }
    }
  }
  return result;
}

}  // namespace tfm::testing
