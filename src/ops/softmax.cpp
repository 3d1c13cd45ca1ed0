#include "ops/softmax.h"

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/autograd.h"
#include "threads/parallel.h"
#include "ops/vec_math.h"

namespace tfm::ops {

void softmax_row(const float* x, float* y, int64_t n) {
  const float mx = vec::max_of(x, n);
  if (mx == -std::numeric_limits<float>::infinity()) {  // every entry masked: attend nowhere
    for (int64_t j = 0; j < n; ++j) y[j] = 0.0f;
    return;
  }
  const float inv = 1.0f / vec::exp_shifted(x, y, n, mx);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

float log_sum_exp_row(const float* x, int64_t n) {
  const float mx = vec::max_of(x, n);
  return mx + std::log(vec::exp_shifted(x, nullptr, n, mx));
}

void log_softmax_row(const float* x, float* y, int64_t n) {
  const float lse = log_sum_exp_row(x, n);
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] - lse;
}

namespace {

template <class RowFn>
Tensor rowwise(const Tensor& x, RowFn fn) {
  Tensor xc = x.is_contiguous() ? x : x.clone();
  Tensor out = Tensor::empty(x.shape());
  const int64_t n = x.size(-1), rows = x.numel() / n;
  parallel_for(rows, x.numel() > (1 << 14), [&](int64_t r) { fn(xc.data() + r * n, out.data() + r * n, n); });
  return out;
}

}  // namespace

// Backward of a row-wise op from its saved output y: fn(y_row, grad_row, dx_row, n).
template <class RowFn>
autograd::BackwardFn rowwise_backward(const Tensor& y, RowFn fn) {
  return [yd = y.detach(), fn](const Tensor& g) {
    Tensor dx = Tensor::empty(yd.shape());
    const int64_t n = yd.size(-1), rows = yd.numel() / n;
    parallel_for(rows, yd.numel() > (1 << 14), [&](int64_t r) { fn(yd.data() + r * n, g.data() + r * n, dx.data() + r * n, n); });
    return std::vector<Tensor>{dx};
  };
}

Tensor softmax(const Tensor& x) {
  Tensor out = rowwise(x, softmax_row);
  return autograd::record(out, "softmax", {x}, rowwise_backward(out, [](const float* y, const float* g, float* dx, int64_t n) {
    float dot = 0.0f;  // dx = y * (g - sum(g * y))
    for (int64_t j = 0; j < n; ++j) dot += g[j] * y[j];
    for (int64_t j = 0; j < n; ++j) dx[j] = y[j] * (g[j] - dot);
  }));
}

Tensor log_softmax(const Tensor& x) {
  Tensor out = rowwise(x, log_softmax_row);
  return autograd::record(out, "log_softmax", {x}, rowwise_backward(out, [](const float* y, const float* g, float* dx, int64_t n) {
    float total = 0.0f;  // dx = g - exp(y) * sum(g)
    for (int64_t j = 0; j < n; ++j) total += g[j];
    for (int64_t j = 0; j < n; ++j) dx[j] = g[j] - std::exp(y[j]) * total;
  }));
}

}  // namespace tfm::ops
