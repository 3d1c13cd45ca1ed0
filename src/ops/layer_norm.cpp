#include "ops/layer_norm.h"

#include <omp.h>

#include <cmath>
#include <vector>

#include "autograd/autograd.h"
#include "ops/shape.h"
#include "ops/vec_math.h"
#include "tensor/error.h"
#include "threads/parallel.h"

namespace tfm::ops {

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

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t d = x_in.size(-1);
  TFM_CHECK(weight.numel() == d && bias.numel() == d, "layer_norm: weight/bias of size " << weight.numel() << " for rows of " << d);
  Tensor x = x_in.is_contiguous() ? x_in : x_in.clone();
  const int64_t rows = x.numel() / d;
  Tensor out = Tensor::empty(x.shape());
  Tensor mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  const float *px = x.data(), *pw = weight.data(), *pb = bias.data();
  float *po = out.data(), *pm = mean.data(), *pr = rstd.data();
  parallel_for(rows, x.numel() > (1 << 14), [&](int64_t r) {
    const float* xr = px + r * d;
    const float mu = vec::sum(xr, d) / static_cast<float>(d);
    const float var = vec::squared_deviations(xr, d, mu) / static_cast<float>(d);
    const float rs = 1.0f / std::sqrt(var + eps);
    pm[r] = mu;
    pr[r] = rs;
    for (int64_t j = 0; j < d; ++j) po[r * d + j] = (xr[j] - mu) * rs * pw[j] + pb[j];
  });

  Tensor xd = x.detach(), wd = weight.detach();
  return autograd::record(out, "layer_norm", {x_in, weight, bias}, [xd, wd, mean, rstd, rows, d](const Tensor& g) {
    Tensor dx = Tensor::empty(xd.shape());
    // Weight and bias gradients: per-thread partial sums over rows, combined in thread order.
    const int nthreads = omp_get_max_threads();
    std::vector<float> partial(static_cast<size_t>(nthreads) * 2 * d, 0.0f);
    const float *px = xd.data(), *pw = wd.data(), *pg = g.data(), *pm = mean.data(), *pr = rstd.data();
    float* pdx = dx.data();
#pragma omp parallel num_threads(nthreads)
    {
      float* dw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * d;
      float* db = dw + d;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * d;
        const float* gr = pg + r * d;
        const float mu = pm[r], rs = pr[r];
        float sum_gw, sum_gw_xhat;
        accumulate_row_backward(xr, gr, pw, mu, rs, d, dw, db, sum_gw, sum_gw_xhat);
        const float inv_d = 1.0f / static_cast<float>(d);
        for (int64_t j = 0; j < d; ++j) {
          const float xhat = (xr[j] - mu) * rs;
          pdx[r * d + j] = rs * (gr[j] * pw[j] - inv_d * sum_gw - xhat * inv_d * sum_gw_xhat);
        }
      }
    }
    Tensor dweight = Tensor::zeros({d}), dbias = Tensor::zeros({d});
    for (int t = 0; t < nthreads; ++t)
      for (int64_t j = 0; j < d; ++j) {
        dweight.data()[j] += partial[static_cast<size_t>(t) * 2 * d + j];
        dbias.data()[j] += partial[static_cast<size_t>(t) * 2 * d + d + j];
      }
    return std::vector<Tensor>{dx, ops::reshape(dweight, wd.shape()), ops::reshape(dbias, wd.shape())};
  });
}

}  // namespace tfm::ops
