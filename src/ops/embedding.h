#pragma once
// Embedding lookup: rows of a [vocab, dim] table gathered by token id.
#include "tensor/tensor.h"

namespace tfm::ops {

// ids: token ids (i32) of any shape; the result has shape ids.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& ids);

// [end - start] i32: start, start + 1, ..., end - 1 (positions, for embedding tables).
Tensor arange(int64_t start, int64_t end, Device device = Device::CPU);

}  // namespace tfm::ops
