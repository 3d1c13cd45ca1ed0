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
  pos_embed = Tensor::zeros({1, c.patches() + 1, D});
  register_parameter("pos_embed", pos_embed);
  encoder = register_module("encoder", std::make_shared<nn::Encoder>(c.layer_options(), c.layers));
  head = register_module("head", std::make_shared<nn::Linear>(D, c.classes));
}

Tensor ViT::forward(const Tensor& images, nn::AttentionMaps* maps) {
  const StackConfig& c = config_;
  TFM_CHECK(images.dim() == 4 && images.size(1) == c.channels && images.size(2) == c.image_size && images.size(3) == c.image_size,
            "ViT: expected images [batch, " << c.channels << ", " << c.image_size << ", " << c.image_size << "], got "
                                             << shape_str(images.shape()));
  const int64_t B = images.size(0), D = c.d_model;
  Tensor w = ops::reshape(patch_weight, {D, c.channels * c.patch * c.patch});            // the Conv2d as a matrix
  const Tensor pixels = ops::to(images, device());  // images made on the host come to the model
  Tensor patches = ops::linear(ops::patchify(pixels, c.patch), w, patch_bias, products());           // [batch, patches, d]
  Tensor cls = ops::add(Tensor::zeros({B, 1, D}, device()), cls_token);                       // [batch, 1, d]
  Tensor x = ops::add(ops::concat({cls, patches}, 1), pos_embed);                   // [batch, patches + 1, d]
  x = encoder->forward(dropout(x, c.dropout), ops::AttentionMask{}, nullptr, maps);
  return head->forward(ops::reshape(ops::slice(x, 1, 0, 1), {B, D}));                           // [batch, classes]
}

Tensor cls_attention(const Tensor& w) {  // w: [batch, heads, patches + 1, patches + 1]
  const int64_t B = w.size(0), heads = w.size(1), n = w.size(3) - 1;
  Tensor out = Tensor::zeros({B, n});
  const Tensor ww = ops::contiguous(ops::to(w, Device::CPU));  // a map for people: on the host
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float* row = ww.data() + ((b * heads + h) * (n + 1)) * (n + 1);  // query 0 = [CLS]
      for (int64_t j = 0; j < n; ++j) out.data()[b * n + j] += row[j + 1] / static_cast<float>(heads);
    }
  return out;
}

void ViT::init_parameters(Rng& rng) {
  for (auto& [name, p] : named_parameters()) {
    if (name == "cls_token" || name == "pos_embed") ops::normal_(p, 0.02f, rng);
    else if (p.dim() > 1) nn::init::xavier_uniform_(p, rng);
  }
}

}  // namespace tfm::models
