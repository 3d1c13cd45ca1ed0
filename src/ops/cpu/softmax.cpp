// Softmax kernels: rows over the last dimension, and beam search's best candidates.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/cpu/kernels.h"
#include "ops/cpu/rows.h"
#include "ops/cpu/vec_math.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

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

void softmax(const Tensor& x, bool log, Tensor& y) {
  const int64_t n = x.size(-1), rows = x.numel() / n;
  const float* px = x.data();
  float* py = y.data();
  parallel_for(rows, x.numel() > (1 << 14), [&](int64_t r) {
    (log ? log_softmax_row : softmax_row)(px + r * n, py + r * n, n);
  });
}

void softmax_backward(const Tensor& y, const Tensor& g, bool log, Tensor& dx) {
  const int64_t n = y.size(-1), rows = y.numel() / n;
  parallel_for(rows, y.numel() > (1 << 14), [&](int64_t r) {
    const float *yr = y.data() + r * n, *gr = g.data() + r * n;
    float* d = dx.data() + r * n;
    if (log) {  // dx = g - exp(y) * sum(g)
      float total = 0.0f;
      for (int64_t j = 0; j < n; ++j) total += gr[j];
      for (int64_t j = 0; j < n; ++j) d[j] = gr[j] - std::exp(yr[j]) * total;
    } else {  // dx = y * (g - sum(g * y))
      float dot = 0.0f;
      for (int64_t j = 0; j < n; ++j) dot += gr[j] * yr[j];
      for (int64_t j = 0; j < n; ++j) d[j] = yr[j] * (gr[j] - dot);
    }
  });
}


void top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, Tensor& out) {
  const int64_t n = logits.size(0), V = logits.size(1), width = out.size(1);
  parallel_for(n, n * V > (1 << 15), [&](int64_t r) {
    const float* row = logits.data() + r * V;
    float* o = out.data() + r * width;
    std::vector<std::pair<float, int64_t>> top;  // (logit, id), kept sorted, best first
    float bar = -std::numeric_limits<float>::infinity();  // what an entry must beat: the worst kept once `top` is full
    for (int64_t v = vec::first_above(row, 0, V, bar); v < V; v = vec::first_above(row, v + 1, V, bar)) {
      if (std::find(excluded.begin(), excluded.end(), v) != excluded.end()) continue;
      auto at = std::upper_bound(top.begin(), top.end(), row[v], [](float x, const auto& e) { return x > e.first; });
      top.insert(at, {row[v], v});
      if (static_cast<int64_t>(top.size()) > count) top.pop_back();
      if (static_cast<int64_t>(top.size()) == count) bar = top.back().first;
    }
    for (int64_t k = 0; k < count; ++k) {
      const bool found = k < static_cast<int64_t>(top.size());
      o[k] = found ? top[k].first : -std::numeric_limits<float>::infinity();
      o[count + k] = found ? static_cast<float>(top[k].second) : -1.0f;
    }
    o[2 * count] = log_sum_exp_row(row, V);
    for (size_t e = 0; e < excluded.size(); ++e)
      o[2 * count + 1 + static_cast<int64_t>(e)] = excluded[e] >= 0 && excluded[e] < V ? row[excluded[e]] : std::numeric_limits<float>::quiet_NaN();
  });
}

}  // namespace tfm::ops::cpu
