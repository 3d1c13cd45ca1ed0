// The label-smoothed losses' kernel on the GPU: log-softmax, loss and gradient, a
// block a row; the rows' losses are added up in row order, as the CPU does, on the device.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

constexpr unsigned kAllLanes = 0xffffffffu;

struct Sum {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {  // NaNs ignored, as the CPU's max_of
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// The block's reduction of v by op (commutative), the same bits in every thread and
// every run: a butterfly within each warp, then the warps' results in warp order.
// Every thread of the block must call it.
template <class T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T partial[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kAllLanes, v, o));
  __syncthreads();  // an earlier call's readers are done with `partial`
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  T r = partial[0];
  for (unsigned w = 1; w < blockDim.x / 32; ++w) r = op(r, partial[w]);
  return r;
}

// sum_j q_j (log q_j [kl only] - lp_j)'s term for one column (cpu/loss.cpp's `term`).
__device__ double term(double qj, float lpj, bool kl) { return qj > 0.0 ? qj * ((kl ? log(qj) : 0.0) - lpj) : 0.0; }

// losses [rows] (double): each row's loss against q from logits [rows, vocab], as
// cpu/loss.cpp's row_loss; a row whose target is skip_id has loss 0. With grad
// [rows, vocab] (which may be the logits themselves: each element is read, then
// written, by one thread), the rows' gradients (p - q) inv_n, 0 for skipped rows.
__global__ void smoothed_loss_kernel(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, int skip_id,
                                     SmoothedTarget q, float inv_n, float* grad, double* losses) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * vocab;
    float* gr = grad ? grad + r * vocab : nullptr;
    const int t = targets[r];
    if (t == skip_id) {
      if (gr)
        for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) gr[j] = 0.0f;
      if (threadIdx.x == 0) losses[r] = 0.0;
      continue;
    }
    const bool pad_column = skip_id >= 0 && skip_id < vocab;
    const float x_target = x[t], x_pad = pad_column ? x[skip_id] : 0.0f;  // read before any gradient is written
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) m = fmaxf(m, x[j]);
    const float mx = block_reduce(m, Max{});
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) s += expf(x[j] - mx);
    const float lse = mx + logf(block_reduce(s, Sum{}));
    double sum_lp = 0.0;  // the log-probabilities' sum, in double as the CPU adds them
    if (q.off > 0.0f) {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum_lp += x[j] - lse;
      sum_lp = block_reduce(sum_lp, Sum{});
    }
    const float lp_target = x_target - lse, lp_pad = x_pad - lse;
    if (threadIdx.x == 0) {
      double acc = term(q.on, lp_target, q.kl) + (pad_column ? term(q.pad_column, lp_pad, q.kl) : 0.0);
      if (q.off > 0.0f) {
        acc += q.off * (static_cast<double>(vocab) * (q.kl ? log(static_cast<double>(q.off)) : 0.0) - sum_lp);
        acc -= term(q.off, lp_target, q.kl) + (pad_column ? term(q.off, lp_pad, q.kl) : 0.0);
      }
      losses[r] = acc;
    }
    if (!gr) continue;
    __syncthreads();  // every thread has read the row before it is overwritten
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float p = expf(x[j] - lse);
      const float qj = j == t ? q.on : (pad_column && j == skip_id ? q.pad_column : q.off);
      gr[j] = (p - qj) * inv_n;
    }
  }
}

}  // namespace

void smoothed_loss(const Tensor& logits, const Tensor& targets, int skip_id, const SmoothedTarget& q, float inv_n, Tensor* grad,
                   double divisor, Tensor& total) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  // (The front end has checked the targets: each in [0, vocab) or skip_id.)
  Tensor losses = Tensor::empty({std::max<int64_t>(rows, 1)}, DType::i64, Device::CUDA);  // doubles: 8 bytes each
  double* row_losses = static_cast<double*>(losses.device_ptr());
  if (rows > 0) {
    smoothed_loss_kernel<<<blocks_for(rows, 1), kThreads, 0, stream()>>>(ptr<float>(logits), ptr<int32_t>(targets), rows, vocab, skip_id, q,
                                                                         inv_n, grad ? ptr<float>(*grad) : nullptr, row_losses);
    check_launch("smoothed_loss");
  }
  add_in_order(row_losses, rows, divisor, total);
}

}  // namespace tfm::ops::cuda
