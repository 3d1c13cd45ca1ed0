// Reductions and the optimiser's update on the GPU: sums in double over the CPU's
// fixed slices (the same partial sums, added in the same order), and Adam's step.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

// cpu/reduce.cpp's block: slice b is elements [b kSlice, (b + 1) kSlice), summed in order.
constexpr int64_t kSlice = 4096;

// partial [slices]: each slice's sum in double, element by element in order from 0,
// of x or of its squares, as the CPU adds it. A block is one warp and takes 32 slices:
// it reads kDepth x 32 consecutive elements of each (coalesced, all in flight at once)
// into tiles, then each lane adds up its own slice's kDepth x 32. Elements past n count
// 0, which leaves the sum's bits alone (it never is -0). (One tile in flight and blocks
// of 8 warps kept 46 of an H200's 132 SMs busy, each warp waiting on its loads 128
// times a slice: a 48M-parameter model's gradient norm took 0.6 ms, window 17.)
constexpr int kDepth = 4;

__global__ void slice_sums_kernel(const float* x, int64_t n, bool squares, double* partial, int64_t slices) {
  __shared__ float tile[kDepth][32][33];  // (33: lanes read a row of it without bank conflicts)
  const int lane = threadIdx.x & 31;
  for (int64_t first = blockIdx.x * int64_t{32}; first < slices; first += int64_t{gridDim.x} * 32) {
    double acc = 0.0;
    for (int64_t k = 0; k < kSlice; k += kDepth * 32) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d)
#pragma unroll
        for (int s = 0; s < 32; ++s) {
          const int64_t i = (first + s) * kSlice + k + d * 32 + lane;
          tile[d][s][lane] = i < n ? x[i] : 0.0f;
        }
      __syncwarp();
      for (int d = 0; d < kDepth; ++d)
        for (int c = 0; c < 32; ++c) {
          const double v = tile[d][lane][c];
          acc += squares ? v * v : v;  // (a float's square is exact in double)
        }
      __syncwarp();  // read before the next tiles overwrite them
    }
    if (first + lane < slices) partial[first + lane] = acc;
  }
}

// (partial[0] + partial[1] + ... in order) / divisor into out's one or two floats: the
// CPU's order, one thread (a few thousand doubles for the largest models' gradients).
__global__ void add_in_order_kernel(const double* partial, int64_t n, double divisor, float* out, bool two) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += partial[i];
  const double mean = total / divisor;
  out[0] = static_cast<float>(mean);
  if (two) out[1] = static_cast<float>(mean - out[0]);
}

// x *= min(1, max_norm / (sqrt(squares[0] + squares[1]) + 1e-6)), as cpu/reduce.cpp
// computes it (in double).
__global__ void clip_kernel(float* x, int64_t n, const float* squares, float max_norm) {
  const double coef = max_norm / (sqrt(static_cast<double>(squares[0]) + squares[1]) + 1e-6);
  if (!(coef < 1.0)) return;
  const float c = static_cast<float>(coef);
  TFM_GRID_STRIDE(i, n) x[i] *= c;
}

// A piece of at most kAdamPiece elements of one parameter of an Adam step; a block a piece.
constexpr int64_t kAdamPiece = 1 << 14;
struct AdamPiece {
  float *p, *m, *v;
  const float* g;
  int64_t n;  // elements in this piece
  float shrink;
};

// One Adam step per element in cpu/reduce.cpp's float operation order (torch.optim.Adam's).
__global__ void adam_kernel(const AdamPiece* pieces, AdamUpdate u) {
  const AdamPiece piece = pieces[blockIdx.x];
  float *p = piece.p, *m = piece.m, *v = piece.v;
  const float* g = piece.g;
  for (int64_t i = threadIdx.x; i < piece.n; i += blockDim.x) {
    const float gi = u.l2 != 0.0f ? g[i] + u.l2 * p[i] : g[i];
    const float pi = p[i] * piece.shrink;
    const float mi = m[i] * u.beta1 + gi * (1.0f - u.beta1);
    const float vi = v[i] * u.beta2 + gi * gi * (1.0f - u.beta2);
    const float denom = sqrtf(vi) / u.bc2_sqrt + u.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - u.step_size * (mi / denom);
  }
}

}  // namespace

void add_in_order(const double* partial, int64_t n, double divisor, Tensor& out) {
  add_in_order_kernel<<<1, 1, 0, stream()>>>(partial, n, divisor, ptr<float>(out), out.numel() == 2);
  check_launch("sum");
}

void sum(const Tensor& x, bool squares, double divisor, Tensor& out) {
  const int64_t n = x.numel(), slices = std::max<int64_t>(1, (n + kSlice - 1) / kSlice);
  Tensor partial = Tensor::empty({slices}, DType::i64, Device::CUDA);  // doubles: 8 bytes each
  double* sums = static_cast<double*>(partial.device_ptr());
  slice_sums_kernel<<<blocks_for(slices, 32), 32, 0, stream()>>>(ptr<float>(x), n, squares, sums, slices);
  check_launch("sum");
  add_in_order(sums, slices, divisor, out);  // the slices in order, as the CPU adds them
}

void clip_to_norm(Tensor& x, const Tensor& squares, float max_norm) {
  const int64_t n = x.numel();
  if (n == 0) return;
  clip_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(x), n, ptr<float>(squares), max_norm);
  check_launch("clip_grad_norm");
}

// Every parameter cut into pieces, whose table goes to the device with the launch (a
// copy that does not wait for the device).
void adam(const std::vector<AdamTensors>& params, const AdamUpdate& u) {
  std::vector<AdamPiece> pieces;
  for (const AdamTensors& t : params)
    for (int64_t i = 0; i < t.param.numel(); i += kAdamPiece)
      pieces.push_back({ptr<float>(t.param) + i, ptr<float>(t.exp_avg) + i, ptr<float>(t.exp_avg_sq) + i, ptr<float>(t.grad) + i,
                        std::min(kAdamPiece, t.param.numel() - i), t.decays ? u.shrink : 1.0f});
  if (pieces.empty()) return;
  const int64_t bytes = static_cast<int64_t>(pieces.size() * sizeof(AdamPiece));
  Tensor table = Tensor::empty({bytes}, DType::u8, Device::CUDA);
  check(cudaMemcpyAsync(table.device_ptr(), pieces.data(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream()),
        "adam: copy the table of pieces");
  for (size_t first = 0; first < pieces.size(); first += 65535)  // (a grid's most blocks)
    adam_kernel<<<static_cast<unsigned>(std::min<size_t>(65535, pieces.size() - first)), kThreads, 0, stream()>>>(
        static_cast<const AdamPiece*>(table.device_ptr()) + first, u);
  check_launch("adam");
}

}  // namespace tfm::ops::cuda
