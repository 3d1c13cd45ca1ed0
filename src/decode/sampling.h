#pragma once
// Text generation from a decoder-only language model: temperature, top-k and
// nucleus (top-p) sampling with a seed, or greedy, with a key/value cache so that
// each new token costs one position.
#include <cstdint>
#include <functional>
#include <vector>

#include "models/gpt.h"
#include "ops/random.h"
#include "tensor/rng.h"

namespace tfm::decode {

struct SamplingOptions {
  int64_t max_new_tokens = 500;
  float temperature = 0.8f;  // 0: greedy (always the most likely token)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  float top_p = 1.0f;        // keep the smallest set whose probability reaches p; 1: all
  uint64_t seed = 1;
  bool use_cache = true;     // false: re-run the whole window each step (for tests)

  ops::Sampling sampling() const { return {temperature, top_k, top_p}; }
};

// Continues `prompt` (at least one token) by up to max_new_tokens tokens, calling
// on_token with each as soon as it is chosen. Returns the new tokens. When the
// sequence outgrows the context window, the cache is rebuilt from the last half of
// the window (so the cost stays about one position a token).
std::vector<int> generate(models::GPT& model, const std::vector<int>& prompt, const SamplingOptions& o,
                          const std::function<void(int)>& on_token = {});

}  // namespace tfm::decode
