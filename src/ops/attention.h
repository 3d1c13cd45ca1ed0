#pragma once
// Fused multi-head scaled dot-product attention:
//   softmax(Q K^T / sqrt(d_k) + mask) -> dropout -> weighted sum of V, per head.
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::ops {

// Sequences of different lengths stored without their padding, one after another:
// sequence b is rows [start[b], start[b] + length[b]) of a [1, rows, features] tensor.
// Training's encoder works on its sentences so (models::unpad): the
// position-wise products then skip the padding (14% of the source rows of Multi30k's
// batches), and attention never scores a padded key.
struct PackedSequences {
  std::vector<int64_t> start, length;
  int64_t batch() const { return static_cast<int64_t>(start.size()); }
  int64_t longest() const;
};

struct AttentionMask {
  // [batch, tk] flags, 1 = padded key that no query may attend. Empty: no padding.
  std::vector<uint8_t> key_padding;
  // Look-ahead mask: query i sees keys j <= i + (tk - tq), so a query block that
  // continues a cached prefix sees the whole prefix.
  bool causal = false;
  // Set where q (or k and v) hold packed sequences, [1, rows, heads * d_k], instead
  // of [batch, time, heads * d_k]; a packed side needs no padding flags.
  std::shared_ptr<const PackedSequences> packed_queries, packed_keys;
};

// q: [batch, tq, heads * d_k], k and v: [batch, tk, heads * d_k]. Each may be a view
// with any row stride (e.g. a slice of a fused QKV projection) but unit stride in
// its last dimension; head h uses columns [h * d_k, (h + 1) * d_k).
// Returns [batch, tq, heads * d_k], heads concatenated. If `weights` is non-null
// it receives the attention probabilities [batch, heads, tq, tk] (before dropout).
// Packed queries (mask.packed_queries) make q and the result [1, rows, heads * d_k];
// packed keys, k and v. tq and tk are then the longest sequence's length, and
// weights beyond a sequence's length are 0.
//
// key_rows (decoding: one query per row, no gradient) says where each query row's
// keys are: key j of query row b is row key_rows[j * batch + b] of k and v, which may
// then have any number of rows. A cache keeps its vectors where they were written
// and beam search reorders its hypotheses by rewriting this index alone.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionMask& mask,
                 float dropout_p = 0.0f, uint64_t dropout_key = 0, Tensor* weights = nullptr, const int32_t* key_rows = nullptr);

}  // namespace tfm::ops
