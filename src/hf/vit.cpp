// ViT and DeiT: a Conv2d patch embedding, [CLS] (and DeiT's distillation token after it),
// learned positions, a pre-norm encoder with exact GELU and the final LayerNorm. Then, as
// the checkpoint's class was saved: a classifier on [CLS] (ViTForImageClassification,
// DeiTForImageClassification), DeiT's two classifiers, on [CLS] and on the distillation
// token (DeiTForImageClassificationWithTeacher), or none and the pooler (ViTModel, DeiTModel:
// the base a fine-tune starts from).
#include "hf/families.h"

namespace tfm::hf {

namespace {

// What the stored tensors say of the model's heads: transformers saves only what its class has.
void read_heads(models::StackConfig& c, const Directory& d, const io::NamedTensors& weights, const std::string& prefix) {
  const bool teacher = has_tensor(weights, "cls_classifier.weight");  // DeiTForImageClassificationWithTeacher
  c.distill_head = teacher;
  c.pooler = has_tensor(weights, prefix + "pooler.dense.weight");
  if (!teacher && !has_tensor(weights, "classifier.weight")) {
    c.classes = 0;  // a base (ViTModel, DeiTModel)
    return;
  }
  const auto labels = d.config.find("id2label");
  c.classes = labels != d.config.end() && labels->is_object() ? static_cast<int64_t>(labels->size()) : setting<int64_t>(d, "num_labels", 2);
}

}  // namespace

std::string vit_prefix(const Directory& d, const io::NamedTensors& weights) {
  const std::string p = d.model_type + ".";  // "vit." or "deit." as the task models save; "" as the bases do
  return has_tensor(weights, p + "embeddings.cls_token") ? p : "";
}

models::StackConfig vit_config(const Directory& d, const io::NamedTensors& weights) {
  require(d, "qkv_bias", true, true);
  models::StackConfig c;
  c.family = "vit";
  c.image_size = setting<int64_t>(d, "image_size", 224);
  c.channels = setting<int64_t>(d, "num_channels", 3);
  c.patch = setting<int64_t>(d, "patch_size", 16);
  c.d_model = setting<int64_t>(d, "hidden_size", 768);
  c.heads = setting<int64_t>(d, "num_attention_heads", 12);
  c.d_ff = setting<int64_t>(d, "intermediate_size", 3072);
  c.layers = setting<int64_t>(d, "num_hidden_layers", 12);
  c.dropout = setting<float>(d, "hidden_dropout_prob", 0.0f);
  c.activation = nn::parse_activation(activation(d, "hidden_act", "gelu"));
  c.norm_eps = setting<float>(d, "layer_norm_eps", 1e-12f);
  c.norm_first = true;
  c.distilled = d.model_type == "deit";
  read_heads(c, d, weights, vit_prefix(d, weights));
  with_hf_names(d, {{"d_model", "hidden_size"}, {"heads", "num_attention_heads"}, {"d_ff", "intermediate_size"},
                    {"layers", "num_hidden_layers"}, {"patch", "patch_size"}, {"channels", "num_channels"}, {"classes", "num_labels"},
                    {"norm_eps", "layer_norm_eps"}, {"dropout", "hidden_dropout_prob"}},
                [&] { c = c.validated(d.file("config.json")); });
  return c;
}

std::vector<TensorRule> vit_rules(const models::StackConfig& c, const std::string& p) {
  std::vector<TensorRule> r = {{"cls_token", {p + "embeddings.cls_token"}}, {"pos_embed", {p + "embeddings.position_embeddings"}}};
  if (c.distilled) r.push_back({"dist_token", {p + "embeddings.distillation_token"}});
  add_weight_and_bias(r, "patch_embed", p + "embeddings.patch_embeddings.projection");
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string tfm = "encoder.layers." + std::to_string(i), hf = p + "encoder.layer." + std::to_string(i);
    add_bert_style_layer(r, tfm, hf, ".attention.attention", ".layernorm_before", ".layernorm_after");  // pre-norm
  }
  add_weight_and_bias(r, "encoder.norm", p + "layernorm");
  if (c.distill_head) {
    add_weight_and_bias(r, "head", "cls_classifier");
    add_weight_and_bias(r, "dist_head", "distillation_classifier");
  } else if (c.classes > 0) {
    add_weight_and_bias(r, "head", "classifier");
  }
  if (c.pooler) add_weight_and_bias(r, "pooler", p + "pooler.dense");
  return r;
}

// The mask token of masked image modelling, which neither classification nor features use.
bool vit_ignored(const std::string& name) { return name.ends_with("embeddings.mask_token"); }

}  // namespace tfm::hf
