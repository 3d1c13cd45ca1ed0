#pragma once
// Batches of token ids as every model takes them.
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/attention.h"

namespace tfm::models {

// A batch of token ids, row-major [rows, cols], padded with the model's pad id.
struct Tokens {
  std::vector<int> ids;
  int64_t rows = 0, cols = 0;
  int at(int64_t r, int64_t c) const { return ids[r * cols + c]; }
};

// Key-padding mask (1 where the token is padding), optionally with the look-ahead mask.
ops::AttentionMask padding_mask(const Tokens& t, int pad_id, bool causal = false);

// A batch's tokens without their padding: which of the [rows * cols] positions are
// real tokens (row by row), and the sequences they make one after another.
struct Unpadded {
  std::vector<int64_t> positions;
  std::shared_ptr<const ops::PackedSequences> sequences;
};
Unpadded unpad(const Tokens& t, int pad_id);

// The rows of x [t.rows, t.cols, features] at u's positions: [1, tokens, features].
Tensor at_tokens(const Tensor& x, const Unpadded& u);

}  // namespace tfm::models
