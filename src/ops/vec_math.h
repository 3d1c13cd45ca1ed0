#pragma once
// Vectorised row kernels for softmax and the losses (AVX2 + FMA, 8 floats at a time).
// The scalar loops they replace called libm's expf once per vocabulary entry: over an
// 8,000-word generator that was a tenth of a training step and of every decoding step.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace tfm::ops::vec {

// e^x for 8 floats (Cephes' expf: range reduction by ln 2 and a degree-5 polynomial;
// within 2 ulp of std::exp). Like std::exp: -inf -> 0, +inf -> +inf, NaN -> NaN.
inline __m256 exp8(__m256 x) {
  // Above ln(FLT_MAX) the result is +inf; below -88.38 it is 0 (std::exp is subnormal there).
  const __m256 hi = _mm256_set1_ps(88.7228391f), lo = _mm256_set1_ps(-88.3762626647949f);
  __m256 c = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(c, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  c = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), c);
  c = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), c);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, c, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, c, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, c, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, c, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, c, _mm256_set1_ps(5.0000001201e-1f));
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

// y[j] = e^(x[j] - shift) (y may be x, or null to only sum); returns the sum.
inline float exp_shifted(const float* x, float* y, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), s));
    if (y) _mm256_storeu_ps(y + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = horizontal_sum(acc);
  for (; j < n; ++j) {
    const float e = std::exp(x[j] - shift);
    if (y) y[j] = e;
    sum += e;
  }
  return sum;
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

// The dot products of a[0, n) with each of b0..b3[0, n): four independent chains,
// so the multiply-adds overlap instead of waiting on one accumulator.
inline void dot4(const float* a, const float* b0, const float* b1, const float* b2, const float* b3, int64_t n, float out[4]) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 x = _mm256_loadu_ps(a + j);
    s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b0 + j), s0);
    s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b1 + j), s1);
    s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b2 + j), s2);
    s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b3 + j), s3);
  }
  out[0] = horizontal_sum(s0), out[1] = horizontal_sum(s1), out[2] = horizontal_sum(s2), out[3] = horizontal_sum(s3);
  for (; j < n; ++j) out[0] += a[j] * b0[j], out[1] += a[j] * b1[j], out[2] += a[j] * b2[j], out[3] += a[j] * b3[j];
}

// y[0, n) = sum over r < count of w[r] * rows[r][0, n): 32 columns at a time held in
// registers across all rows (one store per column, not one per row).
inline void weighted_row_sum(const float* w, const float* const* rows, int64_t count, int64_t n, float* y) {
  int64_t c = 0;
  for (; c + 32 <= n; c += 32) {
    __m256 y0 = _mm256_setzero_ps(), y1 = _mm256_setzero_ps(), y2 = _mm256_setzero_ps(), y3 = _mm256_setzero_ps();
    for (int64_t r = 0; r < count; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* xr = rows[r] + c;
      y0 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(xr), y0);
      y1 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(xr + 8), y1);
      y2 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(xr + 16), y2);
      y3 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(xr + 24), y3);
    }
    _mm256_storeu_ps(y + c, y0), _mm256_storeu_ps(y + c + 8, y1), _mm256_storeu_ps(y + c + 16, y2), _mm256_storeu_ps(y + c + 24, y3);
  }
  for (; c + 8 <= n; c += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t r = 0; r < count; ++r) acc = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(rows[r] + c), acc);
    _mm256_storeu_ps(y + c, acc);
  }
  for (; c < n; ++c) {
    float acc = 0.0f;
    for (int64_t r = 0; r < count; ++r) acc += w[r] * rows[r][c];
    y[c] = acc;
  }
}

}  // namespace tfm::ops::vec
