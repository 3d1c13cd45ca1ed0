#pragma once
// The CPU's kernels (OpenMP threads, AVX2/AVX-512 intrinsics, oneDNN), one function
// per entry of ops/kernels.h's table, which kernels() returns filled.
#include "ops/kernels.h"

namespace tfm::ops::cpu {

const Kernels& kernels();
// The simulated device's (tensor/device.h): these, with its memory reachable while each runs.
const Kernels& simulated_kernels();

// One function per entry of ops/kernels.h's table, with its signature.
TFM_KERNEL_ENTRIES(TFM_DECLARE_KERNEL)

}  // namespace tfm::ops::cpu
