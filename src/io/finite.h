#pragma once
// Whether a tensor's values are finite: the checkpoint readers refuse NaN and infinity
// in weights, which no trained model holds and which would poison every output.
#include "tensor/tensor.h"

namespace tfm::io {

// True for a floating-point tensor (f32, f16, bf16) without NaN or infinity, and for any
// tensor of another dtype.
bool all_finite(const Tensor& t);

}  // namespace tfm::io
