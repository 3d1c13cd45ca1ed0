#pragma once
// The host-side rules of the kernels that finish on the host on every device: a
// sampled row's token (ops::sample). One definition, so that every device picks the same
// tokens.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "ops/kernels.h"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::ops {

// One row of logits [vocab]'s token: the most likely at temperature 0, else drawn from
// the softmax at the temperature over the top_k most likely, cut to the smallest set
// reaching top_p, with the row's generator.
inline int sample_row(const float* logits, int64_t vocab, const Sampling& o, Rng rng) {
  // Nothing can be ranked or sampled by NaN: an error, not a silent pick of token 0.
  expect_finite(logits, static_cast<size_t>(vocab), "scores");
  if (o.temperature <= 0.0f) return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  // Candidates by decreasing logit; softmax at the temperature over those kept.
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  order.resize(static_cast<size_t>(k));
  std::vector<double> p(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) total += p[i] = std::exp((logits[order[i]] - logits[order[0]]) / o.temperature);
  size_t keep = order.size();
  if (o.top_p < 1.0f) {
    double mass = 0;
    for (keep = 0; keep < order.size();) {
      mass += p[keep++] / total;
      if (mass >= o.top_p) break;
    }
    total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  double u = rng.uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[keep - 1];
}

}  // namespace tfm::ops
