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

// The penalties on a row's logits [vocab] (a copy): transformers'
// RepetitionPenaltyLogitsProcessor over every token seen, each once; then OpenAI's
// frequency and presence penalties over the generated ones. Ids outside the vocabulary
// (none a model accepted) are skipped.
inline void penalize(std::vector<float>& logits, const SampledRow& row) {
  const Sampling& o = row.sampling;
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto known = [&](int id) { return id >= 0 && id < vocab; };
  if (o.repetition_penalty != 1.0f) {
    std::vector<bool> done(logits.size());
    for (const int id : row.seen)
      if (known(id) && !done[static_cast<size_t>(id)]) {
        float& l = logits[static_cast<size_t>(id)];
        l = l < 0.0f ? l * o.repetition_penalty : l / o.repetition_penalty;
        done[static_cast<size_t>(id)] = true;
      }
  }
  if (o.frequency_penalty == 0.0f && o.presence_penalty == 0.0f) return;
  std::vector<int> count(logits.size());
  for (const int id : row.seen.last(static_cast<size_t>(std::min<int64_t>(row.generated, static_cast<int64_t>(row.seen.size())))))
    if (known(id)) ++count[static_cast<size_t>(id)];
  for (size_t id = 0; id < logits.size(); ++id)
    if (count[id] > 0) logits[id] -= o.frequency_penalty * static_cast<float>(count[id]) + o.presence_penalty;
}

// One row of logits [vocab]'s token: the penalties (penalize), then the most likely at
// temperature 0, else drawn from the softmax at the temperature over the top_k most
// likely, cut to the smallest set reaching top_p, then to those at least min_p times as
// likely as the first, with the row's generator.
inline int sample_row(const float* row_logits, int64_t vocab, const SampledRow& row) {
  const Sampling& o = row.sampling;
  // Nothing can be ranked or sampled by NaN: an error, not a silent pick of token 0.
  expect_finite(row_logits, static_cast<size_t>(vocab), "scores");
  std::vector<float> penalized;
  if (o.penalizes()) {
    penalized.assign(row_logits, row_logits + vocab);
    penalize(penalized, row);
  }
  const float* logits = o.penalizes() ? penalized.data() : row_logits;
  if (o.temperature <= 0.0f) return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  // Candidates by decreasing logit; softmax at the temperature over those kept.
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  order.resize(static_cast<size_t>(k));
  std::vector<double> p(order.size());  // relative to the most likely's (p[0] = 1)
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) total += p[i] = std::exp((logits[order[i]] - logits[order[0]]) / o.temperature);
  size_t keep = order.size();
  if (o.top_p < 1.0f) {
    double mass = 0;
    for (keep = 0; keep < order.size();) {
      mass += p[keep++] / total;
      if (mass >= o.top_p) break;
    }
  }
  while (keep > 1 && p[keep - 1] < o.min_p) --keep;  // (transformers' MinPLogitsWarper: p / p_max < min_p goes)
  total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  double u = Rng(row.counter).uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[keep - 1];
}

}  // namespace tfm::ops
