#pragma once
// The Transformer stacks of "Attention Is All You Need", with PyTorch's
// nn.Transformer structure and parameter names:
//   encoder.layers.N.{self_attn, linear1, linear2, norm1, norm2}, encoder.norm
//   decoder.layers.N.{self_attn, multihead_attn, linear1, linear2, norm1, norm2, norm3}, decoder.norm
// Post-norm (the paper, nn.Transformer's default): x = norm(x + dropout(sublayer(x))).
// Pre-norm (the Annotated Transformer, norm_first=True): x = x + dropout(sublayer(norm(x))).
// Like nn.Transformer, each stack ends with a LayerNorm in both placements, unless
// LayerOptions::final_norm is false (Marian and BERT end without one).
#include <memory>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/layers.h"

namespace tfm::nn {

// The feed-forward block's activation: ReLU (the paper), GELU (BERT, ViT), GELU's tanh
// approximation (GPT-2's gelu_new) or SiLU (Marian's swish).
enum class Activation { ReLU, GELU, GELUTanh, SiLU };
Activation parse_activation(const std::string& name);
std::string to_string(Activation a);

struct LayerOptions {
  int64_t d_model = 512, heads = 8, d_ff = 2048;
  float dropout = 0.1f;
  Activation activation = Activation::ReLU;
  bool norm_first = false;
  float norm_eps = 1e-5f;   // every LayerNorm's epsilon (BERT and ViT: 1e-12)
  bool final_norm = true;   // a LayerNorm after the last layer (Marian's and BERT's post-norm stacks have none)
  bool rms_norm = false;    // RMS norms in place of the LayerNorms (Llama)
  bool gated = false;       // the gated feed-forward block (Llama's SwiGLU, Gemma's gated GELU)
  bool ff_bias = true;      // the feed-forward products' biases
  AttentionOptions attention = {};  // grouped-query heads, biases and rotary positions of the self-attention
};

// FFN(x) = linear2(dropout(activation(linear1(x)))), paper section 3.3. Gated (GLU
// variants, Shazeer 2020): FFN(x) = linear2(dropout(activation(gate) * up)), where
// linear1 [2 d_ff, d_model] holds the rows of W_gate, then of W_up (Llama's gate_proj
// and up_proj as one product).
class PositionwiseFeedForward : public Module {
 public:
  explicit PositionwiseFeedForward(const LayerOptions& o);
  // x: [batch, len, d_model], or the sequences `packed` in [1, tokens, d_model].
  Tensor forward(const Tensor& x, const ops::PackedRows& packed = {}) const;
  std::shared_ptr<Linear> linear1, linear2;

 private:
  Activation activation_;
  float dropout_;
  bool gated_;
};

class EncoderLayer : public Module {
 public:
  explicit EncoderLayer(const LayerOptions& o);
  // x: [batch, len, d_model]. With a cache (inference of a causal stack), x holds
  // only the positions after the cached prefix.
  Tensor forward(const Tensor& x, const ops::AttentionMask& src_mask, KVCache* cache = nullptr, AttentionMaps* maps = nullptr);
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<PositionwiseFeedForward> feed_forward;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  LayerOptions o_;
};

// Per-layer caches for incremental decoding.
struct DecoderCache {
  std::vector<KVCache> self_attn, cross_attn;
  int64_t length() const { return self_attn.empty() ? 0 : self_attn[0].length; }
  // Row r of the batch becomes the old row rows[r] (beam search keeps the beams it
  // extends): only the caches' indices change (KVCache).
  void select_rows(const Tensor& rows);  // i64 [n] (KVCache::select_rows)
};

class DecoderLayer : public Module {
 public:
  explicit DecoderLayer(const LayerOptions& o);
  // x: [batch, tgt_len, d_model], memory: [batch, src_len, d_model]. With caches, x holds
  // only the new positions.
  Tensor forward(const Tensor& x, const Tensor& memory, const ops::AttentionMask& tgt_mask, const ops::AttentionMask& memory_mask,
                 KVCache* self_cache = nullptr, KVCache* cross_cache = nullptr, AttentionMaps* maps = nullptr);
  std::shared_ptr<MultiHeadAttention> self_attn, multihead_attn;
  std::shared_ptr<PositionwiseFeedForward> feed_forward;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;

 private:
  LayerOptions o_;
};

class Encoder : public Module {
 public:
  Encoder(const LayerOptions& o, int64_t num_layers);
  // A stack with a causal mask is a decoder-only model; `caches` (one per layer,
  // created on first use) make each new position cost one position. `maps`, where
  // given, receives every layer's attention probabilities.
  Tensor forward(const Tensor& x, const ops::AttentionMask& mask, std::vector<KVCache>* caches = nullptr, AttentionMaps* maps = nullptr);
  std::vector<std::shared_ptr<EncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  // null without a final norm
};

class Decoder : public Module {
 public:
  Decoder(const LayerOptions& o, int64_t num_layers);
  Tensor forward(const Tensor& x, const Tensor& memory, const ops::AttentionMask& tgt_mask, const ops::AttentionMask& memory_mask,
                 DecoderCache* cache = nullptr, AttentionMaps* maps = nullptr);
  std::vector<std::shared_ptr<DecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  // null without a final norm
};

// nn.Transformer: an encoder stack and a decoder stack.
class Transformer : public Module {
 public:
  Transformer(const LayerOptions& o, int64_t encoder_layers, int64_t decoder_layers);
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
};

}  // namespace tfm::nn
