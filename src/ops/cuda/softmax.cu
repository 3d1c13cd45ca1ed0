// Softmax kernels on the GPU: rows over the last dimension (one warp a row), and beam
// search's best candidates with each row's log-normaliser (the log-probabilities are
// made from them on the host, by the front end, as for every device).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/cuda/kernels.h"
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

// lse[r * stride]: each row's log-sum-exp, max + log sum e^(x - max) in float as
// cpu/softmax.cpp's log_sum_exp_row, one warp a row.
__global__ void log_sum_exp_kernel(const float* x, float* lse, int64_t stride, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < rows; r += int64_t{gridDim.x} * kWarpsPerBlock) {
    const float* xr = x + r * n;
    const float mx = row_max(xr, n, lane);
    const float s = row_exp_sum(xr, nullptr, n, mx, lane);
    if (lane == 0) lse[r * stride] = mx + logf(s);
  }
}

// The ids top_log_probs leaves out, as a kernel argument.
struct Excluded {
  int ids[kMaxExcluded];
  int n;
  __device__ bool has(int64_t j) const {
    for (int i = 0; i < n; ++i)
      if (ids[i] == j) return true;
    return false;
  }
};

// (v, id) ranks before (w, other): the larger logit, then the lower id (none, -1, last).
__device__ bool ranks_before(float v, int64_t id, float w, int64_t other) { return other < 0 || (id >= 0 && (v > w || (v == w && id < other))); }

// Row r's candidates into out's record (ops/kernels.h), a block a row: `count` rounds,
// each the block's best id ranked after the previous round's pick (a plain, correct
// selection: count passes over the row; a faster one is issue 35's).
__global__ void top_logits_kernel(const float* logits, int64_t rows, int64_t V, int64_t count, Excluded excluded, float* out, int64_t width) {
  __shared__ float warp_v[32];
  __shared__ int64_t warp_id[32];
  __shared__ float pick_v;
  __shared__ int64_t pick_id;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * V;
    float* o = out + r * width;
    float prev_v = INFINITY;
    int64_t prev_id = -1;
    for (int64_t k = 0; k < count; ++k) {
      float v = -INFINITY;
      int64_t id = -1;
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
        const float xj = x[j];
        const bool after = xj < prev_v || (xj == prev_v && j > prev_id);
        if (xj > -INFINITY && after && !excluded.has(j) && ranks_before(xj, j, v, id)) v = xj, id = j;  // (NaN fails the first test)
      }
      for (int o2 = 16; o2 > 0; o2 >>= 1) {
        const float ov = __shfl_xor_sync(kAllLanes, v, o2);
        const int64_t oid = __shfl_xor_sync(kAllLanes, id, o2);
        if (ranks_before(ov, oid, v, id)) v = ov, id = oid;
      }
      __syncthreads();  // the previous round's readers are done with the shared values
      if ((threadIdx.x & 31) == 0) warp_v[threadIdx.x / 32] = v, warp_id[threadIdx.x / 32] = id;
      __syncthreads();
      if (threadIdx.x == 0) {
        for (unsigned w = 1; w < blockDim.x / 32; ++w)
          if (ranks_before(warp_v[w], warp_id[w], v, id)) v = warp_v[w], id = warp_id[w];
        pick_v = v, pick_id = id;
        o[k] = id >= 0 ? v : -INFINITY;
        o[count + k] = static_cast<float>(id);
      }
      __syncthreads();
      prev_v = pick_v, prev_id = pick_id;
    }
    if (threadIdx.x < excluded.n) {
      const int e = excluded.ids[threadIdx.x];
      o[2 * count + 1 + threadIdx.x] = e >= 0 && e < V ? x[e] : NAN;
    }
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

void top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, Tensor& out) {
  const int64_t n = logits.size(0), V = logits.size(1), width = out.size(1);
  if (n == 0) return;
  Excluded e{};
  e.n = static_cast<int>(excluded.size());  // (at most kMaxExcluded: the front end checks)
  std::copy(excluded.begin(), excluded.end(), e.ids);
  top_logits_kernel<<<blocks_for(n, 1), kThreads, 0, stream()>>>(ptr<float>(logits), n, V, count, e, ptr<float>(out), width);
  check_launch("top_log_probs");
  log_sum_exp_kernel<<<blocks_for(n, kWarpsPerBlock), kThreads, 0, stream()>>>(ptr<float>(logits), ptr<float>(out) + 2 * count, width, n, V);
  check_launch("top_log_probs");
}

}  // namespace tfm::ops::cuda
