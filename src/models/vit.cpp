#include "models/vit.h"

#include "nn/init.h"
#include "ops/convert.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::models {

ViT::ViT(const StackConfig& c) : config_(c) {
  c.validate("model configuration");
  TFM_CHECK(c.family == "vit", "model configuration: family '" << c.family << "' is not vit");
  const int64_t D = c.d_model;
  patch_weight = Tensor::zeros({D, c.channels, c.patch, c.patch});
  register_parameter("patch_embed.weight", patch_weight);
  patch_bias = Tensor::zeros({D});
  register_parameter("patch_embed.bias", patch_bias);
  cls_token = Tensor::zeros({1, 1, D});
  register_parameter("cls_token", cls_token);
  if (c.distilled) {
    dist_token = Tensor::zeros({1, 1, D});
    register_parameter("dist_token", dist_token);
  }
  pos_embed = Tensor::zeros({1, c.vit_tokens(), D});
  register_parameter("pos_embed", pos_embed);
  encoder = register_module("encoder", std::make_shared<nn::Encoder>(c.layer_options(), c.layers));
  if (c.classes > 0) head = register_module("head", std::make_shared<nn::Linear>(D, c.classes));
  if (c.distill_head) dist_head = register_module("dist_head", std::make_shared<nn::Linear>(D, c.classes));
  if (c.pooler) pooler = register_module("pooler", std::make_shared<nn::Linear>(D, D));
}

namespace {

// Token `i` of every sequence of x [batch, tokens, d]: [batch, d].
Tensor token(const Tensor& x, int64_t i) { return ops::reshape(ops::slice(x, 1, i, i + 1), {x.size(0), x.size(2)}); }

}  // namespace

Tensor ViT::hidden_states(const Tensor& images, nn::AttentionMaps* maps) {
  const StackConfig& c = config_;
  TFM_CHECK(images.dim() == 4 && images.size(1) == c.channels && images.size(2) == c.image_size && images.size(3) == c.image_size,
            "ViT: expected images [batch, " << c.channels << ", " << c.image_size << ", " << c.image_size << "], got "
                                             << shape_str(images.shape()));
  const int64_t B = images.size(0), D = c.d_model;
  Tensor w = ops::reshape(patch_weight, {D, c.channels * c.patch * c.patch});            // the Conv2d as a matrix
  const Tensor pixels = ops::to(images, device());  // images made on the host come to the model
  Tensor patches = ops::linear(ops::patchify(pixels, c.patch), w, patch_bias, products());           // [batch, patches, d]
  std::vector<Tensor> tokens = {ops::add(Tensor::zeros({B, 1, D}, device()), cls_token)};  // [batch, 1, d]
  if (c.distilled) tokens.push_back(ops::add(Tensor::zeros({B, 1, D}, device()), dist_token));
  tokens.push_back(patches);
  Tensor x = ops::add(ops::concat(tokens, 1), pos_embed);  // [batch, tokens, d]
  return encoder->forward(dropout(x, c.dropout), ops::AttentionMask{}, nullptr, maps);
}

Tensor ViT::forward(const Tensor& images, nn::AttentionMaps* maps) {
  TFM_CHECK(head, "ViT: this model is a base without a classifier (fine-tune one first: tfm vit train --init-from MODEL --data DIR)");
  const Tensor x = hidden_states(images, maps);
  const Tensor logits = head->forward(token(x, 0));  // [batch, classes]
  if (!dist_head) return logits;
  return ops::scale(ops::add(logits, dist_head->forward(token(x, 1))), 0.5f);  // DeiT: the mean of the two heads
}

Tensor ViT::pooled(const Tensor& hidden) {
  TFM_CHECK(pooler, "ViT: this model has no pooler (its [CLS] state is its image vector)");
  return ops::tanh(pooler->forward(token(hidden, 0)));
}

Tensor cls_attention(const Tensor& w, int64_t specials) {  // w: [batch, heads, tokens, tokens]
  const int64_t B = w.size(0), heads = w.size(1), T = w.size(3), n = T - specials;
  Tensor out = Tensor::zeros({B, n});
  const Tensor ww = ops::contiguous(ops::to(w, Device::CPU));  // a map for people: on the host
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float* row = ww.data() + ((b * heads + h) * T) * T;  // query 0 = [CLS]
      for (int64_t j = 0; j < n; ++j) out.data()[b * n + j] += row[j + specials] / static_cast<float>(heads);
    }
  return out;
}

void ViT::init_parameters(Rng& rng) {
  for (auto& [name, p] : named_parameters()) {
    if (name == "cls_token" || name == "dist_token" || name == "pos_embed") ops::normal_(p, 0.02f, rng);
    else if (p.dim() > 1) nn::init::xavier_uniform_(p, rng);
  }
}

}  // namespace tfm::models
