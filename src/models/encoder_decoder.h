#pragma once
// The full translation model of "Attention Is All You Need" (the Annotated
// Transformer's EncoderDecoder): embeddings + positions -> nn.Transformer ->
// generator. Parameter names match this PyTorch module (tests/reference/model.py):
//   src_embed.weight, tgt_embed.weight, transformer.{encoder,decoder}..., generator.{weight,bias}
// (and, with mBART's settings, {src,tgt}_pos.weight and {src,tgt}_pos.norm.{weight,bias}).
#include <memory>
#include <vector>

#include "models/config.h"
#include "models/tokens.h"
#include "nn/transformer.h"
#include "ops/attention.h"
#include "tensor/rng.h"

namespace tfm::models {

// Linear projection to the vocabulary followed by log-softmax.
class Generator : public nn::Module {
 public:
  explicit Generator(Tensor weight);  // [vocab, d_model], perhaps tied to an embedding; the bias starts at 0
  Tensor logits(const Tensor& x) const;     // [..., d_model] -> [..., vocab]
  Tensor forward(const Tensor& x) const;    // log-probabilities
  // cross_entropy(logits(x), targets), without holding the logits (ops::linear_cross_entropy).
  Tensor loss(const Tensor& x, const Tensor& targets, float label_smoothing, int ignore_index) const;
  Tensor weight, bias;
};

class EncoderDecoder : public nn::Module {
 public:
  explicit EncoderDecoder(const TransformerConfig& config);

  // src: [batch, src_len] -> memory [batch, src_len, d_model]; `maps`, where given,
  // receives each layer's attention probabilities.
  Tensor encode(const Tokens& src, const ops::AttentionMask& src_mask, nn::AttentionMaps* maps = nullptr);
  // tgt: [batch, tgt_len] -> decoder output [batch, tgt_len, d_model]. With a cache
  // (inference), tgt holds only the positions after the cached prefix.
  Tensor decode(const Tensor& memory, const ops::AttentionMask& src_mask, const Tokens& tgt, const ops::AttentionMask& tgt_mask,
                nn::DecoderCache* cache = nullptr, nn::AttentionMaps* maps = nullptr);
  // The teacher-forced target's self-attention mask: look-ahead, and its padding.
  ops::AttentionMask target_mask(const Tokens& tgt) const;
  // Decoder output for the teacher-forced target (masks built from padding; the
  // encoder skips the source's padding).
  Tensor forward(const Tokens& src, const Tokens& tgt);

  // Xavier-uniform for every weight matrix, as the Annotated Transformer's make_model.
  void init_parameters(Rng& rng);

  const TransformerConfig& config() const { return config_; }

  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;
  std::shared_ptr<nn::PositionalEncoding> src_pos, tgt_pos;
  std::shared_ptr<nn::Transformer> transformer;
  std::shared_ptr<Generator> generator;

 private:
  TransformerConfig config_;
};

}  // namespace tfm::models
