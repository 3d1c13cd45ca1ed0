// Reductions, the optimiser's update and dtype conversions.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "tensor/float_formats.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

double sum(const Tensor& x, bool squares) {
  // Fixed-size blocks summed in order: the result does not depend on thread count.
  const float* p = x.data();
  const int64_t n = x.numel(), block = 4096, nblocks = (n + block - 1) / block;
  std::vector<double> partial(nblocks, 0.0);
  parallel_for(nblocks, nblocks > 8, [&](int64_t b) {
    double acc = 0.0;
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) acc += squares ? static_cast<double>(p[i]) * p[i] : p[i];
    partial[b] = acc;
  });
  double total = 0.0;
  for (double v : partial) total += v;
  return total;
}

void adam(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u) {
  float* p = param.data();
  float* m = exp_avg.data();
  float* v = exp_avg_sq.data();
  const float* gp = grad.data();
  const int64_t n = param.numel();
  parallel_for(n, n > (1 << 14), [&](int64_t i) {
    const float gi = u.l2 != 0.0f ? gp[i] + u.l2 * p[i] : gp[i];
    p[i] *= u.shrink;
    m[i] = m[i] * u.beta1 + gi * (1.0f - u.beta1);
    v[i] = v[i] * u.beta2 + gi * gi * (1.0f - u.beta2);
    const float denom = std::sqrt(v[i]) / u.bc2_sqrt + u.eps;
    p[i] -= u.step_size * (m[i] / denom);
  });
}


void convert(const Tensor& src, Tensor& dst) {
  with_dtype(src.dtype(), [&](auto s) {
    with_dtype(dst.dtype(), [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      const S* in = src.data_as<S>();
      D* o = dst.data_as<D>();
      parallel_chunks(src.numel(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) o[i] = convert_value<D>(in[i]);
      });
    });
  });
}

void from_pixels(const Tensor& pixels, Tensor& out) {
  const uint8_t* in = pixels.data_as<uint8_t>();
  float* o = out.data();
  parallel_chunks(pixels.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = in[i] / 127.5f - 1.0f;
  });
}

}  // namespace tfm::ops::cpu
