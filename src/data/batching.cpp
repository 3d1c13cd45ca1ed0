#include "data/batching.h"

#include <algorithm>
#include <numeric>

#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::data {

EncodedCorpus encode_corpus(const ParallelCorpus& corpus, const Vocab& src_vocab, const Vocab& tgt_vocab, int64_t max_tokens) {
  EncodedCorpus out;
  for (size_t i = 0; i < corpus.src.size(); ++i) {
    Example e{src_vocab.encode(corpus.src[i]), tgt_vocab.encode(corpus.tgt[i])};
    if (static_cast<int64_t>(std::max(e.src.size(), e.tgt.size())) > max_tokens) {
      ++out.too_long_skipped;
      continue;
    }
    out.examples.push_back(std::move(e));
    out.lines.push_back(static_cast<int64_t>(i));
  }
  return out;
}

namespace {

int64_t padded_len(const Example& e) { return static_cast<int64_t>(std::max(e.src.size(), e.tgt.size())) + 1; }

}  // namespace

std::vector<std::vector<int64_t>> make_batches(const std::vector<Example>& examples, int64_t max_tokens, uint64_t seed) {
  std::vector<int64_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  if (seed != 0)
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.randint(0, static_cast<int64_t>(i))]);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const Example &x = examples[a], &y = examples[b];
    return std::pair(x.tgt.size(), x.src.size()) < std::pair(y.tgt.size(), y.src.size());
  });
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> current;
  int64_t longest = 0;
  for (int64_t i : order) {
    const int64_t len = padded_len(examples[i]);
    TFM_CHECK(len <= max_tokens, "a sentence of " << len << " tokens does not fit in batches of " << max_tokens << " tokens");
    if (!current.empty() && std::max(longest, len) * static_cast<int64_t>(current.size() + 1) > max_tokens) {
      batches.push_back(std::move(current));
      current.clear();
      longest = 0;
    }
    current.push_back(i);
    longest = std::max(longest, len);
  }
  if (!current.empty()) batches.push_back(std::move(current));
  if (seed != 0)
    for (size_t i = batches.size(); i > 1; --i) std::swap(batches[i - 1], batches[rng.randint(0, static_cast<int64_t>(i))]);
  return batches;
}

}  // namespace tfm::data
