#pragma once
// BERT-style bidirectional encoder (Devlin et al., 2018): token + learned position
// embeddings -> LayerNorm -> encoder stack (padding mask only, no look-ahead), then the
// configuration's head (StackConfig::head): the masked-language-model head (per position
// a dense + GELU + LayerNorm transform and the output projection tied to the token
// embedding), none (a bare encoder), or a classifier of labels on the pooled [CLS]
// (sequence) or on every token (token), as Hugging Face's BertFor*Classification.
// Parameter names match the PyTorch module in tests/reference/model.py:
//   tok_embed.weight, pos_embed.weight, embed_norm, encoder.layers.N..., encoder.norm,
//   mlm_dense.{weight,bias}, mlm_norm, mlm_bias (the MLM head); and where the configuration
//   asks for them (Hugging Face's BERT), type_embed.weight, pooler.{weight,bias},
//   nsp_head.{weight,bias} (with the MLM head), classifier.{weight,bias}
#include <memory>
#include <vector>

#include "models/stack_config.h"
#include "models/tokens.h"
#include "nn/transformer.h"
#include "tensor/rng.h"

namespace tfm::models {

class BERT : public nn::Module {
 public:
  BERT(const StackConfig& config, int pad_id);

  // ids: [batch, len] (padded with pad_id) -> hidden states [batch, len, d_model];
  // `maps`, where given, receives each layer's attention probabilities.
  Tensor encode(const Tokens& ids, nn::AttentionMaps* maps = nullptr);
  // hidden rows [n, d_model] -> vocabulary logits [n, vocab] (the MLM head)
  Tensor mlm_logits(const Tensor& hidden) const;
  // The classifier (head sequence or token): hidden states [batch, len, d_model] ->
  // label scores [batch, classes] (sequence: from the pooled [CLS]) or [batch, len,
  // classes] (token), before the softmax (or sigmoids, multi_label).
  Tensor classify(const Tensor& hidden) const;
  // With the pooler (config().pooler): hidden states [batch, len, d_model] -> tanh(dense(h[:, 0]))
  // [batch, d_model], and that -> the next-sentence logits [batch, 2].
  Tensor pooled(const Tensor& hidden) const;
  Tensor nsp_logits(const Tensor& pooled) const;

  // N(0, 0.02) matrices and embeddings (BERT's initialiser), zero biases.
  void init_parameters(Rng& rng);
  const StackConfig& config() const { return config_; }

  std::shared_ptr<nn::Embedding> tok_embed, pos_embed, type_embed;  // type_embed: null without token types
  std::shared_ptr<nn::LayerNorm> embed_norm, mlm_norm;
  std::shared_ptr<nn::Encoder> encoder;
  std::shared_ptr<nn::Linear> mlm_dense, pooler, nsp_head, classifier;  // each null where the configuration has none
  Tensor mlm_bias;  // [vocab]; undefined without the MLM head

 private:
  StackConfig config_;
  int pad_id_;
};

}  // namespace tfm::models
