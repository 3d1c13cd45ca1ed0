#pragma once
// Row kernels the CPU's fused kernels share (softmax inside attention and the losses,
// dropout masks inside attention).
#include <cstdint>

namespace tfm::ops::cpu {

void softmax_row(const float* x, float* y, int64_t n);      // y may alias x
void log_softmax_row(const float* x, float* y, int64_t n);  // y may alias x
float log_sum_exp_row(const float* x, int64_t n);

// Inverted dropout of n elements: element i is dropped when hash_uniform(key, first + i)
// < p, the survivors scaled by 1 / (1 - p). dst may alias src.
void dropout_row(const float* src, float* dst, int64_t n, float p, uint64_t key, uint64_t first);

}  // namespace tfm::ops::cpu
