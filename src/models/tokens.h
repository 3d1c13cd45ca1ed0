#pragma once
// Batches of token ids as every model takes them.
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/attention.h"

namespace tfm::models {

// A batch of token ids, padded with the model's pad id: an i32 tensor [rows, cols] in
// host memory (the models read it to pack sequences; nn::Embedding moves the ids to
// its table's device).
struct Tokens {
  Tensor ids;  // [rows, cols] i32
  Tokens() = default;
  Tokens(const std::vector<int>& values, int64_t rows, int64_t cols)  // row-major
      : ids(Tensor::from_values<int32_t>({rows, cols}, values)) {}
  int64_t rows() const { return ids.defined() ? ids.size(0) : 0; }
  int64_t cols() const { return ids.defined() ? ids.size(1) : 0; }
  int32_t* data() { return ids.data_as<int32_t>(); }
  const int32_t* data() const { return ids.data_as<int32_t>(); }
  int at(int64_t r, int64_t c) const { return data()[r * cols() + c]; }
  std::vector<int> values() const { return ids.values<int32_t>(); }
};

// Key-padding mask (1 where the token is padding) on `device`, optionally with the
// look-ahead mask.
ops::AttentionMask padding_mask(const Tokens& t, int pad_id, Device device, bool causal = false);

// A batch's tokens without their padding: which of the [rows * cols] positions are
// real tokens (row by row), and the sequences they make one after another.
struct Unpadded {
  Tensor positions;  // i64 [tokens], in host memory (ops::gather_rows checks them there and copies them over)
  std::shared_ptr<const ops::PackedSequences> sequences;
};
Unpadded unpad(const Tokens& t, int pad_id);

// The rows of x [t.rows(), t.cols(), features] at u's positions: [1, tokens, features].
Tensor at_tokens(const Tensor& x, const Unpadded& u);

}  // namespace tfm::models
