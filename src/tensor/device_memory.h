#pragma once
// What the tensor layer asks of a device besides its allocator (allocator.h): moving
// bytes between it and the host, and the strided walks that Tensor (clone, copy_from,
// fill) and autograd (gradient sums) make. One implementation per device, picked by
// `device_memory(d)`: the CPU's loops (strided.cpp) and CUDA's kernels
// (tensor/cuda/memory.cu, in builds with TFM_CUDA). Code above tensor/ moves data with
// Tensor's methods and ops::to, never with this directly.
#include <cstddef>

#include "tensor/device.h"

namespace tfm {

class Tensor;

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // `bytes` from host memory into this device's memory, and back. from_host returns once
  // `src` may be reused, its bytes landing before any work queued after it on this
  // thread (it does not wait for the queued work); to_host returns once the bytes have
  // arrived (it waits for the work queued before it).
  virtual void from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void to_host(void* dst, const void* src, size_t bytes) = 0;
  // dst = src and dst += src (f32), element by element: same shape, any strides, both here.
  virtual void strided_copy(const Tensor& src, Tensor& dst) = 0;
  virtual void strided_add(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& t, float value) = 0;  // f32, contiguous
};

// The device's implementation; a clear error where this build or machine has none.
DeviceMemory& device_memory(Device device);

}  // namespace tfm
