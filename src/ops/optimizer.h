#pragma once
// Optimiser kernels: updates of parameters and gradients in place, no autograd.
#include <vector>

#include "ops/kernels.h"  // AdamUpdate, AdamTensors
#include "tensor/tensor.h"

namespace tfm::ops {

// x *= min(1, max_norm / (sqrt(squares) + 1e-6)) for x contiguous and squares [2] (a sum
// of squares as ops::sum_of_squares gives it, on x's device, not read on the host):
// torch.nn.utils.clip_grad_norm_'s scaling.
void clip_to_norm(Tensor& x, const Tensor& squares, float max_norm);

// One Adam step of every parameter listed (each one's tensors contiguous, of one shape,
// on one device), in one pass.
void adam_update(const std::vector<AdamTensors>& params, const AdamUpdate& u);

}  // namespace tfm::ops
