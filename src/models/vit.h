#pragma once
// Vision Transformer (Dosovitskiy et al., 2020): the image cut into P x P patches,
// each projected linearly (a Conv2d with kernel and stride P), a learnable [CLS]
// token in front, learned position embeddings, a pre-norm GELU encoder, and a
// linear classifier on the final [CLS] vector. Parameter names match the PyTorch
// module in tests/reference/model.py:
//   patch_embed.{weight [d, C, P, P], bias}, cls_token [1, 1, d], pos_embed [1, patches + 1, d],
//   encoder.layers.N.{self_attn, linear1, linear2, norm1, norm2}, encoder.norm, head.{weight, bias}
// Hugging Face's variants add: a base without the classifier (ViTModel, classes 0), its
// pooler (pooler.{weight, bias}: dense + tanh on the final [CLS]), and DeiT's distillation
// token (dist_token [1, 1, d], after [CLS]; pos_embed [1, patches + 2, d]) with its own
// classifier (dist_head.{weight, bias}).
#include <memory>

#include "models/stack_config.h"
#include "nn/transformer.h"
#include "tensor/rng.h"

namespace tfm::models {


// Attention of [CLS] to each patch, averaged over heads, from one layer's attention
// probabilities [batch, heads, tokens, tokens] whose first `specials` tokens are not patches
// ([CLS], DeiT's distillation token): [batch, patches].
Tensor cls_attention(const Tensor& weights, int64_t specials = 1);

class ViT : public nn::Module {
 public:
  explicit ViT(const StackConfig& config);

  // images [batch, C, H, W] (normalised pixels) -> class logits [batch, classes];
  // `maps`, where given, receives each layer's attention probabilities. DeiT's two
  // classifiers are averaged, as transformers does at inference.
  Tensor forward(const Tensor& images, nn::AttentionMaps* maps = nullptr);
  // The final hidden states after the last LayerNorm [batch, tokens, d]: [CLS] first
  // (Hugging Face's last_hidden_state).
  Tensor hidden_states(const Tensor& images, nn::AttentionMaps* maps = nullptr);
  // The pooler's output from hidden_states' [CLS] [batch, d] (Hugging Face's pooler_output).
  Tensor pooled(const Tensor& hidden);
  bool has_classifier() const { return head != nullptr; }

  // Xavier-uniform matrices (the patch projection as a Conv2d), N(0, 0.02) for
  // [CLS] and positions, zero biases.
  void init_parameters(Rng& rng);
  const StackConfig& config() const { return config_; }

  Tensor patch_weight, patch_bias, cls_token, dist_token, pos_embed;  // dist_token: distilled only
  std::shared_ptr<nn::Encoder> encoder;
  std::shared_ptr<nn::Linear> head, dist_head, pooler;  // each null where the configuration has none

 private:
  StackConfig config_;
};

}  // namespace tfm::models
