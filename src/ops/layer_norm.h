#pragma once
// Layer normalisation over the last dimension, forward and backward each fused
// into one pass per row: y = (x - mean) / sqrt(var + eps) * weight + bias.
#include "tensor/tensor.h"

namespace tfm::ops {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);

}  // namespace tfm::ops
