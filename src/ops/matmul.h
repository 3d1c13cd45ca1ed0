#pragma once
// Matrix products.
#include "ops/linear_products.h"
#include "tensor/tensor.h"

namespace tfm::ops {

// y = x W^T + b, as torch.nn.functional.linear.  x: [..., in], W: [out, in], b: [out] or undefined.
// The product runs in the model's `products` (precision, frozen copies; ops/linear_products.h).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearProducts& products);

// relu(linear(x, W, b)) as one op: the same values and gradients, one tensor fewer,
// and with frozen f32 weights no pass of its own (the product's kernels apply it).
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearProducts& products);

// Batched matrix product: a [..., M, K] @ b [..., K, N] with equal leading dims.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace tfm::ops
