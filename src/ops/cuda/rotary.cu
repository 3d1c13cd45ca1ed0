// The rotary embeddings' kernel on the GPU (ops/cpu/rotary.cpp's counterpart): a thread
// a pair, its angle in f32 as the CPU's.
#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

struct RotaryArgs {
  const float* x;
  int64_t batch_stride, row_stride;  // x's (a view with unit last stride)
  const int32_t* positions;          // [batch or 1, T]
  bool shared_positions;             // positions [1, T]: every row's
  const float* freq;                 // [pairs]
  float* out;                        // [batch, T, D]
  int64_t T, D, pairs;
  bool interleaved;
  float sign;
};

// Pair i of head h at row (b, t): values (i, i + pairs) or (2i, 2i + 1) of the head.
__global__ void rotary_kernel(RotaryArgs a, int64_t n) {
  const int64_t heads = a.D / (2 * a.pairs);
  TFM_GRID_STRIDE(e, n) {
    const int64_t i = e % a.pairs, h = (e / a.pairs) % heads, r = e / (a.pairs * heads), b = r / a.T, t = r % a.T;
    const float p = static_cast<float>(a.positions[(a.shared_positions ? 0 : b) * a.T + t]);
    const float c = cosf(p * a.freq[i]), s = a.sign * sinf(p * a.freq[i]);
    const int64_t u = h * 2 * a.pairs + (a.interleaved ? 2 * i : i), v = u + (a.interleaved ? 1 : a.pairs);
    const float* xr = a.x + b * a.batch_stride + t * a.row_stride;
    float* o = a.out + r * a.D;
    o[u] = xr[u] * c - xr[v] * s;
    o[v] = xr[v] * c + xr[u] * s;
  }
}

}  // namespace

void rotary(const Tensor& x, const Tensor& positions, const Tensor& freq, RotaryLayout layout, float sign, Tensor& out) {
  const RotaryArgs a{ptr<float>(x),      x.strides()[0],  x.strides()[1], ptr<int32_t>(positions), positions.size(0) == 1,
                     ptr<float>(freq),   ptr<float>(out), x.size(1),      x.size(2),              freq.numel(),
                     layout == RotaryLayout::interleaved, sign};
  const int64_t n = x.numel() / 2;  // pairs in all
  if (n == 0) return;
  rotary_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(a, n);
  check_launch("rotary");
}

}  // namespace tfm::ops::cuda
