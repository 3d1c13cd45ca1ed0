#pragma once
// Vectorised row kernels (AVX2 + FMA, 8 floats at a time) for softmax and the losses,
// attention's dot products and weighted sums, layer norm's row sums and beam search's
// candidate scan. The scalar loops they replace called libm's expf once per vocabulary
// entry (a tenth of a training step over an 8,000-word generator), or waited on one
// accumulator's latency in reductions the compiler may not reorder.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/cpu/cpu_isa.h"

namespace tfm::ops::cpu::vec {

// Cephes' expf, shared by exp8 and exp16 so that both give the same value for every
// element: range reduction by ln 2 (split in two parts for precision) and a degree-5
// polynomial. Above ln(FLT_MAX) the result is +inf; below -88.38 it is 0 (std::exp is
// subnormal there).
namespace cephes_exp {
constexpr float kHi = 88.7228391f, kLo = -88.3762626647949f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace cephes_exp

// e^x for 8 floats, within 2 ulp of std::exp. Like std::exp: -inf -> 0, +inf -> +inf,
// NaN -> NaN.
inline __m256 exp8(__m256 x) {
  using namespace cephes_exp;
  const __m256 hi = _mm256_set1_ps(kHi);
  __m256 c = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kLo)), hi);
  __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(c, _mm256_set1_ps(kLog2e), _mm256_set1_ps(0.5f)));
  c = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Hi), c);
  c = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Lo), c);
  __m256 y = _mm256_set1_ps(kPoly[0]);
  for (int i = 1; i < 6; ++i) y = _mm256_fmadd_ps(y, c, _mm256_set1_ps(kPoly[i]));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(c, c), _mm256_add_ps(c, _mm256_set1_ps(1.0f)));
  // y * 2^fx, fx in [-127, 128]: 2^128 is not a float, so fx = 128 is 2^127 * 2 (0 for fx = -127).
  const __m256i n = _mm256_cvttps_epi32(fx);
  const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_min_epi32(n, _mm256_set1_epi32(127)), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(pow2));
  y = _mm256_mul_ps(y, _mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(2.0f), _mm256_cmp_ps(fx, _mm256_set1_ps(127.5f), _CMP_GT_OQ)));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

// The largest of x[0, n) (NaNs ignored, as std::max ignores them); -inf for n == 0.
inline float max_of(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + j), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = lanes[0];
  for (int k = 1; k < 8; ++k) r = lanes[k] > r ? lanes[k] : r;
  for (; j < n; ++j) r = x[j] > r ? x[j] : r;
  return r;
}


// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" register, which
// -Wall reports as uninitialised once they are inlined (GCC bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// exp8 for 16 floats: the same operations in AVX-512 registers (mask registers where
// exp8 blends by vector masks), so the same result for every element.
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x) {
  using namespace cephes_exp;
  const __m512 hi = _mm512_set1_ps(kHi);
  __m512 c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kLo)), hi);
  __m512 fx = _mm512_roundscale_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  c = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Hi), c);
  c = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Lo), c);
  __m512 y = _mm512_set1_ps(kPoly[0]);
  for (int i = 1; i < 6; ++i) y = _mm512_fmadd_ps(y, c, _mm512_set1_ps(kPoly[i]));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(c, c), _mm512_add_ps(c, _mm512_set1_ps(1.0f)));
  const __m512i n = _mm512_cvttps_epi32(fx);
  const __m512i pow2 = _mm512_slli_epi32(_mm512_add_epi32(_mm512_min_epi32(n, _mm512_set1_epi32(127)), _mm512_set1_epi32(127)), 23);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(pow2));
  y = _mm512_mul_ps(y, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(fx, _mm512_set1_ps(127.5f), _CMP_GT_OQ), _mm512_set1_ps(1.0f),
                                            _mm512_set1_ps(2.0f)));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(std::numeric_limits<float>::infinity()));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

// exp_shifted (below) 16 at a time: the same y, the sum added up in another order.
__attribute__((target("avx512f"))) inline float exp_shifted16(const float* x, float* y, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift), neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 acc = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 in = n - j >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - j)) - 1);  // the last few padded with -inf
    const __m512 e = exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(neg_inf, in, x + j), s));
    if (y) _mm512_mask_storeu_ps(y + j, in, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// y[j] = e^(x[j] - shift) (y may be x, or null to only sum); returns the sum.
inline float exp_shifted(const float* x, float* y, int64_t n, float shift) {
  if (n >= 64 && cpu_isa().avx512) return exp_shifted16(x, y, n, shift);  // (shorter rows would mostly be tail)
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), s));
    if (y) _mm256_storeu_ps(y + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < n) {  // the last few, padded with -inf (e^-inf = 0)
    alignas(32) float tail[8];
    for (int64_t c = 0; c < 8; ++c) tail[c] = j + c < n ? x[j + c] : -std::numeric_limits<float>::infinity();
    const __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(tail), s));
    acc = _mm256_add_ps(acc, e);
    _mm256_store_ps(tail, e);
    if (y)
      for (int64_t c = 0; j + c < n; ++c) y[j + c] = tail[c];
  }
  return horizontal_sum(acc);
}

// The first index j in [from, n) with x[j] > bar (NaN never is), or n.
inline int64_t first_above(const float* x, int64_t from, int64_t n, float bar) {
  const __m256 b = _mm256_set1_ps(bar);
  int64_t j = from;
  for (; j + 8 <= n; j += 8) {
    const int above = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), b, _CMP_GT_OQ));
    if (above) return j + __builtin_ctz(static_cast<unsigned>(above));
  }
  for (; j < n; ++j)
    if (x[j] > bar) return j;
  return n;
}

// The sum of x[0, n).
inline float sum(const float* x, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + j));
  float total = horizontal_sum(acc);
  for (; j < n; ++j) total += x[j];
  return total;
}

// The sum of (x[j] - mean)^2 over x[0, n).
inline float squared_deviations(const float* x, int64_t n, float mean) {
  const __m256 m = _mm256_set1_ps(mean);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 dev = _mm256_sub_ps(_mm256_loadu_ps(x + j), m);
    acc = _mm256_fmadd_ps(dev, dev, acc);
  }
  float total = horizontal_sum(acc);
  for (; j < n; ++j) total += (x[j] - mean) * (x[j] - mean);
  return total;
}

// The dot product of a[0, n) and b[0, n) (8 lanes, fused multiply-adds).
inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  float sum = horizontal_sum(acc);
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

// out[r] = scale * (a[0, n) . (b[r] + offset)[0, n)) for r < 8: eight independent
// chains keep both FMA units busy, and one transposing reduction adds up all eight.
inline void scaled_dot8(const float* a, const float* const* b, int64_t offset, int64_t n, float scale, float* out) {
  __m256 s[8];
  for (int r = 0; r < 8; ++r) s[r] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 x = _mm256_loadu_ps(a + j);
    for (int r = 0; r < 8; ++r) s[r] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b[r] + offset + j), s[r]);
  }
  // hadd adds neighbours within 128-bit halves; after two rounds, lane r of the lower
  // half plus lane r of the upper half is row r's sum.
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(s[0], s[1]), _mm256_hadd_ps(s[2], s[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(s[4], s[5]), _mm256_hadd_ps(s[6], s[7]));
  __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
  if (j < n) {  // columns past the last multiple of 8
    alignas(32) float tail[8];
    for (int r = 0; r < 8; ++r) {
      tail[r] = 0.0f;
      for (int64_t c = j; c < n; ++c) tail[r] += a[c] * b[r][offset + c];
    }
    sums = _mm256_add_ps(sums, _mm256_load_ps(tail));
  }
  _mm256_storeu_ps(out, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
}

// y[0, n) = sum over r < count of w[r] * (rows[r] + offset)[0, n): 64 columns at a time
// held in eight registers across all rows (independent chains, one store per column).
inline void weighted_row_sum(const float* w, const float* const* rows, int64_t offset, int64_t count, int64_t n, float* y) {
  int64_t c = 0;
  for (; c + 64 <= n; c += 64) {
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t r = 0; r < count; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* xr = rows[r] + offset + c;
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(wr, _mm256_loadu_ps(xr + 8 * i), acc[i]);
    }
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(y + c + 8 * i, acc[i]);
  }
  for (; c + 8 <= n; c += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t r = 0; r < count; ++r) acc = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(rows[r] + offset + c), acc);
    _mm256_storeu_ps(y + c, acc);
  }
  for (; c < n; ++c) {
    float acc = 0.0f;
    for (int64_t r = 0; r < count; ++r) acc += w[r] * rows[r][offset + c];
    y[c] = acc;
  }
}

}  // namespace tfm::ops::cpu::vec
