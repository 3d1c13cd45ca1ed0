#include "ops/convert.h"

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  TFM_CHECK(!(x.requires_grad() && autograd::grad_enabled()),
            "converting a tensor that takes part in autograd to " << to_string(dtype) << " is not differentiable; detach it first");
  auto fn = kernel("to", &Kernels::convert, {x});
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  fn(dense(x), out);
  return out;
}

Tensor from_pixels(const Tensor& pixels) {
  auto fn = kernel("from_pixels", &Kernels::from_pixels, {pixels});
  TFM_CHECK(pixels.dtype() == DType::u8, "pixels must be u8, got " << to_string(pixels.dtype()));
  Tensor out = Tensor::empty(pixels.shape(), DType::f32, pixels.device());
  fn(dense(pixels), out);
  return out;
}

Tensor to(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);  // fails where the build has no such device
  out.copy_from(x);
  return out;
}

}  // namespace tfm::ops
