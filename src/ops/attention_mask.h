#pragma once
// What attention may see: padded keys, the look-ahead mask, packed sequences.
#include <algorithm>
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
  int64_t longest() const { return length.empty() ? 0 : *std::max_element(length.begin(), length.end()); }
};

struct AttentionMask {
  // bool [batch, tk]: true = a padded key that no query may attend. Undefined: no padding.
  Tensor key_padding;
  // Look-ahead mask: query i sees keys j <= i + (tk - tq), so a query block that
  // continues a cached prefix sees the whole prefix.
  bool causal = false;
  // Set where q (or k and v) hold packed sequences, [1, rows, heads * d_k], instead
  // of [batch, time, heads * d_k]; a packed side needs no padding flags.
  std::shared_ptr<const PackedSequences> packed_queries, packed_keys;
};

}  // namespace tfm::ops
