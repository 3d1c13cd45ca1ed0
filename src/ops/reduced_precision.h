#pragma once
// Opt-in reduced precision for the linear layers' matrix products (ops::linear).
//
//   f32   the default: single precision throughout.
//   bf16  inputs rounded to bfloat16 (8 bits of mantissa), products accumulated in
//         single precision; forward and backward, so for training and inference.
//         On CPUs with AVX-512 BF16 the products run at twice the f32 rate.
//   int8  inference only, as CTranslate2 does it: weights quantised per output row,
//         activations per input row at run time, both symmetric to [-127, 127];
//         exact int32 products, rescaled to single precision.
//
// Everything else (attention scores, softmax, layer norm, the loss, optimiser
// state, checkpoints) stays in single precision.
#include <cstdint>
#include <string>

#include "ops/gemm.h"

namespace tfm::ops {

enum class Precision { f32, bf16, int8 };

// "f32", "bf16" or "int8"; anything else is a clear error.
Precision parse_precision(const std::string& name);
std::string to_string(Precision p);

// The precision ops::linear uses from now on, in this process.
void set_linear_precision(Precision p);
Precision linear_precision();

// Round to nearest even, as PyTorch's float -> bfloat16 conversion; NaN stays NaN.
bf16 to_bf16(float x);
float from_bf16(bf16 x);
void to_bf16(const float* x, int64_t n, bf16* out);

// While a FrozenWeights lives, the weights the linear layers see (contiguous tensors:
// parameters or views of them) are taken not to change: their bf16 or int8 copies,
// or in f32 their packed copies (ops/gemm.h), are made on first use and kept (keyed
// by address and shape), instead of being converted at every product. Translation and generation hold one; training, whose weights change
// every step, must not.
class FrozenWeights {
 public:
  FrozenWeights();
  ~FrozenWeights();
  FrozenWeights(const FrozenWeights&) = delete;
  FrozenWeights& operator=(const FrozenWeights&) = delete;
  // How many converted copies are held (one per weight used, in the current precision's form).
  size_t copies() const;
};

// The linear layers' products (ops::linear, ops::linear_cross_entropy) in the current
// precision: y[rows, out] = x[rows, in] w[out, in]^T (+ bias[out] where given), with
// `relu` then max(y, 0). In f32 while a FrozenWeights lives, through w's packed copy
// (ops/gemm.h), whose kernels apply the ReLU as they write y.
void linear_product(const float* x, int64_t rows, int64_t in, const float* w, int64_t out, const float* bias, float* y,
                    bool relu = false);

// Their backward in the precision of the forward pass (int8 is refused):
// dx[rows, in] = g w and dw[out, in] = g^T x + dw_beta * dw, g: [rows, out].
void linear_product_backward(Precision precision, const float* g, const float* x, const float* w, int64_t rows, int64_t in,
                             int64_t out, float* dx, float* dw, float dw_beta);

}  // namespace tfm::ops
