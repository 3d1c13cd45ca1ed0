#include "decode/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/autograd.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::decode {

int sample_token(const float* logits, int64_t vocab, const SamplingOptions& o, Rng& rng) {
  // Nothing can be ranked or sampled by NaN: an error, not a silent pick of token 0.
  TFM_CHECK(std::all_of(logits, logits + vocab, [](float x) { return std::isfinite(x); }),
            "the model's scores are not finite (NaN or infinity): its weights are corrupted or too large");
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

namespace {

// Logits of the last position after feeding `ids` (appended to the cache if any).
std::vector<float> last_logits(models::GPT& model, const std::vector<int>& ids, std::vector<nn::KVCache>* caches) {
  Tensor logits = model.forward({ids, 1, static_cast<int64_t>(ids.size())}, caches);  // [1, len, vocab]
  const int64_t vocab = logits.size(2);
  Tensor last = ops::contiguous(ops::slice(logits, 1, logits.size(1) - 1, logits.size(1)));
  return std::vector<float>(last.data(), last.data() + vocab);
}

}  // namespace

std::vector<int> generate(models::GPT& model, const std::vector<int>& prompt, const SamplingOptions& o,
                          const std::function<void(int)>& on_token) {
  TFM_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
  autograd::NoGradGuard no_grad;
  model.eval();
  Rng rng(o.seed);
  const int64_t window = model.config().max_len;
  std::vector<int> seq = prompt, out;
  std::vector<nn::KVCache> caches;
  // The tokens to feed next: a whole window when (re)starting, then one at a time.
  auto restart = [&](int64_t keep) {
    caches.clear();
    return std::vector<int>(seq.end() - std::min<int64_t>(keep, static_cast<int64_t>(seq.size())), seq.end());
  };
  std::vector<int> feed = restart(window);
  for (int64_t n = 0; n < o.max_new_tokens; ++n) {
    std::vector<float> logits = last_logits(model, feed, o.use_cache ? &caches : nullptr);
    const int token = sample_token(logits.data(), static_cast<int64_t>(logits.size()), o, rng);
    seq.push_back(token);
    out.push_back(token);
    if (on_token) on_token(token);
    const int64_t cached = caches.empty() ? 0 : caches[0].length;
    if (!o.use_cache) feed = restart(window);
    else if (cached + 1 > window) feed = restart(window / 2 + 1);
    else feed = {token};
  }
  return out;
}

}  // namespace tfm::decode
