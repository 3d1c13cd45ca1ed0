#pragma once
// Parameter initialisation (as torch.nn.init), drawing from a seeded generator.
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace tfm::nn::init {

void uniform_(Tensor& t, float lo, float hi, Rng& rng);
void normal_(Tensor& t, float std, Rng& rng);  // N(0, std^2)
// Glorot/Xavier uniform over a [fan_out, fan_in, ...] weight.
void xavier_uniform_(Tensor& t, Rng& rng);

}  // namespace tfm::nn::init
