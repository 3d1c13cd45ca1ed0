#pragma once
// Vision Transformer (Dosovitskiy et al., 2020): the image cut into P x P patches,
// each projected linearly (a Conv2d with kernel and stride P), a learnable [CLS]
// token in front, learned position embeddings, a pre-norm GELU encoder, and a
// linear classifier on the final [CLS] vector. Parameter names match the PyTorch
// module in tests/reference/model.py:
//   patch_embed.{weight [d, C, P, P], bias}, cls_token [1, 1, d], pos_embed [1, patches + 1, d],
//   encoder.layers.N.{self_attn, linear1, linear2, norm1, norm2}, encoder.norm, head.{weight, bias}
#include <memory>

#include "models/stack_config.h"
#include "nn/transformer.h"
#include "tensor/rng.h"

namespace tfm::models {


// Attention of [CLS] to each patch, averaged over heads, from one layer's attention
// probabilities [batch, heads, patches + 1, patches + 1]: [batch, patches].
Tensor cls_attention(const Tensor& weights);

class ViT : public nn::Module {
 public:
  explicit ViT(const StackConfig& config);

  // images [batch, C, H, W] (normalised pixels) -> class logits [batch, classes];
  // `maps`, where given, receives each layer's attention probabilities.
  Tensor forward(const Tensor& images, nn::AttentionMaps* maps = nullptr);

  // Xavier-uniform matrices (the patch projection as a Conv2d), N(0, 0.02) for
  // [CLS] and positions, zero biases.
  void init_parameters(Rng& rng);
  const StackConfig& config() const { return config_; }

  Tensor patch_weight, patch_bias, cls_token, pos_embed;
  std::shared_ptr<nn::Encoder> encoder;
  std::shared_ptr<nn::Linear> head;

 private:
  StackConfig config_;
};

}  // namespace tfm::models
