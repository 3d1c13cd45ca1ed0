#pragma once
// Walking tensors of any strides (views, broadcasting), and the copy and sum that
// Tensor::copy_from and autograd's gradient accumulation make with it.
#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace tfm {

// Strides of `in` aligned to `out_shape` (right-aligned, as in NumPy broadcasting);
// broadcast dimensions get stride 0.
Shape broadcast_strides(const Shape& in_shape, const Shape& in_strides, const Shape& out_shape);

// Calls f(offsets) for every index of `shape` in row-major order, where offsets[k]
// is the element offset into operand k given its strides (each aligned to shape).
template <size_t K, class F>
void for_each_index(const Shape& shape, const std::array<Shape, K>& strides, F&& f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (shape_numel(shape) == 0) return;
  std::array<int64_t, K> off{};
  std::vector<int64_t> idx(nd, 0);
  while (true) {
    f(off);
    int64_t d = nd - 1;
    for (; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (idx[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// dst = src and dst += src, element by element (same shape, any strides). Not differentiable.
void strided_copy(const Tensor& src, Tensor& dst);
void strided_add(const Tensor& src, Tensor& dst);
// a + b (same shape, any strides) as a new contiguous tensor, in one pass where both are
// contiguous. Not differentiable.
Tensor strided_sum(const Tensor& a, const Tensor& b);

}  // namespace tfm
