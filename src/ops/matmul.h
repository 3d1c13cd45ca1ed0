#pragma once
// Matrix products.
#include "tensor/tensor.h"

namespace tfm::ops {

// y = x W^T + b, as torch.nn.functional.linear.  x: [..., in], W: [out, in], b: [out] or undefined.
// The product runs in the precision set by set_linear_precision (ops/reduced_precision.h).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// relu(linear(x, W, b)) as one op: the same values and gradients, one tensor fewer,
// and with frozen f32 weights no pass of its own (the product's kernels apply it).
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias);

// Batched matrix product: a [..., M, K] @ b [..., K, N] with equal leading dims.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace tfm::ops
