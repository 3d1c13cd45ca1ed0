#pragma once
// Normalisations over the last dimension, forward and backward each fused into one
// pass per row. Layer norm: y = (x - mean) / sqrt(var + eps) * weight + bias.
// RMS norm (Llama's, transformers' LlamaRMSNorm in f32): y = x / sqrt(mean(x^2) + eps) * weight.
#include "tensor/tensor.h"

namespace tfm::ops {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps = 1e-6f);

}  // namespace tfm::ops
