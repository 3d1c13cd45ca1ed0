#pragma once
// From sentence pairs to training batches: encoding with the vocabularies,
// length bucketing into batches bounded by a token count (like fairseq's
// --max-tokens or Marian's --mini-batch-words), and padding.
#include <cstdint>
#include <vector>

#include "data/text.h"
#include "data/vocab.h"

namespace tfm::data {

struct Example {
  std::vector<int> src, tgt;  // subword ids without special tokens
};

struct EncodedCorpus {
  std::vector<Example> examples;
  std::vector<int64_t> lines;   // each example's index in the ParallelCorpus
  int64_t too_long_skipped = 0;  // pairs with a side longer than max_tokens subwords
};

EncodedCorpus encode_corpus(const ParallelCorpus& corpus, const Vocab& src_vocab, const Vocab& tgt_vocab, int64_t max_tokens);

// Groups examples of similar length into batches whose padded size (sentences x
// longest side, special tokens included) stays within max_tokens. With a seed,
// equal lengths are ordered randomly and the batch order is shuffled; seed 0
// keeps a deterministic length order (for evaluation).
std::vector<std::vector<int64_t>> make_batches(const std::vector<Example>& examples, int64_t max_tokens, uint64_t seed);

}  // namespace tfm::data
