#pragma once
// What every CUDA kernel file shares: grid sizes, grid-stride loops, a tensor's
// device pointer, and the checked launch on this thread's stream.
#include <cstdint>

#include "tensor/cuda/runtime.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace tfm::ops::cuda {

using tfm::cuda::check;
using tfm::cuda::check_launch;
using tfm::cuda::stream;

constexpr int kThreads = 256;

// Blocks for n elements at one per thread (capped: kernels loop with grid_stride).
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// for (i in [0, n)) spread over the whole grid.
#define TFM_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// t's elements on the device, as T (its dtype's C++ type). A tensor left in host
// memory is a clear error here rather than an illegal address inside a kernel.
template <class T>
T* ptr(const Tensor& t) {
  TFM_CHECK(t.device() == Device::CUDA, "a CUDA kernel was given a " << to_string(t.device()) << " tensor " << shape_str(t.shape()));
  return t.device_data<T>();
}

}  // namespace tfm::ops::cuda
