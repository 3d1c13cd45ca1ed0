#pragma once
// Parameter initialisation (as torch.nn.init), drawing from a seeded generator; the
// plain distributions are ops (ops/random.h: ops::uniform_, ops::normal_).
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace tfm::nn::init {

// Glorot/Xavier uniform over a [fan_out, fan_in, ...] weight.
void xavier_uniform_(Tensor& t, Rng& rng);

}  // namespace tfm::nn::init
