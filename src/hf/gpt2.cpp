// GPT-2: learned positions, pre-norm blocks with gelu_new (GELU's tanh form), ln_f, the
// head tied to the token embedding; Conv1D weights stored [in, out].
#include <algorithm>
#include <cstdint>

#include "hf/families.h"

namespace tfm::hf {

// reorder_and_upcast_attn (stanford-crfm's models) computes the same scores in another
// order, in f32, as tfm always does: it changes nothing here.
models::StackConfig gpt2_config(const Directory& d) {
  require(d, "scale_attn_weights", true, true);
  require(d, "tie_word_embeddings", true, true);
  models::StackConfig c;
  c.family = "gpt";
  c.vocab = setting<int64_t>(d, "vocab_size", 50257);
  c.max_len = setting<int64_t>(d, "n_positions", 1024);
  c.d_model = setting<int64_t>(d, "n_embd", 768);
  c.heads = setting<int64_t>(d, "n_head", 12);
  // n_inner null: 4 n_embd, clamped so that an n_embd past any bound cannot overflow the
  // product before validated() refuses it by name.
  c.d_ff = setting<int64_t>(d, "n_inner", 4 * std::clamp<int64_t>(c.d_model, 0, INT64_MAX / 4));
  c.layers = setting<int64_t>(d, "n_layer", 12);
  c.dropout = setting<float>(d, "resid_pdrop", 0.1f);
  c.activation = nn::parse_activation(activation(d, "activation_function", "gelu_new"));
  c.norm_eps = setting<float>(d, "layer_norm_epsilon", 1e-5f);
  c.norm_first = true, c.learned_positions = true;
  c.scores_by_layer = setting<bool>(d, "scale_attn_by_inverse_layer_idx", false);
  with_hf_names(d, {{"d_model", "n_embd"}, {"heads", "n_head"}, {"d_ff", "n_inner"}, {"layers", "n_layer"}, {"vocab", "vocab_size"},
                    {"max_len", "n_positions"}, {"norm_eps", "layer_norm_epsilon"}, {"dropout", "resid_pdrop"}},
                [&] { c = c.validated(d.file("config.json")); });
  return c;
}

// `prefix`: "transformer." as GPT2LMHeadModel saves, "" in the hub's own gpt2 files.
std::vector<TensorRule> gpt2_rules(const models::StackConfig& c, const std::string& prefix) {
  std::vector<TensorRule> r = {{"tok_embed.weight", {prefix + "wte.weight"}, false, {}, {"lm_head.weight"}}, {"pos_embed.weight", {prefix + "wpe.weight"}}};
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string tfm = "blocks.layers." + std::to_string(i), hf = prefix + "h." + std::to_string(i);
    r.push_back({tfm + ".self_attn.in_proj_weight", {hf + ".attn.c_attn.weight"}, true});
    r.push_back({tfm + ".self_attn.in_proj_bias", {hf + ".attn.c_attn.bias"}});
    add_weight_and_bias(r, tfm + ".self_attn.out_proj", hf + ".attn.c_proj", true);
    add_weight_and_bias(r, tfm + ".linear1", hf + ".mlp.c_fc", true);
    add_weight_and_bias(r, tfm + ".linear2", hf + ".mlp.c_proj", true);
    add_weight_and_bias(r, tfm + ".norm1", hf + ".ln_1");
    add_weight_and_bias(r, tfm + ".norm2", hf + ".ln_2");
  }
  add_weight_and_bias(r, "blocks.norm", prefix + "ln_f");
  return r;
}

// The tied head and the causal-mask buffers older saves (and the hub's gpt2) keep.
bool gpt2_ignored(const std::string& name) {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

}  // namespace tfm::hf
