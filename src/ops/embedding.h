#pragma once
// Embedding lookup: rows of a [vocab, dim] table gathered by token id.
#include <vector>

#include "tensor/tensor.h"

namespace tfm::ops {

// ids has shape `ids_shape`; the result has shape ids_shape + [dim].
Tensor embedding(const Tensor& weight, const std::vector<int>& ids, const Shape& ids_shape);

}  // namespace tfm::ops
