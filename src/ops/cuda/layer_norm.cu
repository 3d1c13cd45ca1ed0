// Layer norm and RMS norm kernels on the GPU over the last dimension: a warp a row, and
// the weight and bias gradients as column sums over fixed chunks of rows (no atomics).
// RMS norm is layer norm without centring: the kernels take a null `mean` for it.
#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

constexpr unsigned kAllLanes = 0xffffffffu;
constexpr int kWarpsPerBlock = kThreads / 32;
// Rows a block of the weight gradients' first pass adds up: a fixed number, so the
// partial sums (and their order) do not depend on the GPU.
constexpr int64_t kRowChunk = 64;

// A butterfly sum: every lane ends with the same bits.
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kAllLanes, v, o);
  return v;
}

// y [rows, d] = (x - mean) rstd w + b, with cpu/layer_norm.cpp's row statistics: the
// biased variance (the mean of squared deviations from the mean), eps added under the
// square root; mean and rstd [rows] kept. b may be null (no bias); mean null: RMS norm
// (the mean taken as 0, so that var is the mean of squares).
__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float eps, float* y, float* mean, float* rstd,
                                  int64_t rows, int64_t d) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < rows; r += int64_t{gridDim.x} * kWarpsPerBlock) {
    const float* xr = x + r * d;
    float s = 0.0f;
    if (mean)
      for (int64_t j = lane; j < d; j += 32) s += xr[j];
    const float mu = mean ? warp_sum(s) / static_cast<float>(d) : 0.0f;
    float dev = 0.0f;
    for (int64_t j = lane; j < d; j += 32) dev += (xr[j] - mu) * (xr[j] - mu);
    const float var = warp_sum(dev) / static_cast<float>(d);
    const float rs = 1.0f / sqrtf(var + eps);
    if (lane == 0 && mean) mean[r] = mu;
    if (lane == 0) rstd[r] = rs;
    float* yr = y + r * d;
    for (int64_t j = lane; j < d; j += 32) {
      const float v = (xr[j] - mu) * rs * w[j];
      yr[j] = b ? v + b[j] : v;
    }
  }
}

// dx [rows, d] = rstd (g w - mean(g w) - x̂ mean(g w x̂)), x̂ = (x - mean) rstd, a warp a
// row, in the CPU's operation order. mean null: RMS norm's dx = rstd (g w - x̂ mean(g w x̂)),
// x̂ = x rstd.
__global__ void layer_norm_dx_kernel(const float* x, const float* w, const float* mean, const float* rstd, const float* g, float* dx,
                                     int64_t rows, int64_t d) {
  const int lane = threadIdx.x & 31;
  const float inv_d = 1.0f / static_cast<float>(d);
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < rows; r += int64_t{gridDim.x} * kWarpsPerBlock) {
    const float *xr = x + r * d, *gr = g + r * d;
    const float mu = mean ? mean[r] : 0.0f, rs = rstd[r];
    float sum_gw = 0.0f, sum_gw_xhat = 0.0f;
    for (int64_t j = lane; j < d; j += 32) {
      const float xhat = (xr[j] - mu) * rs, gw = gr[j] * w[j];
      sum_gw += gw;
      sum_gw_xhat += gw * xhat;
    }
    sum_gw = mean ? warp_sum(sum_gw) : 0.0f;
    sum_gw_xhat = warp_sum(sum_gw_xhat);
    for (int64_t j = lane; j < d; j += 32) {
      const float xhat = (xr[j] - mu) * rs;
      dx[r * d + j] = rs * (gr[j] * w[j] - inv_d * sum_gw - xhat * inv_d * sum_gw_xhat);
    }
  }
}

// partial [chunks, 2, d]: over chunk c's rows [c kRowChunk, (c + 1) kRowChunk), column
// j's sums of g x̂ (dw's share) and of g (db's), one thread a column, rows in order
// (mean null: x̂ = x rstd, RMS norm's).
__global__ void layer_norm_partials_kernel(const float* x, const float* mean, const float* rstd, const float* g, float* partial,
                                           int64_t rows, int64_t d, int64_t chunks) {
  for (int64_t c = blockIdx.y; c < chunks; c += gridDim.y) {
    const int64_t end = c * kRowChunk + kRowChunk < rows ? c * kRowChunk + kRowChunk : rows;
    TFM_GRID_STRIDE(j, d) {
      float dw = 0.0f, db = 0.0f;
      for (int64_t r = c * kRowChunk; r < end; ++r) {
        const float gj = g[r * d + j];
        dw += gj * ((x[r * d + j] - (mean ? mean[r] : 0.0f)) * rstd[r]);
        db += gj;
      }
      partial[(c * 2) * d + j] = dw;
      partial[(c * 2 + 1) * d + j] = db;
    }
  }
}

// dw, db [d] = the chunks' partial sums added in chunk order (either may be null).
__global__ void layer_norm_combine_kernel(const float* partial, float* dw, float* db, int64_t d, int64_t chunks) {
  TFM_GRID_STRIDE(j, d) {
    float sw = 0.0f, sb = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      sw += partial[(c * 2) * d + j];
      sb += partial[(c * 2 + 1) * d + j];
    }
    if (dw) dw[j] = sw;
    if (db) db[j] = sb;
  }
}

// dx, and dw and db where defined (either may be undefined), of layer norm, or of RMS
// norm where mean is null.
void norm_backward(const Tensor& x, const Tensor& w, const float* mean, const Tensor& rstd, const Tensor& g, Tensor& dx, Tensor& dw,
                   Tensor& db) {
  const int64_t d = x.size(-1), rows = d == 0 ? 0 : x.numel() / d;
  if (d == 0) return;
  if (rows > 0) {
    layer_norm_dx_kernel<<<blocks_for(rows, kWarpsPerBlock), kThreads, 0, stream()>>>(
        ptr<float>(x), ptr<float>(w), mean, ptr<float>(rstd), ptr<float>(g), ptr<float>(dx), rows, d);
    check_launch("layer_norm_backward");
  }
  if (!dw.defined() && !db.defined()) return;
  // Partial column sums per chunk of rows, then their sum in chunk order: the same
  // result on any GPU, and every run.
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  Tensor partial = Tensor::empty({chunks > 0 ? chunks : 1, 2, d}, DType::f32, Device::CUDA);
  if (chunks > 0) {
    const dim3 grid(blocks_for(d), static_cast<unsigned>(chunks < 65535 ? chunks : 65535));
    layer_norm_partials_kernel<<<grid, kThreads, 0, stream()>>>(ptr<float>(x), mean, ptr<float>(rstd), ptr<float>(g),
                                                               ptr<float>(partial), rows, d, chunks);
    check_launch("layer_norm_backward");
  }
  layer_norm_combine_kernel<<<blocks_for(d), kThreads, 0, stream()>>>(ptr<float>(partial), dw.defined() ? ptr<float>(dw) : nullptr,
                                                                      db.defined() ? ptr<float>(db) : nullptr, d, chunks);
  check_launch("layer_norm_backward");
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t d = x.size(-1), rows = d == 0 ? 0 : x.numel() / d;
  if (rows == 0) return;
  layer_norm_kernel<<<blocks_for(rows, kWarpsPerBlock), kThreads, 0, stream()>>>(
      ptr<float>(x), ptr<float>(w), b.defined() ? ptr<float>(b) : nullptr, eps, ptr<float>(y), ptr<float>(mean), ptr<float>(rstd), rows, d);
  check_launch("layer_norm");
}

void layer_norm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& g, Tensor& dx,
                         Tensor& dw, Tensor& db) {
  norm_backward(x, w, ptr<float>(mean), rstd, g, dx, dw, db);
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd) {
  const int64_t d = x.size(-1), rows = d == 0 ? 0 : x.numel() / d;
  if (rows == 0) return;
  layer_norm_kernel<<<blocks_for(rows, kWarpsPerBlock), kThreads, 0, stream()>>>(ptr<float>(x), ptr<float>(w), nullptr, eps, ptr<float>(y),
                                                                                 nullptr, ptr<float>(rstd), rows, d);
  check_launch("rms_norm");
}

void rms_norm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& g, Tensor& dx, Tensor& dw) {
  Tensor no_bias;
  norm_backward(x, w, nullptr, rstd, g, dx, dw, no_bias);
}

}  // namespace tfm::ops::cuda
