#include "ops/optimizer.h"

#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

void clip_to_norm(Tensor& x, const Tensor& squares, float max_norm) {
  auto fn = kernel("clip_grad_norm", &Kernels::clip_to_norm, {x, squares});
  TFM_CHECK(x.is_contiguous() && squares.numel() == 2, "clip_grad_norm: gradients " << shape_str(x.shape()) << ", sum of squares "
                                                                                    << shape_str(squares.shape()));
  expect_dtype("clip_grad_norm", "every tensor", {x, squares}, DType::f32);
  fn(x, squares, max_norm);
}

void adam_update(const std::vector<AdamTensors>& params, const AdamUpdate& u) {
  if (params.empty()) return;
  auto fn = kernel("adam_update", &Kernels::adam, {params.front().param});
  for (const AdamTensors& t : params) {
    device_of("adam_update", {params.front().param, t.param, t.grad, t.exp_avg, t.exp_avg_sq});
    const Tensor& p = t.param;
    TFM_CHECK(t.grad.shape() == p.shape() && t.exp_avg.shape() == p.shape() && t.exp_avg_sq.shape() == p.shape() && p.is_contiguous() &&
                  t.grad.is_contiguous() && t.exp_avg.is_contiguous() && t.exp_avg_sq.is_contiguous(),
              "adam_update: parameter " << shape_str(p.shape()) << ", gradient " << shape_str(t.grad.shape()));
    expect_dtype("adam_update", "every tensor", {p, t.grad, t.exp_avg, t.exp_avg_sq}, DType::f32);
  }
  fn(params, u);
}

}  // namespace tfm::ops
