#include "ops/layer_norm.h"

#include <omp.h>

#include <cmath>
#include <vector>

#include "autograd/autograd.h"
#include "tensor/error.h"

namespace tfm::ops {

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t d = x_in.size(-1);
  TFM_CHECK(weight.numel() == d && bias.numel() == d, "layer_norm: weight/bias of size " << weight.numel() << " for rows of " << d);
  Tensor x = x_in.is_contiguous() ? x_in : x_in.clone();
  const int64_t rows = x.numel() / d;
  Tensor out = Tensor::empty(x.shape());
  Tensor mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  const float *px = x.data(), *pw = weight.data(), *pb = bias.data();
  float *po = out.data(), *pm = mean.data(), *pr = rstd.data();
#pragma omp parallel for if (x.numel() > (1 << 14)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * d;
    float mu = 0.0f;
    for (int64_t j = 0; j < d; ++j) mu += xr[j];
    mu /= static_cast<float>(d);
    float var = 0.0f;
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    var /= static_cast<float>(d);
    const float rs = 1.0f / std::sqrt(var + eps);
    pm[r] = mu;
    pr[r] = rs;
    for (int64_t j = 0; j < d; ++j) po[r * d + j] = (xr[j] - mu) * rs * pw[j] + pb[j];
  }

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
        float sum_gw = 0.0f, sum_gw_xhat = 0.0f;
        for (int64_t j = 0; j < d; ++j) {
          const float xhat = (xr[j] - mu) * rs;
          const float gw = gr[j] * pw[j];
          sum_gw += gw;
          sum_gw_xhat += gw * xhat;
          dw[j] += gr[j] * xhat;
          db[j] += gr[j];
        }
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
    return std::vector<Tensor>{dx, dweight.reshape(wd.shape()), dbias.reshape(wd.shape())};
  });
}

}  // namespace tfm::ops
