#include "ops/layer_norm.h"

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, float eps) {
  auto fn = kernel("layer_norm", &Kernels::layer_norm, {x_in, weight, bias});
  const int64_t d = x_in.size(-1);
  TFM_CHECK(weight.numel() == d && bias.numel() == d, "layer_norm: weight/bias of size " << weight.numel() << " for rows of " << d);
  expect_dtype("layer_norm", "every argument", {x_in, weight, bias}, DType::f32);
  const Tensor x = dense(x_in), w = dense(weight);
  const int64_t rows = x.numel() / d;
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  Tensor mean = Tensor::empty({rows}, DType::f32, x.device()), rstd = Tensor::empty({rows}, DType::f32, x.device());
  fn(x, w, dense(bias), eps, out, mean, rstd);

  Tensor xd = x.detach(), wd = w.detach();
  const Shape wshape = weight.shape();
  return autograd::record(out, "layer_norm", {x_in, weight, bias}, [xd, wd, mean, rstd, wshape](const Tensor& g) {
    Tensor dx = Tensor::empty(xd.shape(), DType::f32, xd.device());
    Tensor dw = Tensor::empty(wshape, DType::f32, xd.device()), db = Tensor::empty(wshape, DType::f32, xd.device());
    kernel("layer_norm", &Kernels::layer_norm_backward, {xd, g})(xd, wd, mean, rstd, dense(g), dx, dw, db);
    return std::vector<Tensor>{dx, dw, db};
  });
}

Tensor rms_norm(const Tensor& x_in, const Tensor& weight, float eps) {
  auto fn = kernel("rms_norm", &Kernels::rms_norm, {x_in, weight});
  const int64_t d = x_in.size(-1);
  TFM_CHECK(weight.numel() == d, "rms_norm: weight of size " << weight.numel() << " for rows of " << d);
  expect_dtype("rms_norm", "every argument", {x_in, weight}, DType::f32);
  const Tensor x = dense(x_in), w = dense(weight);
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  Tensor rstd = Tensor::empty({x.numel() / d}, DType::f32, x.device());  // [rows]
  fn(x, w, eps, out, rstd);

  Tensor xd = x.detach(), wd = w.detach();
  const Shape wshape = weight.shape();
  return autograd::record(out, "rms_norm", {x_in, weight}, [xd, wd, rstd, wshape](const Tensor& g) {
    Tensor dx = Tensor::empty(xd.shape(), DType::f32, xd.device()), dw = Tensor::empty(wshape, DType::f32, xd.device());
    kernel("rms_norm", &Kernels::rms_norm_backward, {xd, g})(xd, wd, rstd, dense(g), dx, dw);
    return std::vector<Tensor>{dx, dw};
  });
}

}  // namespace tfm::ops
