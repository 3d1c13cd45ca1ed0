// Element-wise kernels on the GPU: broadcasting binary functions, activations, dropout
// masks (the CPU's, from the same counter hash), sums over broadcast dims, scaling.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "tensor/error.h"
#include "tensor/rng.h"
#include "tensor/cuda/walk.cuh"
#include "tensor/strided.h"

namespace tfm::ops::cuda {

namespace {

using tfm::cuda::Walk;
using tfm::cuda::append;
using tfm::cuda::walk_offsets;

constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f, kGeluCubic = 0.044715f;

__device__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// GPT-2's gelu_new, as cpu/elementwise.cpp computes it.
__device__ float gelu_tanh(float v) { return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v))); }
__device__ float gelu_tanh_slope(float v) {
  const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
}

// One element of a Binary op (ops/kernels.h), in the CPU's float operation order.
template <Binary op>
__device__ float binary_value(float x, float y, float s) {
  if constexpr (op == Binary::add) return x + y;
  else if constexpr (op == Binary::mul) return x * y;
  else if constexpr (op == Binary::relu_backward) return (y > 0.0f ? x : 0.0f) * s;
  else if constexpr (op == Binary::gelu_backward) {
    const float cdf = 0.5f * (1.0f + erff(y * kInvSqrt2)), pdf = kInvSqrt2Pi * expf(-0.5f * y * y);
    return x * (cdf + y * pdf);
  } else if constexpr (op == Binary::gelu_tanh_backward) return x * gelu_tanh_slope(y);
  else if constexpr (op == Binary::silu_backward) {
    const float sg = sigmoid(y);
    return x * sg * (1.0f + y * (1.0f - sg));
  } else return x * (1.0f - y * y);  // tanh_backward
}

template <Unary op>
__device__ float unary_value(float v, float s) {
  if constexpr (op == Unary::scale) return v * s;
  else if constexpr (op == Unary::relu) return v > 0.0f ? v : 0.0f;
  else if constexpr (op == Unary::gelu) return 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  else if constexpr (op == Unary::gelu_tanh) return gelu_tanh(v);
  else if constexpr (op == Unary::silu) return v * sigmoid(v);
  else return tanhf(v);
}

// out [n] (contiguous) = op(a, b) with a and b walked by w, in Index arithmetic.
template <Binary op, class Index>
__global__ void binary_kernel(const float* a, const float* b, float s, float* out, Walk w, Index n) {
  TFM_GRID_STRIDE_AS(Index, i, n) {
    Index oa, ob;
    walk_offsets(w, i, oa, ob);
    out[i] = binary_value<op>(a[oa], b[ob], s);
  }
}

template <Unary op>
__global__ void unary_kernel(const float* x, float s, float* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = unary_value<op>(x[i], s);
}

template <Binary op>
void launch_binary(const Tensor& a, const Tensor& b, float s, Tensor& out) {
  const Shape& shape = out.shape();
  const Shape sa = broadcast_strides(a.shape(), a.strides(), shape), sb = broadcast_strides(b.shape(), b.strides(), shape);
  Walk w;
  for (size_t d = 0; d < shape.size(); ++d) append(w, shape[d], sa[d], sb[d]);
  const int64_t n = out.numel();
  if (tfm::cuda::fits_in_32_bits(w, n))
    binary_kernel<op, int32_t><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(a), ptr<float>(b), s, ptr<float>(out), w, static_cast<int32_t>(n));
  else
    binary_kernel<op, int64_t><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(a), ptr<float>(b), s, ptr<float>(out), w, n);
  check_launch("binary");
}

template <Unary op>
void launch_unary(const Tensor& x, float s, Tensor& out) {
  unary_kernel<op><<<blocks_for(out.numel()), kThreads, 0, stream()>>>(ptr<float>(x), s, ptr<float>(out), out.numel());
  check_launch("unary");
}

// Inverted dropout, as cpu/elementwise.cpp's: element e of sample r (whose elements
// start at `first`) is dropped when hash_uniform(key, dropout_index(first_row + r,
// e - first)) < p, else scaled by keep_scale; then max(., 0) where `relu`
// (relu(x) * scale == relu(x * scale), scale > 0).
struct DropoutArgs {
  const float* x;
  float* out;
  float p, keep_scale;
  uint64_t key;
  int64_t first_row;
  bool relu;
};

__device__ void drop_or_keep(const DropoutArgs& a, int64_t e, int64_t r, int64_t first) {
  float v = hash_uniform(a.key, dropout_index(a.first_row + r, e - first)) < a.p ? 0.0f : a.x[e] * a.keep_scale;
  if (a.relu) v = v > 0.0f ? v : 0.0f;
  a.out[e] = v;
}

// Samples that are rows of per_row elements of x [n]: a thread an element, in Index
// arithmetic (the row's division in 32 bits wherever n allows).
template <class Index>
__global__ void dropout_kernel(DropoutArgs a, Index n, Index per_row) {
  TFM_GRID_STRIDE_AS(Index, e, n)
    drop_or_keep(a, e, e / per_row, e / per_row * per_row);
}

// Samples that are packed sequences, sequence r starting at token starts[r] [batch], of
// per_token elements a token: a block kTokensPerBlock tokens, each token's sequence
// found by a thread of its own (the last one starting at or before it, by a binary
// search), then the block's threads over all their elements. (One search an element
// made the kernel 5 times slower than its memory traffic, window 4; one search a block
// of one token left the block waiting on the search's dependent loads, about 4 times,
// window 15.)
constexpr int kTokensPerBlock = 16;

__global__ void packed_dropout_kernel(DropoutArgs a, int64_t tokens, int32_t per_token, const int64_t* starts, int64_t batch) {
  __shared__ int64_t sequence[kTokensPerBlock], sequence_first[kTokensPerBlock];  // (its first element)
  for (int64_t first = blockIdx.x * int64_t{kTokensPerBlock}; first < tokens; first += int64_t{gridDim.x} * kTokensPerBlock) {
    __syncthreads();  // the last tokens' threads are done with `sequence`
    if (threadIdx.x < kTokensPerBlock && first + threadIdx.x < tokens) {
      const int64_t token = first + threadIdx.x;
      int64_t lo = 0, hi = batch;  // (std::upper_bound - 1)
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (starts[mid] > token) hi = mid;
        else lo = mid + 1;
      }
      const int64_t r = lo > 0 ? lo - 1 : 0;  // (packed sequences start at token 0)
      sequence[threadIdx.x] = r;
      sequence_first[threadIdx.x] = starts[r] * per_token;
    }
    __syncthreads();
    const int32_t count = static_cast<int32_t>(std::min<int64_t>(kTokensPerBlock, tokens - first)) * per_token;
    for (int32_t f = threadIdx.x; f < count; f += blockDim.x) {
      const int32_t t = f / per_token;
      drop_or_keep(a, first * per_token + f, sequence[t], sequence_first[t]);
    }
  }
}

// out (contiguous, [m]) = g summed over its broadcast dims: one thread per output
// element adds up its g elements in g's row-major order from 0, as the CPU does, so
// the sum does not depend on the launch. `kept` walks out's elements (its a strides
// are g's), `summed` the dims summed over (its a strides are g's).
__global__ void sum_to_kernel(const float* g, float* out, int64_t m, Walk kept, Walk summed, int64_t count) {
  TFM_GRID_STRIDE(o, m) {
    int64_t base, unused;
    walk_offsets(kept, o, base, unused);
    float acc = 0.0f;
    for (int64_t k = 0; k < count; ++k) {
      int64_t at;
      walk_offsets(summed, k, at, unused);
      acc += g[base + at];
    }
    out[o] = acc;
  }
}

// The common sum_to, a bias's gradient: g [rows, n] (contiguous) summed over its rows,
// in two passes with a fixed order, as wide as the data: rows [k * kChunkRows, (k + 1) *
// kChunkRows) of column c into partial [k, c], then each column's partials in order.
// (The one-thread-per-column walk above took each of a base Transformer's biases
// through 25,000 rows on 512 to 2,048 threads.)
constexpr int64_t kChunkRows = 128;

__global__ void column_partials_kernel(const float* g, float* partial, int64_t rows, int64_t n, int64_t chunks) {
  TFM_GRID_STRIDE(i, chunks * n) {
    const int64_t k = i / n, c = i % n, end = min(rows, (k + 1) * kChunkRows);
    float acc = 0.0f;
    for (int64_t r = k * kChunkRows; r < end; ++r) acc += g[r * n + c];
    partial[i] = acc;
  }
}

__global__ void column_totals_kernel(const float* partial, float* out, int64_t n, int64_t chunks) {
  TFM_GRID_STRIDE(c, n) {
    float acc = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * n + c];
    out[c] = acc;
  }
}

void column_sums(const Tensor& g, int64_t rows, int64_t n, Tensor& out) {
  const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  const Tensor partial = Tensor::empty({chunks, n}, DType::f32, g.device());
  column_partials_kernel<<<blocks_for(chunks * n), kThreads, 0, stream()>>>(ptr<float>(g), ptr<float>(partial), rows, n, chunks);
  check_launch("sum_to (column partials)");
  column_totals_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(partial), ptr<float>(out), n, chunks);
  check_launch("sum_to (column totals)");
}

// Whether out [.., n] (contiguous, leading 1s) is g [.., n] (contiguous) summed over
// every dim but the last.
bool sums_rows(const Tensor& g, const Tensor& out) {
  return g.is_contiguous() && out.is_contiguous() && g.dim() >= 1 && out.numel() == g.size(-1) && out.dim() >= 1 &&
         out.size(-1) == g.size(-1);
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  TFM_GRID_STRIDE(i, n) x[i] *= s;
}

}  // namespace

void binary(Binary op, const Tensor& a, const Tensor& b, float s, Tensor& out) {
  if (out.numel() == 0) return;
  switch (op) {
    case Binary::add: return launch_binary<Binary::add>(a, b, s, out);
    case Binary::mul: return launch_binary<Binary::mul>(a, b, s, out);
    case Binary::relu_backward: return launch_binary<Binary::relu_backward>(a, b, s, out);
    case Binary::gelu_backward: return launch_binary<Binary::gelu_backward>(a, b, s, out);
    case Binary::gelu_tanh_backward: return launch_binary<Binary::gelu_tanh_backward>(a, b, s, out);
    case Binary::silu_backward: return launch_binary<Binary::silu_backward>(a, b, s, out);
    case Binary::tanh_backward: return launch_binary<Binary::tanh_backward>(a, b, s, out);
  }
}

void unary(Unary op, const Tensor& x, float s, Tensor& out) {
  if (out.numel() == 0) return;
  switch (op) {
    case Unary::scale: return launch_unary<Unary::scale>(x, s, out);
    case Unary::relu: return launch_unary<Unary::relu>(x, s, out);
    case Unary::gelu: return launch_unary<Unary::gelu>(x, s, out);
    case Unary::gelu_tanh: return launch_unary<Unary::gelu_tanh>(x, s, out);
    case Unary::silu: return launch_unary<Unary::silu>(x, s, out);
    case Unary::tanh: return launch_unary<Unary::tanh>(x, s, out);
  }
}

void dropout(const Tensor& x, float p, DropoutKey key, const PackedSequences* packed, bool relu, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const DropoutArgs a{ptr<float>(x), ptr<float>(out), p, 1.0f / (1.0f - p), key.key, key.first_row, relu};  // (keep_scale on the host, as the CPU computes it)
  if (packed) {
    const int64_t tokens = x.size(1), per_token = n / tokens;
    const int64_t groups = (tokens + kTokensPerBlock - 1) / kTokensPerBlock;
    TFM_CHECK(per_token <= INT32_MAX / kTokensPerBlock, "dropout: " << per_token << " features a token");
    packed_dropout_kernel<<<static_cast<unsigned>(std::min<int64_t>(groups, 65535)), kThreads, 0, stream()>>>(
        a, tokens, static_cast<int32_t>(per_token), ptr<int64_t>(packed->on(Device::CUDA)), packed->batch());
  } else {
    const int64_t per_row = n / (x.dim() > 0 ? x.size(0) : 1);
    if (tfm::cuda::index_fits_in_32_bits(n)) dropout_kernel<int32_t><<<blocks_for(n), kThreads, 0, stream()>>>(a, static_cast<int32_t>(n), static_cast<int32_t>(per_row));
    else dropout_kernel<int64_t><<<blocks_for(n), kThreads, 0, stream()>>>(a, n, per_row);
  }
  check_launch("dropout");
}

void sum_to(const Tensor& g, Tensor& out) {
  const int64_t m = out.numel();
  if (m == 0) return;
  if (sums_rows(g, out) && g.numel() > 0) return column_sums(g, g.numel() / m, m, out);
  // out's shape right-aligned to g's: a dim of g is kept where out has it (stride
  // non-zero), summed where out has 1 there.
  const Shape& shape = g.shape();
  const Shape so = broadcast_strides(out.shape(), out.strides(), shape);
  Walk kept, summed;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (so[d] != 0) {
      append(kept, shape[d], g.strides()[d], 0);
    } else {
      append(summed, shape[d], g.strides()[d], 0);
      count *= shape[d];
    }
  }
  sum_to_kernel<<<blocks_for(m), kThreads, 0, stream()>>>(ptr<float>(g), ptr<float>(out), m, kept, summed, g.numel() == 0 ? 0 : count);
  check_launch("sum_to");
}

void scale_in_place(Tensor& x, float s) {
  if (x.numel() == 0) return;
  scale_kernel<<<blocks_for(x.numel()), kThreads, 0, stream()>>>(ptr<float>(x), s, x.numel());
  check_launch("scale_in_place");
}

}  // namespace tfm::ops::cuda
