#include "ops/optimizer.h"

#include <cmath>

#include "tensor/error.h"
#include "threads/parallel.h"

namespace tfm::ops {

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u) {
  TFM_CHECK(grad.shape() == param.shape() && param.is_contiguous() && grad.is_contiguous() && exp_avg.is_contiguous() &&
                exp_avg_sq.is_contiguous(),
            "adam_update: parameter " << shape_str(param.shape()) << ", gradient " << shape_str(grad.shape()));
  float* p = param.data();
  float* m = exp_avg.data();
  float* v = exp_avg_sq.data();
  const float* gp = grad.data();
  const int64_t n = param.numel();
  parallel_for(n, n > (1 << 14), [&](int64_t i) {
    const float gi = u.l2 != 0.0f ? gp[i] + u.l2 * p[i] : gp[i];
    p[i] *= u.shrink;
    m[i] = m[i] * u.beta1 + gi * (1.0f - u.beta1);
    v[i] = v[i] * u.beta2 + gi * gi * (1.0f - u.beta2);
    const float denom = std::sqrt(v[i]) / u.bc2_sqrt + u.eps;
    p[i] -= u.step_size * (m[i] / denom);
  });
}

}  // namespace tfm::ops
