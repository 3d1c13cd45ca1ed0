// BERT: word, position and token-type embeddings with a LayerNorm, a post-norm encoder
// without a final LayerNorm, exact GELU, and the head of the checkpoint's architecture:
// the MLM head tied to the embedding (BertForMaskedLM; BertForPreTraining adds the pooler
// and next-sentence head), none (BertModel, with its pooler where stored), or a
// classifier (BertForSequenceClassification on the pooler, BertForTokenClassification
// on every token).
#include "hf/families.h"

namespace tfm::hf {

namespace {

// tfm's head for an architecture, or "" where tfm has none.
std::string head_of_architecture(const std::string& name) {
  if (name == "BertForMaskedLM" || name == "BertForPreTraining") return "mlm";
  if (name == "BertModel") return "none";
  if (name == "BertForSequenceClassification") return "sequence";
  if (name == "BertForTokenClassification") return "token";
  return "";
}

// The head: config.json's architecture where it names one, else what the tensors show
// (the MLM head's, a classifier on a pooler or without one, or none).
std::string bert_head(const Directory& d, const io::NamedTensors& weights, const std::string& p) {
  const auto architectures = d.config.find("architectures");
  if (architectures != d.config.end() && architectures->is_array() && !architectures->empty() && architectures->front().is_string()) {
    const std::string name = architectures->front().get<std::string>(), head = head_of_architecture(name);
    TFM_CHECK(!head.empty(), d.file("config.json") << ": architecture " << name
                                                   << " is not supported (tfm reads BertModel, BertForMaskedLM, BertForPreTraining, "
                                                      "BertForSequenceClassification and BertForTokenClassification)");
    return head;
  }
  if (has_tensor(weights, "cls.predictions.transform.dense.weight")) return "mlm";
  if (has_tensor(weights, "classifier.weight")) return has_tensor(weights, p + "pooler.dense.weight") ? "sequence" : "token";
  return "none";
}

// A classifier's labels: id2label's size (else num_labels), and how they are scored
// (problem_type: one softmax, or a sigmoid each).
void read_labels(const Directory& d, models::StackConfig& c) {
  const auto labels = d.config.find("id2label");
  c.classes = labels != d.config.end() && labels->is_object() && !labels->empty() ? static_cast<int64_t>(labels->size())
                                                                                   : setting<int64_t>(d, "num_labels", 2);
  const std::string problem = setting<std::string>(d, "problem_type", "single_label_classification");
  TFM_CHECK(problem == "single_label_classification" || (problem == "multi_label_classification" && c.head == "sequence"),
            d.file("config.json") << ": problem_type " << problem
                                  << " is not supported (tfm classifies with single_label_classification, and sequences with "
                                     "multi_label_classification too)");
  c.multi_label = problem == "multi_label_classification";
}

}  // namespace

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
  c.head = bert_head(d, weights, p);
  const bool stored_pooler = has_tensor(weights, p + "pooler.dense.weight");
  c.pooler = c.head == "mlm" ? stored_pooler && has_tensor(weights, "cls.seq_relationship.weight") : stored_pooler && c.head != "token";
  TFM_CHECK(c.head != "sequence" || c.pooler, d.path << ": a BertForSequenceClassification without its pooler (" << p << "pooler.dense.*)");
  if (c.classifies_text()) read_labels(d, c);
  with_hf_names(d, {{"d_model", "hidden_size"}, {"heads", "num_attention_heads"}, {"d_ff", "intermediate_size"},
                    {"layers", "num_hidden_layers"}, {"vocab", "vocab_size"}, {"max_len", "max_position_embeddings"},
                    {"type_vocab", "type_vocab_size"}, {"norm_eps", "layer_norm_eps"}, {"dropout", "hidden_dropout_prob"},
                    {"classes", "num_labels"}},
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
  if (c.head == "mlm") {
    add_weight_and_bias(r, "mlm_dense", "cls.predictions.transform.dense");
    add_weight_and_bias(r, "mlm_norm", "cls.predictions.transform.LayerNorm");
    r.push_back({"mlm_bias", {"cls.predictions.bias"}, false, {}, {"cls.predictions.decoder.bias"}});
  }
  if (c.pooler) add_weight_and_bias(r, "pooler", p + "pooler.dense");
  if (c.pooler && c.head == "mlm") add_weight_and_bias(r, "nsp_head", "cls.seq_relationship");
  if (c.classifies_text()) add_weight_and_bias(r, "classifier", "classifier");
  return r;
}

// The decoder tied to the word embedding (and its bias to cls.predictions.bias), the
// position-id buffer, and a pooler or next-sentence head that comes without the other.
bool bert_ignored(const std::string& name) {
  return name.starts_with("cls.predictions.decoder.") || name.ends_with("embeddings.position_ids") || name.find("pooler.") != std::string::npos ||
         name.starts_with("cls.seq_relationship.");
}

}  // namespace tfm::hf
