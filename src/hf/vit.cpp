// ViT (ViTForImageClassification): a Conv2d patch embedding, [CLS], learned positions,
// a pre-norm encoder with exact GELU, the final LayerNorm and a classifier on [CLS].
#include "hf/families.h"

namespace tfm::hf {

models::StackConfig vit_config(const Directory& d) {
  require(d, "qkv_bias", true, true);
  models::StackConfig c;
  c.family = "vit";
  c.image_size = setting<int64_t>(d, "image_size", 224);
  c.channels = setting<int64_t>(d, "num_channels", 3);
  c.patch = setting<int64_t>(d, "patch_size", 16);
  const auto labels = d.config.find("id2label");
  c.classes = labels != d.config.end() && labels->is_object() ? static_cast<int64_t>(labels->size()) : setting<int64_t>(d, "num_labels", 2);
  c.d_model = setting<int64_t>(d, "hidden_size", 768);
  c.heads = setting<int64_t>(d, "num_attention_heads", 12);
  c.d_ff = setting<int64_t>(d, "intermediate_size", 3072);
  c.layers = setting<int64_t>(d, "num_hidden_layers", 12);
  c.dropout = setting<float>(d, "hidden_dropout_prob", 0.0f);
  c.activation = nn::parse_activation(activation(d, "hidden_act", "gelu"));
  c.norm_eps = setting<float>(d, "layer_norm_eps", 1e-12f);
  c.norm_first = true;
  with_hf_names(d, {{"d_model", "hidden_size"}, {"heads", "num_attention_heads"}, {"d_ff", "intermediate_size"},
                    {"layers", "num_hidden_layers"}, {"patch", "patch_size"}, {"channels", "num_channels"}, {"classes", "num_labels"},
                    {"norm_eps", "layer_norm_eps"}, {"dropout", "hidden_dropout_prob"}},
                [&] { c = c.validated(d.file("config.json")); });
  return c;
}

std::vector<TensorRule> vit_rules(const models::StackConfig& c) {
  std::vector<TensorRule> r = {{"cls_token", {"vit.embeddings.cls_token"}}, {"pos_embed", {"vit.embeddings.position_embeddings"}}};
  add_weight_and_bias(r, "patch_embed", "vit.embeddings.patch_embeddings.projection");
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string tfm = "encoder.layers." + std::to_string(i), hf = "vit.encoder.layer." + std::to_string(i);
    add_bert_style_layer(r, tfm, hf, ".attention.attention", ".layernorm_before", ".layernorm_after");  // pre-norm
  }
  add_weight_and_bias(r, "encoder.norm", "vit.layernorm");
  add_weight_and_bias(r, "head", "classifier");
  return r;
}

// ViTModel's pooler, which classification does not use.
bool vit_ignored(const std::string& name) { return name.starts_with("vit.pooler."); }

}  // namespace tfm::hf
