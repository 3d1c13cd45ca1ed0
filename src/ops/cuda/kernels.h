#pragma once
// The GPU's kernels (CUDA; cuBLASLt for the products), one function per entry of
// ops/kernels.h's table, which kernels() returns filled. They mirror ops/cpu/ file for
// file and compute the same functions: tests/test_backend_ops.cpp checks every claimed
// (op, dtype) against the same oracle on both devices. Reductions never use atomics,
// so two runs are bitwise equal. Everything runs on the calling thread's stream
// (tensor/cuda/runtime.h).
#include "ops/kernels.h"

namespace tfm::ops::cuda {

const Kernels& kernels();

// One function per entry of ops/kernels.h's table, with its signature.
TFM_KERNEL_ENTRIES(TFM_DECLARE_KERNEL)

// (partial[0] + partial[1] + ... in order, in double) / divisor into out (f32, one or two
// elements: ops/kernels.h's sum), on the device: how the sums end as the CPU's do (reduce.cu).
void add_in_order(const double* partial, int64_t n, double divisor, Tensor& out);

}  // namespace tfm::ops::cuda
