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
#include <memory>
#include <string>

#include "ops/gemm.h"

namespace tfm::ops {

enum class Precision { f32, bf16, int8 };

// "f32", "bf16" or "int8"; anything else is a clear error.
Precision parse_precision(const std::string& name);
std::string to_string(Precision p);

// Round to nearest even, as PyTorch's float -> bfloat16 conversion; NaN stays NaN.
bf16 to_bf16(float x);
float from_bf16(bf16 x);
void to_bf16(const float* x, int64_t n, bf16* out);

struct FrozenCopies;

// How one model's linear layers compute their products (ops::linear,
// ops::linear_cross_entropy): the precision, and, once frozen, the converted copies of
// the weights they see (contiguous tensors: parameters or views of them), bf16 or int8,
// or in f32 their packed layout (ops/gemm.h), made on first use and kept (keyed by
// address and shape) instead of being converted at every product. Each model owns one
// (nn::Module::products()), so models of different precisions live side by side in one
// process; translation workers share one model's copies.
class LinearProducts {
 public:
  explicit LinearProducts(Precision precision = Precision::f32);
  ~LinearProducts();
  LinearProducts(const LinearProducts&) = delete;
  LinearProducts& operator=(const LinearProducts&) = delete;

  // f32 and never frozen: for products outside a model (tests, tools).
  static const LinearProducts& f32();

  Precision precision() const { return precision_; }
  void set_precision(Precision p);  // drops the copies made so far
  // The weights will not change from now on (inference): keep their converted copies.
  // Training, whose weights change every step, must not freeze.
  void freeze();
  bool frozen() const { return frozen_ != nullptr; }
  // How many converted copies are held (one per weight used, in the precision's form).
  size_t copies() const;

  // y[rows, out] = x[rows, in] w[out, in]^T (+ bias[out] where given), with `relu`
  // then max(y, 0). Frozen f32 weights go through their packed copy, whose kernels
  // apply the ReLU as they write y.
  void forward(const float* x, int64_t rows, int64_t in, const float* w, int64_t out, const float* bias, float* y,
               bool relu = false) const;

 private:
  Precision precision_;
  std::unique_ptr<FrozenCopies> frozen_;  // null until freeze()
};

// Their backward in the precision of the forward pass (int8 is refused):
// dx[rows, in] = g w and dw[out, in] = g^T x + dw_beta * dw, g: [rows, out].
void linear_product_backward(Precision precision, const float* g, const float* x, const float* w, int64_t rows, int64_t in,
                             int64_t out, float* dx, float* dw, float dw_beta);

}  // namespace tfm::ops
