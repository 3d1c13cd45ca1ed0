#pragma once
// The hyper-parameters of the single-stack families that grew from the Transformer:
// the decoder-only language model ("gpt"), the masked-language-model encoder
// ("bert") and the Vision Transformer ("vit"). One struct for the three, since they
// share everything but their inputs; fields a family does not use keep defaults.
// Stored as JSON in checkpoints ("tfm.config") and accepted from --config files.
#include <cstdint>
#include <string>

#include "nn/transformer.h"

namespace tfm::models {

struct StackConfig {
  std::string family;             // "gpt", "bert" or "vit"
  int64_t vocab = 0;              // gpt, bert: token vocabulary (specials included)
  int64_t max_len = 64;           // gpt: context window; bert: longest input. vit: derived (patches + 1) by validated()
  int64_t d_model = 128, heads = 4, d_ff = 512, layers = 4;
  float dropout = 0.0f;
  nn::Activation activation = nn::Activation::GELU;
  bool norm_first = true;         // pre-norm, as GPT-2 and ViT
  bool learned_positions = true;  // gpt: learned table (GPT-2) or the paper's sinusoids
  int64_t image_size = 28, channels = 1, patch = 4, classes = 10;  // vit; classes: bert's classifiers too
  float norm_eps = 1e-5f;          // the stack's LayerNorms (Hugging Face's BERT and ViT: 1e-12)
  bool final_norm = true;          // a LayerNorm after the last layer (BERT's post-norm stack has none)
  int64_t type_vocab = 0;          // bert: token-type (segment) embeddings, 0: none; inputs are all type 0
  bool pooler = false;             // bert: the pooler (dense + tanh on [CLS]); under the MLM head, the next-sentence head too
  // bert: what sits on the encoder: "mlm" (the masked-LM head), "none" (a bare encoder,
  // Hugging Face's BertModel), "sequence" (a classifier of `classes` labels on the pooled
  // [CLS]: needs the pooler) or "token" (a classifier of `classes` labels on every token).
  std::string head = "mlm";
  bool multi_label = false;        // bert "sequence": each label its own sigmoid (multi-label), not one softmax over them
  bool scores_by_layer = false;    // gpt: layer i's attention scores divided by i + 1 too (GPT-2's scale_attn_by_inverse_layer_idx)
  // vit, Hugging Face's variants: `classes` 0 is a base without a classifier (ViTModel), and
  // `pooler` its pooler (dense + tanh on [CLS]); `distilled`, DeiT's distillation token after
  // [CLS], and `distill_head` its own classifier, whose logits are averaged with [CLS]'s
  // (DeiTForImageClassificationWithTeacher).
  bool distilled = false, distill_head = false;
  // gpt, the Llama family (Llama, Mistral, Qwen2, ...): RMS norms in place of the LayerNorms;
  // rotary positions (rope: rope_theta, rope_layout and rope_scaling) in place of a
  // position table; the gated feed-forward block (`activation`(gate) * up: SwiGLU with
  // silu); grouped-query attention (kv_heads K/V heads, 0: as many as heads); which
  // products have biases (GPT-2: all; Llama: none; Qwen2: the query, key and value
  // projections'); and the output head: the token embedding (tied) or a matrix of its own.
  bool rms_norm = false, rotary = false, gated = false;
  ops::Rope rope;
  int64_t kv_heads = 0;
  bool qkv_bias = true, out_bias = true, ff_bias = true;
  bool tied_head = true;

  int64_t patches() const { return (image_size / patch) * (image_size / patch); }
  bool classifies_text() const { return family == "bert" && (head == "sequence" || head == "token"); }
  nn::LayerOptions layer_options() const;
  int64_t vit_tokens() const { return patches() + 1 + (distilled ? 1 : 0); }  // vit: [CLS], [DIST] where distilled, the patches
  std::string to_json() const;
  // Parses the settings `text` gives over `base` (absent fields keep base's values) for
  // `family`, which a "family" field must name if the text has one. Validates unless the
  // caller fills in fields first (the vocabulary from the tokenizer) and validates then.
  static StackConfig from_json(const std::string& text, const std::string& origin, const std::string& family, StackConfig base,
                               bool validate = true);
  static StackConfig from_json(const std::string& text, const std::string& origin, const std::string& family);  // over the defaults
  static StackConfig from_file(const std::string& path, const std::string& family, const StackConfig& base, bool validate = true);
  // Every field within its bounds (models/json_fields.h), the weights within kMaxWeightFloats.
  void validate(const std::string& origin) const;
  void validate_bert_head(const std::string& origin) const;  // (validate()'s part for bert's heads)
  void validate_llama_settings(const std::string& origin) const;  // (validate()'s part for rms_norm ... tied_head)
  // validate(origin), then the fields that follow from the others (vit: max_len, the
  // patches and [CLS]).
  StackConfig validated(const std::string& origin) const;
  // About how many floats the weights and position tables take (tied weights counted apart).
  int64_t weight_floats() const;
};

}  // namespace tfm::models
