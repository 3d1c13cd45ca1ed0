#include "ops/softmax.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "autograd/autograd.h"
#include "threads/parallel.h"
#include "ops/vec_math.h"
#include "tensor/error.h"

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

namespace {

// One row's top_log_probs; nothing where the row is not finite.
std::optional<std::vector<std::pair<double, int64_t>>> top_log_probs_row(const float* logits, int64_t V, int64_t count,
                                                                         const std::vector<int>& excluded) {
  const float lse = log_sum_exp_row(logits, V);
  if (!std::isfinite(lse)) return std::nullopt;
  std::vector<std::pair<float, int64_t>> top;  // (logit, id), kept sorted, best first
  float bar = -std::numeric_limits<float>::infinity();  // what an entry must beat: the worst kept once `top` is full
  for (int64_t v = vec::first_above(logits, 0, V, bar); v < V; v = vec::first_above(logits, v + 1, V, bar)) {
    if (std::find(excluded.begin(), excluded.end(), v) != excluded.end()) continue;
    auto at = std::upper_bound(top.begin(), top.end(), logits[v], [](float x, const auto& e) { return x > e.first; });
    top.insert(at, {logits[v], v});
    if (static_cast<int64_t>(top.size()) > count) top.pop_back();
    if (static_cast<int64_t>(top.size()) == count) bar = top.back().first;
  }
  std::vector<std::pair<double, int64_t>> out;
  for (const auto& [logit, v] : top) out.push_back({logit - lse, v});
  return out;
}

}  // namespace

bool top_log_probs(const Tensor& logits_in, int64_t count, const std::vector<int>& excluded, const std::vector<uint8_t>& wanted,
                   std::vector<std::vector<std::pair<double, int64_t>>>& best) {
  TFM_CHECK(logits_in.dim() == 2 && static_cast<int64_t>(wanted.size()) == logits_in.size(0),
            "top_log_probs: logits " << shape_str(logits_in.shape()) << " for " << wanted.size() << " rows");
  const Tensor logits = logits_in.is_contiguous() ? logits_in : logits_in.clone();
  const int64_t n = logits.size(0), V = logits.size(1);
  best.assign(static_cast<size_t>(n), {});
  std::atomic<bool> finite{true};
  parallel_for(n, n * V > (1 << 15), [&](int64_t r) {
    if (!wanted[r]) return;
    auto top = top_log_probs_row(logits.data() + r * V, V, count, excluded);
    if (top) best[r] = std::move(*top);
    else finite = false;
  });
  return finite;
}

}  // namespace tfm::ops
