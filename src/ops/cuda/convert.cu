// Dtype conversions on the GPU, element for element the CPU's (ops/convert.h's rules,
// tensor/float_formats.h's bits), and u8 pixels to [-1, 1].
#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "tensor/float_formats.h"

namespace tfm::ops::cuda {

namespace {

template <class D, class S>
__global__ void convert_kernel(const S* in, D* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = convert_value<D>(in[i]);
}

// out [n] = p / 127.5 - 1 in float, as the CPU computes it.
__global__ void from_pixels_kernel(const uint8_t* in, float* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = in[i] / 127.5f - 1.0f;
}

}  // namespace

void convert(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  with_dtype(src.dtype(), [&](auto s) {
    with_dtype(dst.dtype(), [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      convert_kernel<D, S><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<S>(src), ptr<D>(dst), n);
      check_launch("convert");
    });
  });
}

void from_pixels(const Tensor& pixels, Tensor& out) {
  const int64_t n = pixels.numel();
  if (n == 0) return;
  from_pixels_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<uint8_t>(pixels), ptr<float>(out), n);
  check_launch("from_pixels");
}

}  // namespace tfm::ops::cuda
