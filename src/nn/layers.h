#pragma once
// Basic layers: Linear, Embedding (x sqrt(d_model)), LayerNorm (or RMS norm), PositionalEncoding.
#include <memory>
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
  Tensor weight;                          // [out, in], read by the products alone (Module::ReadBy)
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

// How a stack's positions enter (PositionalEncoding): the sinusoids' columns and first
// position (ops::sinusoids), or `learned`, a trained table of max_len + first rows with
// position p at row first + p (mBART's MBartLearnedPositionalEmbedding, first 2); and
// `norm`, a LayerNorm of the sum before dropout (mBART's layernorm_embedding).
struct PositionOptions {
  ops::SinusoidLayout layout = ops::SinusoidLayout::interleaved;
  int64_t first = 0;
  bool learned = false, norm = false;
  float norm_eps = 1e-5f;
};

// Adds the position table (sinusoids, without parameters, or a learned one, `weight`),
// then normalises where told to (`norm`), then applies dropout. The sinusoids' columns are
// interleaved sin/cos (the paper's) or `split`: sines, then cosines (Marian's).
class PositionalEncoding : public Module {
 public:
  PositionalEncoding(int64_t d_model, float dropout, int64_t max_len, const PositionOptions& options = {});
  // Another stack's positions, with a dropout of its own: a sinusoid table is shared, not
  // computed again (an encoder-decoder's two are the same, and each took 5% of `tfm
  // translate`'s start); a learned one, and the norm, are the stack's own.
  PositionalEncoding(const PositionalEncoding& other, float dropout);
  Tensor forward(const Tensor& x, int64_t start = 0) const;  // x: [batch, len, d_model], positions start..start+len
  Tensor forward(const Tensor& x, const Tensor& positions) const;  // each row's own: positions i32 [batch, len]
  int64_t max_len() const { return table_.size(0) - offset_; }

 private:
  PositionalEncoding(Tensor table, const PositionOptions& options, float dropout);
  Tensor finish(const Tensor& sum) const;  // the norm, where there is one, then dropout
  PositionOptions options_;
  Tensor table_;        // [max_len (+ first, learned), d_model]
  int64_t offset_ = 0;  // the row of position 0: first for a learned table (a sinusoid table starts at first)
  std::shared_ptr<LayerNorm> norm_;
  float dropout_;
};

}  // namespace tfm::nn
