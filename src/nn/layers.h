#pragma once
// Basic layers: Linear, Embedding (x sqrt(d_model)), LayerNorm (or RMS norm), PositionalEncoding.
#include <vector>

#include "nn/lora.h"
#include "nn/module.h"
#include "ops/kernels.h"  // SinusoidLayout

namespace tfm::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;  // [..., in] -> [..., out]
  // relu(forward(x)) as one op (ops::linear_relu); while a trace records outputs,
  // as two, so that forward's own output is there to compare.
  Tensor forward_relu(const Tensor& x) const;
  Tensor weight;                          // [out, in]
  Tensor bias;                            // [out] (undefined without bias)
  // LoRA adapters of the output (one block, or the gated block's gate and up; attached by
  // models::LoraAdapter, whose parameters they are); empty: none.
  LoraBlocks lora;
};

// Token embedding, scaled by sqrt(d_model) as in the paper (section 3.4) unless
// told not to (GPT, BERT and learned position tables are not scaled).
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t d_model, bool scale_by_sqrt_d = true);
  // Over an existing [vocab, d_model] matrix: a table tied to another module's.
  explicit Embedding(Tensor weight, bool scale_by_sqrt_d = true);
  // ids: [batch, len] token ids -> [batch, len, d_model]
  Tensor forward(const Tensor& ids) const;  // [batch, len] i32 -> [batch, len, d_model]
  Tensor weight;  // [vocab, d_model]

 private:
  bool scale_;
};

// Layer norm over the last dimension, or where `rms` RMS norm (Llama's LlamaRMSNorm: no
// centring and no bias), which takes its place wherever a stack has a norm.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t d, float eps = 1e-5f, bool rms = false);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // [d]; bias undefined in RMS norm
  float eps;
};

// Adds the sinusoidal position table, then applies dropout (no parameters). The table's
// columns are interleaved sin/cos (the paper's) or `split`: sines, then cosines (Marian's).
class PositionalEncoding : public Module {
 public:
  // The table's columns as `layout` says, row p holding position first + p (ops::sinusoids).
  PositionalEncoding(int64_t d_model, float dropout, int64_t max_len, ops::SinusoidLayout layout = ops::SinusoidLayout::interleaved,
                     int64_t first = 0);
  // The table of `other` (shared, not computed again: an encoder-decoder's two are the
  // same, and each took 5% of `tfm translate`'s start), with a dropout of its own.
  PositionalEncoding(const PositionalEncoding& other, float dropout);
  Tensor forward(const Tensor& x, int64_t start = 0) const;  // x: [batch, len, d_model], positions start..start+len
  Tensor forward(const Tensor& x, const Tensor& positions) const;  // each row's own: positions i32 [batch, len]
  int64_t max_len() const { return table_.size(0); }

 private:
  Tensor table_;  // [max_len, d_model]
  float dropout_;
};

}  // namespace tfm::nn
