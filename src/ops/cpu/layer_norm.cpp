// Layer norm and RMS norm kernels over the last dimension.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/cpu/vec_math.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

namespace {

// One row's share of the backward pass, x̂ = (x - mu) * rs: adds g x̂ to dw and g to db,
// and returns the row sums of g w and g w x̂ that dx needs (8 columns at a time).
void accumulate_row_backward(const float* x, const float* g, const float* w, float mu, float rs, int64_t d, float* dw, float* db,
                             float& sum_gw, float& sum_gw_xhat) {
  const __m256 vmu = _mm256_set1_ps(mu), vrs = _mm256_set1_ps(rs);
  __m256 acc_gw = _mm256_setzero_ps(), acc_gw_xhat = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= d; j += 8) {
    const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmu), vrs);
    const __m256 gj = _mm256_loadu_ps(g + j);
    const __m256 gw = _mm256_mul_ps(gj, _mm256_loadu_ps(w + j));
    acc_gw = _mm256_add_ps(acc_gw, gw);
    acc_gw_xhat = _mm256_fmadd_ps(gw, xhat, acc_gw_xhat);
    _mm256_storeu_ps(dw + j, _mm256_fmadd_ps(gj, xhat, _mm256_loadu_ps(dw + j)));
    _mm256_storeu_ps(db + j, _mm256_add_ps(gj, _mm256_loadu_ps(db + j)));
  }
  sum_gw = vec::horizontal_sum(acc_gw), sum_gw_xhat = vec::horizontal_sum(acc_gw_xhat);
  for (; j < d; ++j) {
    const float xhat = (x[j] - mu) * rs, gw = g[j] * w[j];
    sum_gw += gw;
    sum_gw_xhat += gw * xhat;
    dw[j] += g[j] * xhat;
    db[j] += g[j];
  }
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t d = x.size(-1), rows = x.numel() / d;
  const float *px = x.data(), *pw = w.data(), *pb = b.data();
  float *po = y.data(), *pm = mean.data(), *pr = rstd.data();
  parallel_for(rows, x.numel() > (1 << 14), [&](int64_t r) {
    const float* xr = px + r * d;
    const float mu = vec::sum(xr, d) / static_cast<float>(d);
    const float var = vec::squared_deviations(xr, d, mu) / static_cast<float>(d);
    const float rs = 1.0f / std::sqrt(var + eps);
    pm[r] = mu;
    pr[r] = rs;
    for (int64_t j = 0; j < d; ++j) po[r * d + j] = (xr[j] - mu) * rs * pw[j] + pb[j];
  });
}

void layer_norm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& g, Tensor& dx,
                         Tensor& dw, Tensor& db) {
  const int64_t d = x.size(-1), rows = x.numel() / d;
  // Weight and bias gradients: per-thread partial sums over rows, combined in thread order.
  const int nthreads = omp_get_max_threads();
  std::vector<float> partial(static_cast<size_t>(nthreads) * 2 * d, 0.0f);
  const float *px = x.data(), *pw = w.data(), *pg = g.data(), *pm = mean.data(), *pr = rstd.data();
  float* pdx = dx.data();
#pragma omp parallel num_threads(nthreads)
  {
    float* dw_t = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * d;
    float* db_t = dw_t + d;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = px + r * d;
      const float* gr = pg + r * d;
      const float mu = pm[r], rs = pr[r];
      float sum_gw, sum_gw_xhat;
      accumulate_row_backward(xr, gr, pw, mu, rs, d, dw_t, db_t, sum_gw, sum_gw_xhat);
      const float inv_d = 1.0f / static_cast<float>(d);
      for (int64_t j = 0; j < d; ++j) {
        const float xhat = (xr[j] - mu) * rs;
        pdx[r * d + j] = rs * (gr[j] * pw[j] - inv_d * sum_gw - xhat * inv_d * sum_gw_xhat);
      }
    }
  }
  float *pdw = dw.data(), *pdb = db.data();
  std::fill_n(pdw, d, 0.0f);
  std::fill_n(pdb, d, 0.0f);
  for (int t = 0; t < nthreads; ++t)
    for (int64_t j = 0; j < d; ++j) {
      pdw[j] += partial[static_cast<size_t>(t) * 2 * d + j];
      pdb[j] += partial[static_cast<size_t>(t) * 2 * d + d + j];
    }
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y, Tensor& rstd) {
  const int64_t d = x.size(-1), rows = x.numel() / d;
  const float *px = x.data(), *pw = w.data();
  float *po = y.data(), *pr = rstd.data();
  parallel_for(rows, x.numel() > (1 << 14), [&](int64_t r) {
    const float* xr = px + r * d;
    const float rs = 1.0f / std::sqrt(vec::squared_deviations(xr, d, 0.0f) / static_cast<float>(d) + eps);
    pr[r] = rs;
    for (int64_t j = 0; j < d; ++j) po[r * d + j] = xr[j] * rs * pw[j];  // (x rstd) w, LlamaRMSNorm's order
  });
}

// dx = rstd (g w - x rstd^2 mean(g w x)), dw = the sum over rows of g x rstd: per-thread
// partial sums over rows, combined in thread order (as layer_norm_backward's).
void rms_norm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& g, Tensor& dx, Tensor& dw) {
  const int64_t d = x.size(-1), rows = x.numel() / d;
  const int nthreads = omp_get_max_threads();
  std::vector<float> partial(static_cast<size_t>(nthreads) * d, 0.0f);
  const float *px = x.data(), *pw = w.data(), *pg = g.data(), *pr = rstd.data();
  float* pdx = dx.data();
#pragma omp parallel num_threads(nthreads)
  {
    float* dw_t = partial.data() + static_cast<size_t>(omp_get_thread_num()) * d;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = px + r * d, *gr = pg + r * d;
      const float rs = pr[r];
      float sum_gwx = 0.0f;
      for (int64_t j = 0; j < d; ++j) {
        sum_gwx += gr[j] * pw[j] * xr[j];
        dw_t[j] += gr[j] * xr[j] * rs;
      }
      const float c = rs * rs * sum_gwx / static_cast<float>(d);
      for (int64_t j = 0; j < d; ++j) pdx[r * d + j] = rs * (gr[j] * pw[j] - xr[j] * c);
    }
  }
  float* pdw = dw.data();
  std::fill_n(pdw, d, 0.0f);
  for (int t = 0; t < nthreads; ++t)
    for (int64_t j = 0; j < d; ++j) pdw[j] += partial[static_cast<size_t>(t) * d + j];
}

}  // namespace tfm::ops::cpu
