#pragma once
// Reductions to a scalar, which stays on the input's device (item() reads it).
#include "tensor/tensor.h"

namespace tfm::ops {

Tensor sum(const Tensor& x);   // shape [] (a scalar)
Tensor mean(const Tensor& x);  // shape []

// Sum of squares of all elements (not differentiable), in double in a thread-count-
// independent order, as two floats [2]: its float rounding, and the rest (their sum in
// double keeps 48 bits: a gradient norm's clipping coefficient as exact as in double).
Tensor sum_of_squares(const Tensor& x);

}  // namespace tfm::ops
