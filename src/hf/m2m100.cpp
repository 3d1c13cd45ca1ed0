// M2M100 and NLLB (model_type m2m_100): a pre-norm encoder-decoder with a final LayerNorm
// on each stack, ReLU, embeddings scaled by sqrt(d_model) and shared three ways, fairseq's
// sinusoids from position pad + 1, no bias on the output, Hugging Face's beam search rules;
// the decoder starts from </s> and the target language comes first (the caller's forced
// token, as transformers' forced_bos_token_id).
#include "hf/families.h"
#include "hf/generation.h"

namespace tfm::hf {

namespace {

void add_attention(std::vector<TensorRule>& r, const std::string& tfm, const std::string& hf) {
  add_stacked_qkv(r, tfm, hf + ".q_proj", hf + ".k_proj", hf + ".v_proj");
  add_weight_and_bias(r, tfm + ".out_proj", hf + ".out_proj");
}

}  // namespace

models::TransformerConfig m2m100_config(const Directory& d) {
  require(d, "scale_embedding", true, true);
  require(d, "tie_word_embeddings", true, true);
  require_same(d, "decoder_attention_heads", "encoder_attention_heads", 16);
  require_same(d, "decoder_ffn_dim", "encoder_ffn_dim", 4096);
  models::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = setting<int64_t>(d, "vocab_size", 128112);
  c.d_model = setting<int64_t>(d, "d_model", 1024);
  c.heads = setting<int64_t>(d, "encoder_attention_heads", 16);
  c.d_ff = setting<int64_t>(d, "encoder_ffn_dim", 4096);
  c.encoder_layers = setting<int64_t>(d, "encoder_layers", 12);
  c.decoder_layers = setting<int64_t>(d, "decoder_layers", 12);
  c.dropout = setting<float>(d, "dropout", 0.1f);
  c.activation = nn::parse_activation(activation(d, "activation_function", "relu"));
  c.norm_first = true, c.final_norm = true, c.positions = "fairseq", c.share_embeddings = true;
  c.max_len = setting<int64_t>(d, "max_position_embeddings", 1024);
  c.pad_id = setting<int>(d, "pad_token_id", 1);
  const Generation generation = generation_of(d);
  c.bos_id = generation_id(d, generation, "decoder_start_token_id", 2);
  c.eos_id = generation_id(d, generation, "eos_token_id", 2);
  c.hf_search = true;
  c.forced_eos = generation_id(d, generation, "forced_eos_token_id", -1) == c.eos_id;
  c.renormalize = generation_setting<bool>(generation, "renormalize_logits").value_or(false);
  c.max_length = generation_max_length(generation);
  with_hf_names(d, {{"heads", "encoder_attention_heads"}, {"d_ff", "encoder_ffn_dim"}, {"src_vocab", "vocab_size"}, {"tgt_vocab", "vocab_size"},
                    {"max_len", "max_position_embeddings"}, {"d_model", "d_model"}},
                [&] { c.validate(d.file("config.json")); });
  return c;
}

std::vector<TensorRule> m2m100_rules(const models::TransformerConfig& c) {
  std::vector<TensorRule> r;
  r.push_back({"src_embed.weight", {"model.shared.weight"}, false, {}, {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}});
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
