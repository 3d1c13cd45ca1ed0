// M2M100 and NLLB (model_type m2m_100): a pre-norm encoder-decoder with a final LayerNorm
// on each stack, ReLU, embeddings scaled by sqrt(d_model) and shared three ways, fairseq's
// sinusoids from position pad + 1, no bias on the output, Hugging Face's beam search rules;
// the decoder starts from </s> and the target language comes first (the caller's forced
// token, as transformers' forced_bos_token_id).
#include "hf/families.h"
#include "hf/generation.h"

namespace tfm::hf {

models::TransformerConfig m2m100_config(const Directory& d) {
  require(d, "scale_embedding", true, true);
  require(d, "tie_word_embeddings", true, true);
  models::TransformerConfig c;
  read_bart_sizes(d, {128112, 1024, 16, 4096, 12, "relu"}, c);  // (M2M100Config's defaults)
  c.norm_first = true, c.final_norm = true, c.positions = "fairseq", c.share_embeddings = true;
  c.max_len = setting<int64_t>(d, "max_position_embeddings", 1024);
  c.pad_id = setting<int>(d, "pad_token_id", 1);
  read_generation(d, nlohmann::json::object(), 2, 2, c);
  with_hf_names(d, {{"heads", "encoder_attention_heads"}, {"d_ff", "encoder_ffn_dim"}, {"src_vocab", "vocab_size"}, {"tgt_vocab", "vocab_size"},
                    {"max_len", "max_position_embeddings"}, {"d_model", "d_model"}},
                [&] { c.validate(d.file("config.json")); });
  return c;
}

std::vector<TensorRule> m2m100_rules(const models::TransformerConfig& c) {
  std::vector<TensorRule> r;
  r.push_back({"src_embed.weight", {"model.shared.weight"}, false, {}, {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}});
  add_bart_layers(r, c);
  add_weight_and_bias(r, "transformer.encoder.norm", "model.encoder.layer_norm");
  add_weight_and_bias(r, "transformer.decoder.norm", "model.decoder.layer_norm");
  return r;
}

// Copies of the shared embedding some saves keep, and the sinusoid tables (computed).
bool m2m100_ignored(const std::string& name) {
  return name == "model.encoder.embed_tokens.weight" || name == "model.decoder.embed_tokens.weight" || name == "lm_head.weight" ||
         name == "model.encoder.embed_positions.weights" || name == "model.decoder.embed_positions.weights";
}

}  // namespace tfm::hf
