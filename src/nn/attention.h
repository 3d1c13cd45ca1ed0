#pragma once
// Multi-head attention (paper section 3.2.2) with PyTorch's nn.MultiheadAttention
// parameter layout: one packed in_proj for Q, K and V, and out_proj.
#include <memory>

#include "nn/layers.h"
#include "ops/attention.h"

namespace tfm::nn {

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t heads, float dropout);

  // query: [batch, tq, d_model], key/value: [batch, tk, d_model] -> [batch, tq, d_model].
  // Pass the same tensor as query, key and value for self-attention, and the same
  // tensor as key and value for encoder-decoder attention: projections are fused then.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const ops::AttentionMask& mask);

  // Attention probabilities of the last forward: [batch, heads, tq, tk].
  const Tensor& attention_weights() const { return weights_; }
  int64_t heads() const { return heads_; }

  Tensor in_proj_weight;  // [3 * d_model, d_model]: rows of W_q, W_k, W_v
  Tensor in_proj_bias;    // [3 * d_model]
  std::shared_ptr<Linear> out_proj;

 private:
  int64_t d_model_, heads_;
  float dropout_;
  Tensor weights_;
};

}  // namespace tfm::nn
