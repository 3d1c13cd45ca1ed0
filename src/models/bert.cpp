#include "models/bert.h"

#include "nn/init.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::models {

BERT::BERT(const StackConfig& c, int pad_id) : config_(c), pad_id_(pad_id) {
  c.validate("model configuration");
  TFM_CHECK(c.family == "bert", "model configuration: family '" << c.family << "' is not bert");
  tok_embed = register_module("tok_embed", std::make_shared<nn::Embedding>(c.vocab, c.d_model, /*scale_by_sqrt_d=*/false));
  pos_embed = register_module("pos_embed", std::make_shared<nn::Embedding>(c.max_len, c.d_model, false));
  if (c.type_vocab > 0) type_embed = register_module("type_embed", std::make_shared<nn::Embedding>(c.type_vocab, c.d_model, false));
  embed_norm = register_module("embed_norm", std::make_shared<nn::LayerNorm>(c.d_model, 1e-12f));
  encoder = register_module("encoder", std::make_shared<nn::Encoder>(c.layer_options(), c.layers));
  if (c.head == "mlm") {
    mlm_dense = register_module("mlm_dense", std::make_shared<nn::Linear>(c.d_model, c.d_model));
    mlm_norm = register_module("mlm_norm", std::make_shared<nn::LayerNorm>(c.d_model, 1e-12f));
    mlm_bias = Tensor::zeros({c.vocab});
    register_parameter("mlm_bias", mlm_bias);
  }
  if (c.pooler) pooler = register_module("pooler", std::make_shared<nn::Linear>(c.d_model, c.d_model));
  if (c.pooler && c.head == "mlm") nsp_head = register_module("nsp_head", std::make_shared<nn::Linear>(c.d_model, 2));
  if (c.classifies_text()) classifier = register_module("classifier", std::make_shared<nn::Linear>(c.d_model, c.classes));
}

Tensor BERT::encode(const Tokens& ids, nn::AttentionMaps* maps) {
  TFM_CHECK(ids.cols() <= config_.max_len, "input of " << ids.cols() << " tokens exceeds the model's maximum of " << config_.max_len);
  Tensor x = ops::add(tok_embed->forward(ids.ids), ops::slice(pos_embed->weight, 0, 0, ids.cols()));
  if (type_embed) x = ops::add(x, ops::slice(type_embed->weight, 0, 0, 1));  // + [1, d_model]: every token of segment 0
  x = dropout(embed_norm->forward(x), config_.dropout);              // [batch, len, d_model]
  return encoder->forward(x, padding_mask(ids, pad_id_, device()), nullptr, maps);  // [batch, len, d_model]
}

Tensor BERT::mlm_logits(const Tensor& hidden) const {
  TFM_CHECK(mlm_dense, "this BERT has no masked-language-model head (its head is " << config_.head << ")");
  Tensor h = mlm_norm->forward(ops::gelu(mlm_dense->forward(hidden)));  // [n, d_model]
  return ops::linear(h, tok_embed->weight, mlm_bias, products());                   // [n, vocab], tied to the input embedding
}

Tensor BERT::pooled(const Tensor& hidden) const {
  TFM_CHECK(pooler, "this BERT has no pooler");
  const int64_t B = hidden.size(0), D = hidden.size(2);
  return ops::tanh(pooler->forward(ops::reshape(ops::slice(hidden, 1, 0, 1), {B, D})));  // [batch, d_model], from [CLS]
}

Tensor BERT::classify(const Tensor& hidden) const {
  TFM_CHECK(classifier, "this BERT has no classifier (its head is " << config_.head << ")");
  const Tensor features = config_.head == "sequence" ? pooled(hidden) : hidden;  // [batch, d_model] or [batch, len, d_model]
  return classifier->forward(dropout(features, config_.dropout));                 // [batch, (len,) classes]
}

Tensor BERT::nsp_logits(const Tensor& pooled) const {
  TFM_CHECK(nsp_head, "this BERT has no next-sentence head");
  return nsp_head->forward(pooled);  // [batch, 2]
}

void BERT::init_parameters(Rng& rng) {
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) ops::normal_(p, 0.02f, rng);
}

}  // namespace tfm::models
