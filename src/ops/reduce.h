#pragma once
// Reductions to a scalar.
#include "tensor/tensor.h"

namespace tfm::ops {

Tensor sum(const Tensor& x);   // shape [] (a scalar)
Tensor mean(const Tensor& x);  // shape []

// Sum of squares of all elements, in double, in a thread-count-independent order.
double sum_of_squares(const Tensor& x);

}  // namespace tfm::ops
