#include "decode/sampling.h"

#include "autograd/autograd.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::decode {

namespace {

// Logits of the last position after feeding `ids` (appended to the cache if any): [1, vocab].
Tensor last_logits(models::GPT& model, const std::vector<int>& ids, std::vector<nn::KVCache>* caches) {
  Tensor logits = model.forward({ids, 1, static_cast<int64_t>(ids.size())}, caches);  // [1, len, vocab]
  return ops::reshape(ops::slice(logits, 1, logits.size(1) - 1, logits.size(1)), {1, logits.size(2)});
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
    const Tensor logits = last_logits(model, feed, o.use_cache ? &caches : nullptr);
    const int token = ops::sample(logits, o.sampling(), rng).values<int32_t>()[0];
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
