// MarianMT (Helsinki-NLP's opus-mt): a post-norm encoder-decoder without final
// LayerNorms, SiLU ("swish"), embeddings scaled by sqrt(d_model) and shared three ways
// (or, with separate vocabularies, the encoder's apart and the head tied to the
// decoder's), sinusoids with the sines before the cosines, final_logits_bias, and
// Hugging Face's beam search rules.
#include "hf/families.h"
#include "hf/generation.h"

namespace tfm::hf {

namespace {

// share_encoder_decoder_embeddings false (opus-mt's conversions of models with separate
// vocabularies): MarianModel gives each stack a copy of its vocab_size embedding, so
// decoder_vocab_size must be vocab_size too; the head is tied to the decoder's embedding
// unless tie_word_embeddings is false. Shared embeddings always tie the head here: an
// untied head beside them is refused by name.
void read_embeddings(const Directory& d, models::TransformerConfig& c) {
  c.share_embeddings = setting<bool>(d, "share_encoder_decoder_embeddings", true);
  if (c.share_embeddings) return require(d, "tie_word_embeddings", true, true);
  const int64_t decoder_vocab = setting<int64_t>(d, "decoder_vocab_size", c.src_vocab);
  TFM_CHECK(decoder_vocab == c.src_vocab, d.file("config.json") << ": decoder_vocab_size " << decoder_vocab << " differs from vocab_size " << c.src_vocab
                                                                << " (transformers' MarianModel gives the decoder a copy of the vocab_size embedding)");
  c.tie_generator = setting<bool>(d, "tie_word_embeddings", true);
}

void add_attention(std::vector<TensorRule>& r, const std::string& tfm, const std::string& hf) {
  add_stacked_qkv(r, tfm, hf + ".q_proj", hf + ".k_proj", hf + ".v_proj");
  add_weight_and_bias(r, tfm + ".out_proj", hf + ".out_proj");
}

}  // namespace

void read_bart_sizes(const Directory& d, const BartSizes& fallback, models::TransformerConfig& c) {
  require_same(d, "decoder_attention_heads", "encoder_attention_heads", fallback.heads);
  require_same(d, "decoder_ffn_dim", "encoder_ffn_dim", fallback.d_ff);
  c.src_vocab = c.tgt_vocab = setting<int64_t>(d, "vocab_size", fallback.vocab);
  c.d_model = setting<int64_t>(d, "d_model", fallback.d_model);
  c.heads = setting<int64_t>(d, "encoder_attention_heads", fallback.heads);
  c.d_ff = setting<int64_t>(d, "encoder_ffn_dim", fallback.d_ff);
  c.encoder_layers = setting<int64_t>(d, "encoder_layers", fallback.layers);
  c.decoder_layers = setting<int64_t>(d, "decoder_layers", fallback.layers);
  c.dropout = setting<float>(d, "dropout", 0.1f);
  c.activation = nn::parse_activation(activation(d, "activation_function", fallback.activation));
}

void validate_bart(const Directory& d, const models::TransformerConfig& c) {
  with_hf_names(d, {{"heads", "encoder_attention_heads"}, {"d_ff", "encoder_ffn_dim"}, {"src_vocab", "vocab_size"}, {"tgt_vocab", "vocab_size"},
                    {"max_len", "max_position_embeddings"}, {"d_model", "d_model"}},
                [&] { c.validate(d.file("config.json")); });
}

void add_shared_embedding(std::vector<TensorRule>& r) {
  const std::vector<std::string> copies = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"};
  r.push_back({"src_embed.weight", {"model.shared.weight"}, false, {}, copies});
}

void add_final_logits_bias(std::vector<TensorRule>& r, const models::TransformerConfig& c) {
  r.push_back({"generator.bias", {"final_logits_bias"}, false, {1, c.tgt_vocab}});  // [1, vocab] there
}

bool shared_embedding_copy(const std::string& name) {
  return name == "model.encoder.embed_tokens.weight" || name == "model.decoder.embed_tokens.weight" || name == "lm_head.weight";
}

void add_bart_layers(std::vector<TensorRule>& r, const models::TransformerConfig& c) {
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const std::string tfm = "transformer.encoder.layers." + std::to_string(i), hf = "model.encoder.layers." + std::to_string(i);
    add_attention(r, tfm + ".self_attn", hf + ".self_attn");
    add_weight_and_bias(r, tfm + ".norm1", hf + ".self_attn_layer_norm");
    add_weight_and_bias(r, tfm + ".linear1", hf + ".fc1");
    add_weight_and_bias(r, tfm + ".linear2", hf + ".fc2");
    add_weight_and_bias(r, tfm + ".norm2", hf + ".final_layer_norm");
  }
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    const std::string tfm = "transformer.decoder.layers." + std::to_string(i), hf = "model.decoder.layers." + std::to_string(i);
    add_attention(r, tfm + ".self_attn", hf + ".self_attn");
    add_weight_and_bias(r, tfm + ".norm1", hf + ".self_attn_layer_norm");
    add_attention(r, tfm + ".multihead_attn", hf + ".encoder_attn");
    add_weight_and_bias(r, tfm + ".norm2", hf + ".encoder_attn_layer_norm");
    add_weight_and_bias(r, tfm + ".linear1", hf + ".fc1");
    add_weight_and_bias(r, tfm + ".linear2", hf + ".fc2");
    add_weight_and_bias(r, tfm + ".norm3", hf + ".final_layer_norm");
  }
}

models::TransformerConfig marian_config(const Directory& d) {
  require(d, "scale_embedding", true, false);
  require(d, "normalize_embedding", false, false);
  require(d, "add_final_layer_norm", false, false);
  models::TransformerConfig c;
  read_bart_sizes(d, {0, 512, 8, 2048, 6, "swish"}, c);  // (MarianConfig's defaults)
  c.norm_first = false, c.final_norm = false, c.positions = "split";
  read_embeddings(d, c);
  c.max_len = setting<int64_t>(d, "max_position_embeddings", 512);
  c.pad_id = setting<int>(d, "pad_token_id", 0);
  read_generation(d, {{"forced_eos_token_id", 0}}, c.pad_id, 0, c);  // (MarianConfig's default forced_eos_token_id)
  validate_bart(d, c);
  return c;
}

std::vector<TensorRule> marian_rules(const models::TransformerConfig& c) {
  std::vector<TensorRule> r;
  if (c.share_embeddings) {
    add_shared_embedding(r);
  } else {
    r.push_back({"src_embed.weight", {"model.encoder.embed_tokens.weight"}});
    const std::vector<std::string> head_copy = c.tie_generator ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{};
    r.push_back({"tgt_embed.weight", {"model.decoder.embed_tokens.weight"}, false, {}, head_copy});
    if (!c.tie_generator) r.push_back({"generator.weight", {"lm_head.weight"}});
  }
  add_final_logits_bias(r, c);
  add_bart_layers(r, c);
  return r;
}

// Copies of the shared embedding some saves keep, and the sinusoid tables (computed).
bool marian_ignored(const std::string& name) {
  return shared_embedding_copy(name) || name == "model.encoder.embed_positions.weight" || name == "model.decoder.embed_positions.weight";
}

}  // namespace tfm::hf
