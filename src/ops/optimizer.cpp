#include "ops/optimizer.h"

#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u) {
  auto fn = kernel("adam_update", &Kernels::adam, {param, grad, exp_avg, exp_avg_sq});
  TFM_CHECK(grad.shape() == param.shape() && exp_avg.shape() == param.shape() && exp_avg_sq.shape() == param.shape() &&
                param.is_contiguous() && grad.is_contiguous() && exp_avg.is_contiguous() && exp_avg_sq.is_contiguous(),
            "adam_update: parameter " << shape_str(param.shape()) << ", gradient " << shape_str(grad.shape()));
  expect_dtype("adam_update", "every tensor", {param, grad, exp_avg, exp_avg_sq}, DType::f32);
  fn(param, grad, exp_avg, exp_avg_sq, u);
}

}  // namespace tfm::ops
