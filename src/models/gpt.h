#pragma once
// Decoder-only language model (GPT): token embedding + positions -> a stack of
// causal self-attention blocks (pre-norm, GELU) -> final LayerNorm -> logits
// through the token embedding (tied output, no bias). Parameter names match the
// PyTorch module in tests/reference/model.py (nn.TransformerEncoder with a causal mask):
//   tok_embed.weight, pos_embed.weight, blocks.layers.N.{self_attn, linear1, linear2, norm1, norm2}, blocks.norm
// The Llama family is the same model in other settings (StackConfig): rotary positions
// in the attention instead of pos_embed, RMS norms, the gated feed-forward block,
// grouped-query heads, fewer biases, and an output head of its own (lm_head.weight).
#include <memory>
#include <vector>

#include "models/stack_config.h"
#include "models/tokens.h"
#include "nn/transformer.h"
#include "tensor/rng.h"

namespace tfm::models {

class GPT : public nn::Module {
 public:
  explicit GPT(const StackConfig& config);

  // ids: [batch, len] -> logits [batch, len, vocab]. With caches (inference), ids
  // hold only the positions after the cached prefix, which must fit in max_len; with
  // ragged caches (nn::KVCache), one token per row, after each row's own prefix.
  // `maps`, where given, receives each layer's attention probabilities.
  Tensor forward(const Tokens& ids, std::vector<nn::KVCache>* caches = nullptr, nn::AttentionMaps* maps = nullptr);
  // The same, but the logits of each row's last position only: [batch, vocab]. What
  // generation uses of a prompt: the output head (vocab x d_model: 151,936 x 896 in
  // Qwen2-0.5B, a quarter of a 128-token prompt's work) runs on one row, not on every position.
  Tensor last_logits(const Tokens& ids, std::vector<nn::KVCache>* caches = nullptr);

  // nanoGPT's initialisation: N(0, 0.02) weights, residual output projections
  // scaled by 1/sqrt(2 * layers), zero biases.
  void init_parameters(Rng& rng);
  // Inference, with the products frozen: one position through the model, as generation
  // runs it, makes every product's frozen copy; the weights those copies stand in for
  // give their memory back (nn::Module::release_product_weights) layer by layer, so
  // that no more than one layer's are held twice. The bytes released.
  int64_t keep_product_copies_only();
  const StackConfig& config() const { return config_; }

  std::shared_ptr<nn::Embedding> tok_embed, pos_embed;  // pos_embed: learned positions only
  std::shared_ptr<nn::PositionalEncoding> sinusoids;    // otherwise
  std::shared_ptr<nn::Encoder> blocks;
  std::shared_ptr<nn::Linear> lm_head;  // an untied output head [vocab, d_model], or null (tied)

 private:
  // The final norm's output: [batch, len, d_model].
  Tensor hidden(const Tokens& ids, std::vector<nn::KVCache>* caches, nn::AttentionMaps* maps);
  Tensor hidden_ragged(const Tokens& ids, std::vector<nn::KVCache>& caches);
  Tensor logits(const Tensor& x) const;  // [batch, len, d_model] -> [batch, len, vocab]
  StackConfig config_;
};

}  // namespace tfm::models
