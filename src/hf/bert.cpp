// BERT: word, position and token-type embeddings with a LayerNorm, a post-norm encoder
// without a final LayerNorm, exact GELU, the pooler and next-sentence head where the
// checkpoint has them (BertForPreTraining), and the MLM head tied to the embedding.
#include "hf/families.h"

namespace tfm::hf {

std::string bert_prefix(const io::NamedTensors& weights) {
  return has_tensor(weights, "bert.embeddings.position_embeddings.weight") ? "bert." : "";  // never a tied copy
}

models::StackConfig bert_config(const Directory& d, const io::NamedTensors& weights) {
  require(d, "position_embedding_type", std::string("absolute"), std::string("absolute"));
  // tfm's BERT keeps BERT's 1e-12 in its embedding and MLM-head LayerNorms.
  require(d, "layer_norm_eps", 1e-12f, 1e-12f);
  require(d, "pad_token_id", 0, 0);  // tfm's BERT pads with 0, as BERT's vocabularies do
  models::StackConfig c;
  c.family = "bert";
  c.vocab = setting<int64_t>(d, "vocab_size", 30522);
  c.max_len = setting<int64_t>(d, "max_position_embeddings", 512);
  c.d_model = setting<int64_t>(d, "hidden_size", 768);
  c.heads = setting<int64_t>(d, "num_attention_heads", 12);
  c.d_ff = setting<int64_t>(d, "intermediate_size", 3072);
  c.layers = setting<int64_t>(d, "num_hidden_layers", 12);
  c.dropout = setting<float>(d, "hidden_dropout_prob", 0.1f);
  c.activation = nn::parse_activation(activation(d, "hidden_act", "gelu"));
  c.norm_eps = 1e-12f, c.norm_first = false, c.final_norm = false;
  c.type_vocab = setting<int64_t>(d, "type_vocab_size", 2);
  TFM_CHECK(c.type_vocab >= 1, d.file("config.json") << ": type_vocab_size " << c.type_vocab
                                                     << " is not supported (BERT adds a token type embedding: at least 1 type)");
  const std::string p = bert_prefix(weights);
  c.pooler = has_tensor(weights, p + "pooler.dense.weight") && has_tensor(weights, "cls.seq_relationship.weight");
  TFM_CHECK(has_tensor(weights, "cls.predictions.transform.dense.weight"),
            d.path << ": has no masked-LM head (cls.predictions.*); tfm's BERT needs one (a BertForPreTraining or BertForMaskedLM checkpoint)");
  with_hf_names(d, {{"d_model", "hidden_size"}, {"heads", "num_attention_heads"}, {"d_ff", "intermediate_size"},
                    {"layers", "num_hidden_layers"}, {"vocab", "vocab_size"}, {"max_len", "max_position_embeddings"},
                    {"type_vocab", "type_vocab_size"}, {"norm_eps", "layer_norm_eps"}, {"dropout", "hidden_dropout_prob"}},
                [&] { c = c.validated(d.file("config.json")); });
  return c;
}

std::vector<TensorRule> bert_rules(const models::StackConfig& c, const std::string& p) {
  std::vector<TensorRule> r = {{"tok_embed.weight", {p + "embeddings.word_embeddings.weight"}, false, {}, {"cls.predictions.decoder.weight"}},
                               {"pos_embed.weight", {p + "embeddings.position_embeddings.weight"}},
                               {"type_embed.weight", {p + "embeddings.token_type_embeddings.weight"}}};
  add_weight_and_bias(r, "embed_norm", p + "embeddings.LayerNorm");
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string tfm = "encoder.layers." + std::to_string(i), hf = p + "encoder.layer." + std::to_string(i);
    add_bert_style_layer(r, tfm, hf, ".attention.self", ".attention.output.LayerNorm", ".output.LayerNorm");  // post-norm
  }
  add_weight_and_bias(r, "mlm_dense", "cls.predictions.transform.dense");
  add_weight_and_bias(r, "mlm_norm", "cls.predictions.transform.LayerNorm");
  r.push_back({"mlm_bias", {"cls.predictions.bias"}, false, {}, {"cls.predictions.decoder.bias"}});
  if (c.pooler) {
    add_weight_and_bias(r, "pooler", p + "pooler.dense");
    add_weight_and_bias(r, "nsp_head", "cls.seq_relationship");
  }
  return r;
}

// The decoder tied to the word embedding (and its bias to cls.predictions.bias), the
// position-id buffer, and a pooler or next-sentence head that comes without the other.
bool bert_ignored(const std::string& name) {
  return name.starts_with("cls.predictions.decoder.") || name.ends_with("embeddings.position_ids") || name.find("pooler.") != std::string::npos ||
         name.starts_with("cls.seq_relationship.");
}

}  // namespace tfm::hf
