// Reductions and the optimiser's update on the GPU: sums in double over the CPU's
// fixed slices (the same partial sums, added in the same order), and Adam's step.
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

// cpu/reduce.cpp's block: slice b is elements [b kSlice, (b + 1) kSlice), summed in order.
constexpr int64_t kSlice = 4096;
constexpr int kWarpsPerBlock = kThreads / 32;

// partial [slices]: each slice's sum in double, element by element in order from 0,
// of x or of its squares, as the CPU adds it. A warp takes 32 slices: it reads 32
// consecutive elements of each (coalesced) into a tile, then each lane adds up its own
// slice's 32. Elements past n count 0, which leaves the sum's bits alone (it never is
// -0).
__global__ void slice_sums_kernel(const float* x, int64_t n, bool squares, double* partial, int64_t slices) {
  __shared__ float tile[kWarpsPerBlock][32][33];  // (33: lanes read a row of it without bank conflicts)
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  float(*t)[33] = tile[warp];
  const int64_t step = int64_t{gridDim.x} * kWarpsPerBlock * 32;
  for (int64_t first = (blockIdx.x * int64_t{kWarpsPerBlock} + warp) * 32; first < slices; first += step) {
    double acc = 0.0;
    for (int64_t k = 0; k < kSlice; k += 32) {
      for (int s = 0; s < 32; ++s) {
        const int64_t i = (first + s) * kSlice + k + lane;
        t[s][lane] = i < n ? x[i] : 0.0f;
      }
      __syncwarp();
      for (int c = 0; c < 32; ++c) {
        const double v = t[lane][c];
        acc += squares ? v * v : v;  // (a float's square is exact in double)
      }
      __syncwarp();  // read before the next 32 overwrite it
    }
    if (first + lane < slices) partial[first + lane] = acc;
  }
}

// One Adam step per element in cpu/reduce.cpp's float operation order (torch.optim.Adam's).
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, AdamUpdate u, int64_t n) {
  TFM_GRID_STRIDE(i, n) {
    const float gi = u.l2 != 0.0f ? g[i] + u.l2 * p[i] : g[i];
    const float pi = p[i] * u.shrink;
    const float mi = m[i] * u.beta1 + gi * (1.0f - u.beta1);
    const float vi = v[i] * u.beta2 + gi * gi * (1.0f - u.beta2);
    const float denom = sqrtf(vi) / u.bc2_sqrt + u.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - u.step_size * (mi / denom);
  }
}

}  // namespace

double sum(const Tensor& x, bool squares) {
  const int64_t n = x.numel(), slices = (n + kSlice - 1) / kSlice;
  if (n == 0) return 0.0;
  Tensor partial = Tensor::empty({slices}, DType::i64, Device::CUDA);  // doubles: 8 bytes each
  slice_sums_kernel<<<blocks_for(slices, kThreads), kThreads, 0, stream()>>>(ptr<float>(x), n, squares,
                                                                             static_cast<double*>(partial.device_ptr()), slices);
  check_launch("sum");
  std::vector<double> sums(static_cast<size_t>(slices));
  check(cudaMemcpyAsync(sums.data(), partial.device_ptr(), sums.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()),
        "sum: copy the partial sums back");
  check(cudaStreamSynchronize(stream()), "sum");
  double total = 0.0;  // the slices in order, as the CPU adds them
  for (double v : sums) total += v;
  return total;
}

void adam(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u) {
  const int64_t n = param.numel();
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(param), ptr<float>(grad), ptr<float>(exp_avg), ptr<float>(exp_avg_sq), u,
                                                        n);
  check_launch("adam");
}

}  // namespace tfm::ops::cuda
