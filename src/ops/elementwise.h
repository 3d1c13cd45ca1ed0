#pragma once
// Element-wise ops with NumPy-style broadcasting, activations and dropout.
#include <cstdint>

#include "ops/attention_mask.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace tfm::ops {

Tensor add(const Tensor& a, const Tensor& b);  // broadcasting
Tensor mul(const Tensor& a, const Tensor& b);  // broadcasting
Tensor scale(const Tensor& x, float s);        // x * s
Tensor relu(const Tensor& x);
// relu's backward from its output, no autograd: grad where output > 0, else 0.
Tensor relu_backward(const Tensor& grad, const Tensor& output);
Tensor gelu(const Tensor& x);       // exact (erf) form, as torch.nn.functional.gelu
Tensor gelu_tanh(const Tensor& x);  // the tanh approximation: gelu(x, approximate="tanh"), GPT-2's gelu_new
Tensor silu(const Tensor& x);       // x * sigmoid(x) (Marian's "swish")
Tensor tanh(const Tensor& x);

// Inverted dropout: zeroes each element with probability p and scales survivors
// by 1/(1-p); identity when p == 0. `key` names the random stream and the first sample
// (tensor/rng.h); the samples are x's rows (x.size(0)), or with `packed` the sequences
// packed one after another in x [1, tokens, features].
using PackedRows = std::shared_ptr<const PackedSequences>;
Tensor dropout(const Tensor& x, float p, DropoutKey key, const PackedRows& packed = {});

// dropout(relu(x), p, key), identical results, in one pass that keeps only its
// output for backward (out > 0 exactly where x > 0 and the element was kept), where
// the two ops would keep both relu's output and dropout's.
Tensor relu_dropout(const Tensor& x, float p, DropoutKey key, const PackedRows& packed = {});

// Sums `g` over broadcast dimensions so that it has `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

// dst *= s in place (contiguous dst); not differentiable (gradients, optimiser state).
void scale_(Tensor& dst, float s);

}  // namespace tfm::ops
