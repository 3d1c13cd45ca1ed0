#pragma once
// Softmax and log-softmax over the last dimension.
#include "tensor/tensor.h"

namespace tfm::ops {

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);

// Row kernels shared with the fused attention and loss ops.
void softmax_row(const float* x, float* y, int64_t n);      // y may alias x
void log_softmax_row(const float* x, float* y, int64_t n);  // y may alias x
// log sum_j e^x[j], so that log_softmax(x)[j] = x[j] - log_sum_exp_row(x, n).
float log_sum_exp_row(const float* x, int64_t n);

}  // namespace tfm::ops
