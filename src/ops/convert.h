#pragma once
// Conversions between dtypes and devices: PyTorch's Tensor.to.
#include "tensor/tensor.h"

namespace tfm::ops {

// x's values as `dtype` (x itself when it has that dtype already). Floats round to
// nearest even (bf16, f16); a float becomes an integer by truncation toward zero,
// saturated to the type's range, NaN as 0; any non-zero value is true. Not
// differentiable: converting a tensor that takes part in autograd is an error.
Tensor to(const Tensor& x, DType dtype);

// x on `device` (x itself when it is there already).
Tensor to(const Tensor& x, Device device);

// Image pixels (u8, any shape) as f32 in [-1, 1]: v / 127.5 - 1, torchvision's ToTensor
// then Normalize(0.5, 0.5), as the ViT recipe feeds images.
Tensor from_pixels(const Tensor& pixels);

}  // namespace tfm::ops
