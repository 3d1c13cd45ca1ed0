// The Llama family (model_type llama, mistral, qwen2): tfm's decoder-only model with
// RMS norms, rotary positions, the gated feed-forward block (SwiGLU), grouped-query
// attention and an output head of its own unless tied. The families differ in
// settings alone: Qwen2's query, key and value projections have biases; Mistral's and
// Qwen2's sliding window, which a context no longer than the window never reaches.
#include <algorithm>
#include <cstdint>

#include "hf/families.h"

namespace tfm::hf {

namespace {

// config.json's rope_scaling (null: none) as transformers reads it: "type" in older
// files, "rope_type" in newer ones; a kind tfm lacks is refused by name when the
// configuration is validated.
ops::RopeScaling rope_scaling(const Directory& d) {
  const auto it = d.config.find("rope_scaling");
  if (it == d.config.end() || it->is_null()) return {};
  TFM_CHECK(it->is_object(), d.file("config.json") << ": rope_scaling " << it->dump() << " is not an object");
  const nlohmann::json& s = *it;
  ops::RopeScaling r;
  r.type = s.value("rope_type", s.value("type", std::string()));
  if (r.type == "default") return {};  // (no scaling, in newer files)
  r.factor = s.value("factor", 1.0);
  r.low_freq_factor = s.value("low_freq_factor", r.low_freq_factor);
  r.high_freq_factor = s.value("high_freq_factor", r.high_freq_factor);
  r.original_max_positions = s.value("original_max_position_embeddings", r.original_max_positions);
  return r;
}

// The longest context the model computes as transformers does: max_position_embeddings,
// or a sliding window where it is shorter (attention over at most the window's length
// never masks a key for being too far).
int64_t context(const Directory& d, int64_t positions) {
  const bool windowed = d.model_type == "mistral" || (d.model_type == "qwen2" && setting<bool>(d, "use_sliding_window", false));
  const int64_t window = windowed ? setting<int64_t>(d, "sliding_window", positions) : positions;
  return std::min(positions, window);
}

}  // namespace

models::StackConfig llama_config(const Directory& d) {
  models::StackConfig c;
  c.family = "gpt";
  c.vocab = setting<int64_t>(d, "vocab_size", 32000);
  c.d_model = setting<int64_t>(d, "hidden_size", 4096);
  c.heads = setting<int64_t>(d, "num_attention_heads", 32);
  c.kv_heads = setting<int64_t>(d, "num_key_value_heads", c.heads);
  c.d_ff = setting<int64_t>(d, "intermediate_size", 11008);
  c.layers = setting<int64_t>(d, "num_hidden_layers", 32);
  c.max_len = context(d, setting<int64_t>(d, "max_position_embeddings", 2048));
  c.dropout = 0.0f;  // (attention_dropout: for training; tfm's dropout would reach every sublayer)
  c.activation = nn::parse_activation(activation(d, "hidden_act", "silu"));
  c.norm_eps = setting<float>(d, "rms_norm_eps", 1e-6f);
  c.norm_first = true, c.learned_positions = false;
  c.rms_norm = true, c.rotary = true, c.gated = true;
  c.rope.theta = setting<double>(d, "rope_theta", 10000.0);
  c.rope.scaling = rope_scaling(d);
  const bool attention_bias = d.model_type == "llama" && setting<bool>(d, "attention_bias", false);
  c.qkv_bias = attention_bias || d.model_type == "qwen2", c.out_bias = attention_bias;
  c.ff_bias = d.model_type == "llama" && setting<bool>(d, "mlp_bias", false);
  c.tied_head = setting<bool>(d, "tie_word_embeddings", false);
  const int64_t head_dim = setting<int64_t>(d, "head_dim", c.heads > 0 ? c.d_model / c.heads : 0);
  TFM_CHECK(c.heads > 0 && head_dim * c.heads == c.d_model,
            d.file("config.json") << ": head_dim " << head_dim << " is not hidden_size / num_attention_heads (tfm's heads split the width)");
  with_hf_names(d, {{"d_model", "hidden_size"}, {"heads", "num_attention_heads"}, {"kv_heads", "num_key_value_heads"},
                    {"d_ff", "intermediate_size"}, {"layers", "num_hidden_layers"}, {"vocab", "vocab_size"},
                    {"max_len", "max_position_embeddings"}, {"norm_eps", "rms_norm_eps"}},
                [&] { c = c.validated(d.file("config.json")); });
  return c;
}

std::vector<TensorRule> llama_rules(const models::StackConfig& c) {
  const int64_t kv_width = c.d_model / c.heads * (c.kv_heads > 0 ? c.kv_heads : c.heads);
  const std::vector<int64_t> qkv_rows = {c.d_model, kv_width, kv_width};  // [kv_heads * head_dim, hidden] for k_proj and v_proj
  std::vector<TensorRule> r = {{"tok_embed.weight", {"model.embed_tokens.weight"}, false, {}, c.tied_head ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{}}};
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string tfm = "blocks.layers." + std::to_string(i), hf = "model.layers." + std::to_string(i);
    const std::string q = hf + ".self_attn.q_proj", k = hf + ".self_attn.k_proj", v = hf + ".self_attn.v_proj";
    r.push_back({tfm + ".self_attn.in_proj_weight", {q + ".weight", k + ".weight", v + ".weight"}, false, {}, {}, qkv_rows});
    if (c.qkv_bias) r.push_back({tfm + ".self_attn.in_proj_bias", {q + ".bias", k + ".bias", v + ".bias"}, false, {}, {}, qkv_rows});
    r.push_back({tfm + ".self_attn.out_proj.weight", {hf + ".self_attn.o_proj.weight"}});
    if (c.out_bias) r.push_back({tfm + ".self_attn.out_proj.bias", {hf + ".self_attn.o_proj.bias"}});
    r.push_back({tfm + ".linear1.weight", {hf + ".mlp.gate_proj.weight", hf + ".mlp.up_proj.weight"}});  // gate, then up
    r.push_back({tfm + ".linear2.weight", {hf + ".mlp.down_proj.weight"}});
    if (c.ff_bias) {
      r.push_back({tfm + ".linear1.bias", {hf + ".mlp.gate_proj.bias", hf + ".mlp.up_proj.bias"}});
      r.push_back({tfm + ".linear2.bias", {hf + ".mlp.down_proj.bias"}});
    }
    r.push_back({tfm + ".norm1.weight", {hf + ".input_layernorm.weight"}});
    r.push_back({tfm + ".norm2.weight", {hf + ".post_attention_layernorm.weight"}});
  }
  r.push_back({"blocks.norm.weight", {"model.norm.weight"}});
  if (!c.tied_head) r.push_back({"lm_head.weight", {"lm_head.weight"}});
  return r;
}

// The tied head's copy, and the rotary tables older saves kept as buffers.
bool llama_ignored(const std::string& name) { return name == "lm_head.weight" || name.ends_with(".rotary_emb.inv_freq"); }

}  // namespace tfm::hf
