#pragma once
// Optimiser kernels: updates of parameters in place from their gradients, no autograd.
#include "ops/kernels.h"  // AdamUpdate
#include "tensor/tensor.h"

namespace tfm::ops {

// param, exp_avg and exp_avg_sq updated in place from grad (all contiguous, one shape).
void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u);

}  // namespace tfm::ops
