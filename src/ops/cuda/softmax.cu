// Softmax kernels on the GPU: rows over the last dimension (one warp a row), and beam
// search's best candidates (each row's log-normaliser here, the pick on the host).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "ops/cuda/kernels.h"
#include "ops/host_rules.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

constexpr unsigned kAllLanes = 0xffffffffu;
constexpr int kWarpsPerBlock = kThreads / 32;

// Butterfly reductions: every lane ends with the same bits (the operations commute).
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kAllLanes, v, o);
  return v;
}
// The largest, NaNs ignored (as the CPU's max_of); -inf for none.
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, o));
  return v;
}

// Each row's max and sum of e^(x - max) for a warp's lanes over x [n].
__device__ float row_max(const float* x, int64_t n, int lane) {
  float m = -INFINITY;
  for (int64_t j = lane; j < n; j += 32) m = fmaxf(m, x[j]);
  return warp_max(m);
}
__device__ float row_exp_sum(const float* x, float* y, int64_t n, float mx, int lane) {
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += 32) {
    const float e = expf(x[j] - mx);
    if (y) y[j] = e;
    s += e;
  }
  return warp_sum(s);
}

// y [rows, n] = softmax (or log-softmax) of x's rows, a warp a row, as
// cpu/softmax.cpp's rows: a row with every entry -inf attends nowhere (0s); the
// log-softmax is x - (max + log sum e^(x - max)).
__global__ void softmax_kernel(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < rows; r += int64_t{gridDim.x} * kWarpsPerBlock) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mx = row_max(xr, n, lane);
    if (log) {
      const float lse = mx + logf(row_exp_sum(xr, nullptr, n, mx, lane));
      for (int64_t j = lane; j < n; j += 32) yr[j] = xr[j] - lse;
    } else if (mx == -INFINITY) {
      for (int64_t j = lane; j < n; j += 32) yr[j] = 0.0f;
    } else {
      const float inv = 1.0f / row_exp_sum(xr, yr, n, mx, lane);
      for (int64_t j = lane; j < n; j += 32) yr[j] *= inv;
    }
  }
}

// dx = g - e^y sum(g) (log) or y (g - sum(g y)), a warp a row.
__global__ void softmax_backward_kernel(const float* y, const float* g, float* dx, int64_t rows, int64_t n, bool log) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < rows; r += int64_t{gridDim.x} * kWarpsPerBlock) {
    const float *yr = y + r * n, *gr = g + r * n;
    float* d = dx + r * n;
    float acc = 0.0f;
    for (int64_t j = lane; j < n; j += 32) acc += log ? gr[j] : gr[j] * yr[j];
    acc = warp_sum(acc);
    if (log)
      for (int64_t j = lane; j < n; j += 32) d[j] = gr[j] - expf(yr[j]) * acc;
    else
      for (int64_t j = lane; j < n; j += 32) d[j] = yr[j] * (gr[j] - acc);
  }
}

// lse [rows]: each row's log-sum-exp, max + log sum e^(x - max) in float as
// cpu/softmax.cpp's log_sum_exp_row, one warp a row.
__global__ void log_sum_exp_kernel(const float* x, float* lse, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < rows; r += int64_t{gridDim.x} * kWarpsPerBlock) {
    const float* xr = x + r * n;
    const float mx = row_max(xr, n, lane);
    const float s = row_exp_sum(xr, nullptr, n, mx, lane);
    if (lane == 0) lse[r] = mx + logf(s);
  }
}


}  // namespace

void softmax(const Tensor& x, bool log, Tensor& y) {
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  if (rows == 0) return;
  softmax_kernel<<<blocks_for(rows, kWarpsPerBlock), kThreads, 0, stream()>>>(ptr<float>(x), ptr<float>(y), rows, n, log);
  check_launch("softmax");
}

void softmax_backward(const Tensor& y, const Tensor& g, bool log, Tensor& dx) {
  const int64_t n = y.size(-1), rows = n == 0 ? 0 : y.numel() / n;
  if (rows == 0) return;
  softmax_backward_kernel<<<blocks_for(rows, kWarpsPerBlock), kThreads, 0, stream()>>>(ptr<float>(y), ptr<float>(g), ptr<float>(dx), rows,
                                                                                       n, log);
  check_launch("softmax_backward");
}

// The log-normalisers come from the GPU; the logits are copied back whole for the
// candidate scan, which runs on the host exactly as the CPU's (beam search asks for a
// few rows of one vocabulary each step).
bool top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, bool renormalize,
                   const std::vector<uint8_t>& wanted, std::vector<std::vector<std::pair<double, int64_t>>>& best) {
  const int64_t n = logits.size(0), V = logits.size(1);
  best.assign(static_cast<size_t>(n), {});
  if (n == 0) return true;
  Tensor lse = Tensor::empty({n}, DType::f32, Device::CUDA);
  log_sum_exp_kernel<<<blocks_for(n, kWarpsPerBlock), kThreads, 0, stream()>>>(ptr<float>(logits), ptr<float>(lse), n, V);
  check_launch("top_log_probs");
  const std::vector<float> host_lse = lse.values<float>(), host_logits = logits.values<float>();
  bool finite = true;
  for (int64_t r = 0; r < n; ++r) {
    if (!wanted[r]) continue;
    const float* row = host_logits.data() + r * V;
    auto top = top_log_probs_row(row, host_lse[r], V, count, excluded, renormalize, [&](int64_t from, float bar) {
      while (from < V && !(row[from] > bar)) ++from;  // (NaN never is)
      return from;
    });
    if (top) best[r] = std::move(*top);
    else finite = false;
  }
  return finite;
}

}  // namespace tfm::ops::cuda
