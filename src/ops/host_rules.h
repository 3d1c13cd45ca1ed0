#pragma once
// The host-side rules of the kernels that finish on the host on every device: a
// sampled row's token (ops::sample) and a row's best extensions for beam search
// (ops::top_log_probs). One definition, so that every device picks the same tokens.
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

// One row's top_log_probs: the `count` best (log-probability, id) pairs, best first,
// leaving out `excluded` (and, with `renormalize`, their probability), from the row's
// logits [V] and log-sum-exp `lse`; nothing where the row is not finite.
// first_above(from, bar): the first id at or after `from` whose logit is above bar (V if
// none; never a NaN), as fast a scan as the device has.
template <class FirstAbove>
std::optional<std::vector<std::pair<double, int64_t>>> top_log_probs_row(const float* logits, double lse, int64_t V, int64_t count,
                                                                         const std::vector<int>& excluded, bool renormalize,
                                                                         FirstAbove first_above) {
  if (!std::isfinite(lse)) return std::nullopt;
  if (renormalize) {  // the excluded ids' share of the probability taken out of the normaliser
    double excluded_mass = 0.0;
    for (size_t i = 0; i < excluded.size(); ++i) {
      const int e = excluded[i];
      const bool repeated = std::find(excluded.begin(), excluded.begin() + i, e) != excluded.begin() + i;  // Marian: pad is the start
      if (e >= 0 && e < V && !repeated) excluded_mass += std::exp(static_cast<double>(logits[e]) - lse);
    }
    lse += std::log1p(-std::min(excluded_mass, 1.0));
    if (!std::isfinite(lse)) return std::nullopt;
  }
  std::vector<std::pair<float, int64_t>> top;  // (logit, id), kept sorted, best first
  float bar = -std::numeric_limits<float>::infinity();  // what an entry must beat: the worst kept once `top` is full
  for (int64_t v = first_above(0, bar); v < V; v = first_above(v + 1, bar)) {
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

}  // namespace tfm::ops
