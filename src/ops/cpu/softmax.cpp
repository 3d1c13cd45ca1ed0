// Softmax kernels: rows over the last dimension, and beam search's best candidates.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/cpu/kernels.h"
#include "ops/host_rules.h"
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


bool top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, bool renormalize,
                   const std::vector<uint8_t>& wanted, std::vector<std::vector<std::pair<double, int64_t>>>& best) {
  const int64_t n = logits.size(0), V = logits.size(1);
  best.assign(static_cast<size_t>(n), {});
  std::atomic<bool> finite{true};
  parallel_for(n, n * V > (1 << 15), [&](int64_t r) {
    if (!wanted[r]) return;
    const float* row = logits.data() + r * V;
    auto top = top_log_probs_row(row, log_sum_exp_row(row, V), V, count, excluded, renormalize,
                                 [&](int64_t from, float bar) { return vec::first_above(row, from, V, bar); });
    if (top) best[r] = std::move(*top);
    else finite = false;
  });
  return finite;
}

}  // namespace tfm::ops::cpu
