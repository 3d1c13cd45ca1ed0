#pragma once
// What attention may see: padded keys, the look-ahead mask, packed sequences.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
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
  PackedSequences() = default;
  PackedSequences(std::vector<int64_t> starts, std::vector<int64_t> lengths) : start(std::move(starts)), length(std::move(lengths)) {}
  int64_t batch() const { return static_cast<int64_t>(start.size()); }
  int64_t longest() const { return length.empty() ? 0 : *std::max_element(length.begin(), length.end()); }

  // start and length as one i64 tensor [2, batch] on `device`, for its kernels: made by
  // the first call there and kept, since a forward's and backward's every attention and
  // dropout share one packing (on the GPU each copy from the host waited for the queued
  // work: about 70 waits a step of the base Transformer, now one).
  const Tensor& on(Device device) const {
    const std::lock_guard<std::mutex> lock(copy_mutex_);
    if (!copy_.defined() || copy_.device() != device) {
      std::vector<int64_t> both(start);
      both.insert(both.end(), length.begin(), length.end());
      const Tensor host = Tensor::from_values<int64_t>({2, batch()}, both);
      copy_ = Tensor::empty(host.shape(), DType::i64, device);
      copy_.copy_from(host);
    }
    return copy_;
  }

 private:
  mutable std::mutex copy_mutex_;
  mutable Tensor copy_;
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
