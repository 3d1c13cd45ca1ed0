#pragma once
// Differentiable shape ops. Views share storage; their backward rules reshape,
// permute or scatter the gradient back to the input's shape.
#include <vector>

#include "tensor/tensor.h"

namespace tfm::ops {

Tensor contiguous(const Tensor& x);
Tensor reshape(const Tensor& x, Shape shape);  // view if x is contiguous, else copy; one dim may be -1
Tensor transpose(const Tensor& x, int64_t a, int64_t b);
Tensor permute(const Tensor& x, const std::vector<int64_t>& order);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end);  // [start, end) along dim
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

// images [batch, C, H, W] -> patches [batch, (H/P)*(W/P), C*P*P], patches in row-major
// order, each flattened as (channel, row, column) like a Conv2d weight. The pixels are
// inputs, so this is a plain copy without a backward.
Tensor patchify(const Tensor& images, int64_t patch);

// Rows of x along dim 0 in the order of `rows` (i64 [n]): out[i] = x[rows[i]] (beam search's
// reordering of decoding state; training's packing of sentences without padding).
// Any dtype; gradients flow for f32.
Tensor gather_rows(const Tensor& x, const Tensor& rows);

// bool: where the i32 tensor x equals `value` (padding masks from token ids).
Tensor equal(const Tensor& x, int64_t value);

}  // namespace tfm::ops
