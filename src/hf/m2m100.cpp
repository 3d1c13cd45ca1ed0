// fairseq's multilingual BART-family models, pre-norm encoder-decoders with a final
// LayerNorm on each stack and one embedding shared three ways; the decoder starts from
// </s> and the target language comes first (the caller's forced token, as transformers'
// forced_bos_token_id). Hugging Face's beam search rules.
// - M2M100 and NLLB (model_type m2m_100): ReLU, embeddings scaled by sqrt(d_model),
//   fairseq's sinusoids from position pad + 1, no bias on the output.
// - mBART-50 (model_type mbart): GELU, embeddings scaled as scale_embedding says, learned
//   positions from row 2 (MBartLearnedPositionalEmbedding's offset), a LayerNorm over
//   embeddings + positions (layernorm_embedding), final_logits_bias.
#include "hf/families.h"
#include "hf/generation.h"

namespace tfm::hf {

namespace {

// What both read: the sizes (`fallback`: the config class's defaults), pre-norm with
// final LayerNorms, the shared embedding, the length and the pad id.
models::TransformerConfig multilingual_config(const Directory& d, const BartSizes& fallback) {
  require(d, "tie_word_embeddings", true, true);
  models::TransformerConfig c;
  read_bart_sizes(d, fallback, c);
  c.norm_first = true, c.final_norm = true, c.share_embeddings = true;
  c.max_len = setting<int64_t>(d, "max_position_embeddings", 1024);
  c.pad_id = setting<int>(d, "pad_token_id", 1);
  return c;
}

}  // namespace

models::TransformerConfig m2m100_config(const Directory& d) {
  require(d, "scale_embedding", true, true);
  models::TransformerConfig c = multilingual_config(d, {128112, 1024, 16, 4096, 12, "relu"});  // (M2M100Config's defaults)
  c.positions = "fairseq";
  read_generation(d, nlohmann::json::object(), 2, 2, c);
  validate_bart(d, c);
  return c;
}

// MBartConfig has no decoder_start_token_id of its own: generate() then starts from
// bos_token_id (mBART-50's checkpoints set decoder_start_token_id 2, </s>).
models::TransformerConfig mbart_config(const Directory& d) {
  models::TransformerConfig c = multilingual_config(d, {50265, 1024, 16, 4096, 12, "gelu"});  // (MBartConfig's defaults)
  c.positions = "learned", c.embed_norm = true;
  c.scale_embedding = setting<bool>(d, "scale_embedding", false);
  read_generation(d, {{"forced_eos_token_id", 2}}, setting<int>(d, "bos_token_id", 0), 2, c);  // (MBartConfig's forced_eos_token_id)
  validate_bart(d, c);
  return c;
}

std::vector<TensorRule> m2m100_rules(const models::TransformerConfig& c) {
  std::vector<TensorRule> r;
  add_shared_embedding(r);
  add_bart_layers(r, c);
  add_weight_and_bias(r, "transformer.encoder.norm", "model.encoder.layer_norm");
  add_weight_and_bias(r, "transformer.decoder.norm", "model.decoder.layer_norm");
  return r;
}

// M2M100's rules, each stack's position table and embedding LayerNorm, and the output's bias.
std::vector<TensorRule> mbart_rules(const models::TransformerConfig& c) {
  std::vector<TensorRule> r = m2m100_rules(c);
  for (const auto& [tfm, hf] : {std::pair<std::string, std::string>{"src_pos", "model.encoder"}, {"tgt_pos", "model.decoder"}}) {
    r.push_back({tfm + ".weight", {hf + ".embed_positions.weight"}});  // [max_len + 2, d_model]
    add_weight_and_bias(r, tfm + ".norm", hf + ".layernorm_embedding");
  }
  add_final_logits_bias(r, c);
  return r;
}

// Copies of the shared embedding some saves keep, and the sinusoid tables (computed).
bool m2m100_ignored(const std::string& name) {
  return shared_embedding_copy(name) || name == "model.encoder.embed_positions.weights" || name == "model.decoder.embed_positions.weights";
}

}  // namespace tfm::hf
