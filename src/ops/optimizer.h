#pragma once
// Optimiser kernels: updates of parameters in place from their gradients, no autograd.
#include "tensor/tensor.h"

namespace tfm::ops {

// One Adam step's settings for a parameter (torch.optim.Adam's update order).
struct AdamUpdate {
  float beta1, beta2, eps;
  float step_size;  // lr / (1 - beta1^step)
  float bc2_sqrt;   // sqrt(1 - beta2^step)
  float l2;         // weight decay added to the gradient (Adam), or 0
  float shrink;     // 1 - lr * weight_decay, applied to the parameter first (AdamW), or 1
};

// param, exp_avg and exp_avg_sq updated in place from grad (all contiguous, one shape).
void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u);

}  // namespace tfm::ops
