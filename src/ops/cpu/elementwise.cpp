// Element-wise kernels: broadcasting binary functions, activations, dropout masks.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "ops/cpu/cpu_isa.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/rows.h"
#include "tensor/rng.h"
#include "tensor/strided.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

namespace {

constexpr int64_t kParallelThreshold = 1 << 15;

// True when b (contiguous) repeats along leading dims of a contiguous out, e.g. a
// bias [D] onto [N, D] or a table [T, D] onto [B, T, D].
bool is_suffix_broadcast(const Tensor& b, const Shape& out) {
  if (!b.is_contiguous()) return false;
  Shape bs = b.shape();
  while (!bs.empty() && bs.front() == 1) bs.erase(bs.begin());
  if (bs.size() > out.size()) return false;
  return std::equal(bs.begin(), bs.end(), out.end() - bs.size());
}

template <class F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const Shape& shape = out.shape();
  float* o = out.data();
  const float* pa = a.data();
  const float* pb = b.data();
  const int64_t n = out.numel();
  if (a.shape() == shape && a.is_contiguous() && b.shape() == shape && b.is_contiguous()) {
    parallel_for(n, n > kParallelThreshold, [&](int64_t i) { o[i] = f(pa[i], pb[i]); });
  } else if (a.shape() == shape && a.is_contiguous() && is_suffix_broadcast(b, shape)) {
    const int64_t nb = b.numel();
    parallel_for(n / nb, n > kParallelThreshold, [&](int64_t r) {
      for (int64_t j = 0; j < nb; ++j) o[r * nb + j] = f(pa[r * nb + j], pb[j]);
    });
  } else {
    std::array<Shape, 3> st{broadcast_strides(a.shape(), a.strides(), shape), broadcast_strides(b.shape(), b.strides(), shape),
                            out.strides()};
    for_each_index<3>(shape, st, [&](const std::array<int64_t, 3>& off) { o[off[2]] = f(pa[off[0]], pb[off[1]]); });
  }
}

template <class F>
void unary_loop(const Tensor& x, Tensor& out, F f) {
  const float* px = x.data();
  float* o = out.data();
  const int64_t n = out.numel();
  parallel_for(n, n > kParallelThreshold, [&](int64_t i) { o[i] = f(px[i]); });
}

constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f, kGeluCubic = 0.044715f;

// GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as transformers computes it.
float gelu_tanh(float v) { return 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v))); }
float gelu_tanh_slope(float v) {
  const float t = std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
}
float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// dropout_row for 8 elements at a time with AVX-512 (whose 64-bit multiplies
// splitmix64 needs): the same hash, the same float arithmetic, the same results as
// the scalar loop. Returns how many elements it did (a multiple of 8).
__attribute__((target("avx512f,avx512dq"))) int64_t dropout_row_avx512(const float* src, float* dst, int64_t n, float p, uint64_t key,
                                                                        uint64_t first, float keep_scale) {
  const __m512i k = _mm512_set1_epi64(static_cast<long long>(key)), spread = _mm512_set1_epi64(0xD1B54A32D192ED03ll),
                golden = _mm512_set1_epi64(0x9E3779B97F4A7C15ll), m1 = _mm512_set1_epi64(0xBF58476D1CE4E5B9ll),
                m2 = _mm512_set1_epi64(0x94D049BB133111EBll), lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m256 threshold = _mm256_set1_ps(p), scale = _mm256_set1_ps(keep_scale), unit = _mm256_set1_ps(1.0f / 16777216.0f);
  // (Shifts in the zero-masked form: for the plain one GCC 12 warns that its
  // "undefined" source may be used uninitialised.)
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512i index = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first + static_cast<uint64_t>(i))), lanes);
    __m512i x = _mm512_add_epi64(_mm512_xor_si512(k, _mm512_mullo_epi64(index, spread)), golden);  // splitmix64(key ^ index * C)
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_maskz_srli_epi64(0xff, x, 30)), m1);
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_maskz_srli_epi64(0xff, x, 27)), m2);
    x = _mm512_xor_si512(x, _mm512_maskz_srli_epi64(0xff, x, 31));
    const __m256 u = _mm256_mul_ps(_mm512_cvtepi64_ps(_mm512_maskz_srli_epi64(0xff, x, 40)), unit);  // exact: 24-bit integers
    const __m256 dropped = _mm256_cmp_ps(u, threshold, _CMP_LT_OQ);
    _mm256_storeu_ps(dst + i, _mm256_andnot_ps(dropped, _mm256_mul_ps(_mm256_loadu_ps(src + i), scale)));
  }
  return i;
}

}  // namespace

void binary(Binary op, const Tensor& a, const Tensor& b, float s, Tensor& out) {
  switch (op) {
    case Binary::add: return binary_loop(a, b, out, [](float x, float y) { return x + y; });
    case Binary::mul: return binary_loop(a, b, out, [](float x, float y) { return x * y; });
    // Select, then scale: no floating-point operation under the condition, so the loop
    // vectorises.
    case Binary::relu_backward: return binary_loop(a, b, out, [s](float g, float y) { return (y > 0.0f ? g : 0.0f) * s; });
    case Binary::gelu_backward:
      return binary_loop(a, b, out, [](float g, float v) {
        const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2)), pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
        return g * (cdf + v * pdf);
      });
    case Binary::gelu_tanh_backward: return binary_loop(a, b, out, [](float g, float v) { return g * gelu_tanh_slope(v); });
    case Binary::silu_backward:
      return binary_loop(a, b, out, [](float g, float v) {
        const float s = sigmoid(v);
        return g * s * (1.0f + v * (1.0f - s));
      });
    case Binary::tanh_backward: return binary_loop(a, b, out, [](float g, float y) { return g * (1.0f - y * y); });
  }
}

void unary(Unary op, const Tensor& x, float s, Tensor& out) {
  switch (op) {
    case Unary::scale: return unary_loop(x, out, [s](float v) { return v * s; });
    case Unary::relu: return unary_loop(x, out, [](float v) { return v > 0.0f ? v : 0.0f; });
    case Unary::gelu: return unary_loop(x, out, [](float v) { return 0.5f * v * (1.0f + std::erf(v * kInvSqrt2)); });
    case Unary::gelu_tanh: return unary_loop(x, out, gelu_tanh);
    case Unary::silu: return unary_loop(x, out, [](float v) { return v * sigmoid(v); });
    case Unary::tanh: return unary_loop(x, out, [](float v) { return std::tanh(v); });
  }
}

void dropout_row(const float* src, float* dst, int64_t n, float p, uint64_t key, uint64_t first) {
  const float keep_scale = 1.0f / (1.0f - p);
  const int64_t done = cpu_isa().avx512 ? dropout_row_avx512(src, dst, n, p, key, first, keep_scale) : 0;
  for (int64_t i = done; i < n; ++i) dst[i] = hash_uniform(key, first + i) < p ? 0.0f : src[i] * keep_scale;
}

void dropout(const Tensor& x, float p, DropoutKey key, const PackedSequences* packed, bool relu, Tensor& out) {
  const int64_t n = out.numel(), block = 4096;
  if (n == 0) return;
  // Sample r is elements [row_begin(r), row_begin(r + 1)): a row of x, or a packed sequence's tokens.
  const int64_t rows = packed ? packed->batch() : (x.dim() > 0 ? x.size(0) : 1);
  const int64_t per_row = n / rows, per_token = packed ? n / x.size(1) : 0;
  auto row_begin = [&](int64_t r) { return packed ? (r < rows ? packed->start[r] : x.size(1)) * per_token : r * per_row; };
  auto row_of = [&](int64_t e) {
    if (!packed) return e / per_row;
    return static_cast<int64_t>(std::upper_bound(packed->start.begin(), packed->start.end(), e / per_token) - packed->start.begin()) - 1;
  };
  parallel_for((n + block - 1) / block, n > kParallelThreshold, [&](int64_t b) {
    const int64_t start = b * block, end = std::min(start + block, n);
    for (int64_t at = start; at < end;) {  // the block's part of each sample it meets
      const int64_t r = row_of(at), first = row_begin(r), until = std::min(end, row_begin(r + 1));
      dropout_row(x.data() + at, out.data() + at, until - at, p, key.key, dropout_index(key.first_row + r, at - first));
      at = until;
    }
    if (relu)  // relu(x) * scale == relu(x * scale), scale > 0
      for (float* o = out.data() + start; o < out.data() + end; ++o) *o = *o > 0.0f ? *o : 0.0f;
  });
}

void sum_to(const Tensor& g, Tensor& out) {
  float* o = out.data();
  const float* pg = g.data();
  if (is_suffix_broadcast(out, g.shape()) && g.is_contiguous()) {
    // Column sums over leading rows, each column in row order (so the result does
    // not depend on the thread count), a block of columns at a time so that the
    // rows are read along their length rather than down a column.
    const int64_t nb = out.numel(), rows = g.numel() / nb;
    constexpr int64_t kColumns = 64;
    parallel_for((nb + kColumns - 1) / kColumns, g.numel() > kParallelThreshold, [&](int64_t block) {
      const int64_t j0 = block * kColumns, width = std::min(kColumns, nb - j0);
      float acc[kColumns] = {};
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < width; ++j) acc[j] += pg[r * nb + j0 + j];
      std::copy(acc, acc + width, o + j0);
    });
    return;
  }
  std::fill_n(o, out.numel(), 0.0f);
  std::array<Shape, 2> st{g.strides(), broadcast_strides(out.shape(), out.strides(), g.shape())};
  for_each_index<2>(g.shape(), st, [&](const std::array<int64_t, 2>& off) { o[off[1]] += pg[off[0]]; });
}

void scale_in_place(Tensor& x, float s) {
  float* d = x.data();
  parallel_chunks(x.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) d[i] *= s;
  });
}

}  // namespace tfm::ops::cpu
