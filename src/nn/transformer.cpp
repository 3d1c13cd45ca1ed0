#include "nn/transformer.h"

#include "nn/trace.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::nn {

namespace {

constexpr std::pair<Activation, const char*> kActivationNames[] = {
    {Activation::ReLU, "relu"}, {Activation::GELU, "gelu"}, {Activation::GELUTanh, "gelu_tanh"}, {Activation::SiLU, "silu"}};

Tensor activate(Activation a, const Tensor& x) {
  switch (a) {
    case Activation::ReLU: return ops::relu(x);
    case Activation::GELU: return ops::gelu(x);
    case Activation::GELUTanh: return ops::gelu_tanh(x);
    case Activation::SiLU: return ops::silu(x);
  }
  return x;
}

}  // namespace

Activation parse_activation(const std::string& name) {
  for (const auto& [a, n] : kActivationNames)
    if (name == n) return a;
  throw Error("unknown activation '" + name + "' (expected relu, gelu, gelu_tanh or silu)");
}

std::string to_string(Activation a) {
  for (const auto& [b, n] : kActivationNames)
    if (a == b) return n;
  return "?";
}

PositionwiseFeedForward::PositionwiseFeedForward(const LayerOptions& o) : activation_(o.activation), dropout_(o.dropout), gated_(o.gated) {
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, (o.gated ? 2 : 1) * o.d_ff, o.ff_bias));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.d_ff, o.d_model, o.ff_bias));
}

Tensor PositionwiseFeedForward::forward(const Tensor& x, const ops::PackedRows& packed) const {
  if (gated_) {
    const Tensor both = linear1->forward(x);  // [batch, len, 2 d_ff]: gate, then up
    const int64_t d_ff = both.size(-1) / 2, last = both.dim() - 1;
    const Tensor h = ops::mul(activate(activation_, ops::slice(both, last, 0, d_ff)), ops::slice(both, last, d_ff, 2 * d_ff));
    return linear2->forward(dropout(h, dropout_, packed));  // [batch, len, d_model]
  }
  if (activation_ == Activation::ReLU && training() && dropout_ > 0.0f)  // keeps one [batch, len, d_ff] for backward, not two
    return linear2->forward(ops::relu_dropout(linear1->forward(x), dropout_, dropout_key(), packed));
  Tensor h = activation_ == Activation::ReLU ? linear1->forward_relu(x) : activate(activation_, linear1->forward(x));  // [batch, len, d_ff]
  return linear2->forward(dropout(h, dropout_, packed));  // [batch, len, d_model]
}

EncoderLayer::EncoderLayer(const LayerOptions& o) : o_(o) {
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(o.d_model, o.heads, o.dropout, o.attention));
  feed_forward = register_module("", std::make_shared<PositionwiseFeedForward>(o));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.norm_eps, o.rms_norm));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.norm_eps, o.rms_norm));
}

namespace {

// Where a layer's attention puts its probabilities: a new entry of `maps`, or nowhere.
Tensor* next_map(AttentionMaps* maps, std::vector<Tensor> AttentionMaps::*which) {
  return maps ? &(maps->*which).emplace_back() : nullptr;
}

}  // namespace

Tensor EncoderLayer::forward(const Tensor& x_in, const ops::AttentionMask& src_mask, KVCache* cache, AttentionMaps* maps) {
  Tensor* weights = next_map(maps, &AttentionMaps::self);
  Tensor x = x_in;
  const ops::PackedRows& packed = src_mask.packed_queries;  // x's samples, where they are packed
  if (o_.norm_first) {
    Tensor h = norm1->forward(x);
    x = ops::add(x, dropout(self_attn->forward(h, h, h, src_mask, cache, weights), o_.dropout, packed));
    x = ops::add(x, dropout(feed_forward->forward(norm2->forward(x), packed), o_.dropout, packed));
  } else {
    x = norm1->forward(ops::add(x, dropout(self_attn->forward(x, x, x, src_mask, cache, weights), o_.dropout, packed)));
    x = norm2->forward(ops::add(x, dropout(feed_forward->forward(x, packed), o_.dropout, packed)));
  }
  return trace(path(), x);
}

DecoderLayer::DecoderLayer(const LayerOptions& o) : o_(o) {
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(o.d_model, o.heads, o.dropout));
  multihead_attn = register_module("multihead_attn", std::make_shared<MultiHeadAttention>(o.d_model, o.heads, o.dropout));
  feed_forward = register_module("", std::make_shared<PositionwiseFeedForward>(o));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.norm_eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(o.d_model, o.norm_eps));
}

void DecoderCache::select_rows(const Tensor& rows) {
  for (KVCache& c : self_attn) c.select_rows(rows);
  for (KVCache& c : cross_attn) c.select_rows(rows);
}

Tensor DecoderLayer::forward(const Tensor& x_in, const Tensor& memory, const ops::AttentionMask& tgt_mask,
                             const ops::AttentionMask& memory_mask, KVCache* self_cache, KVCache* cross_cache, AttentionMaps* maps) {
  Tensor* self_weights = next_map(maps, &AttentionMaps::self);
  Tensor* cross_weights = next_map(maps, &AttentionMaps::cross);
  Tensor x = x_in;
  if (o_.norm_first) {
    Tensor h = norm1->forward(x);
    x = ops::add(x, dropout(self_attn->forward(h, h, h, tgt_mask, self_cache, self_weights), o_.dropout));
    x = ops::add(x, dropout(multihead_attn->forward(norm2->forward(x), memory, memory, memory_mask, cross_cache, cross_weights), o_.dropout));
    x = ops::add(x, dropout(feed_forward->forward(norm3->forward(x)), o_.dropout));
  } else {
    x = norm1->forward(ops::add(x, dropout(self_attn->forward(x, x, x, tgt_mask, self_cache, self_weights), o_.dropout)));
    x = norm2->forward(ops::add(x, dropout(multihead_attn->forward(x, memory, memory, memory_mask, cross_cache, cross_weights), o_.dropout)));
    x = norm3->forward(ops::add(x, dropout(feed_forward->forward(x), o_.dropout)));
  }
  return trace(path(), x);
}

Encoder::Encoder(const LayerOptions& o, int64_t num_layers) {
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(register_module("layers." + std::to_string(i), std::make_shared<EncoderLayer>(o)));
  if (o.final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(o.d_model, o.norm_eps, o.rms_norm));
}

Tensor Encoder::forward(const Tensor& x_in, const ops::AttentionMask& mask, std::vector<KVCache>* caches, AttentionMaps* maps) {
  if (caches && caches->empty()) caches->resize(layers.size());
  Tensor x = x_in;
  for (size_t i = 0; i < layers.size(); ++i) x = layers[i]->forward(x, mask, caches ? &(*caches)[i] : nullptr, maps);
  return norm ? norm->forward(x) : x;
}

Decoder::Decoder(const LayerOptions& o, int64_t num_layers) {
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(register_module("layers." + std::to_string(i), std::make_shared<DecoderLayer>(o)));
  if (o.final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(o.d_model, o.norm_eps));
}

Tensor Decoder::forward(const Tensor& x_in, const Tensor& memory, const ops::AttentionMask& tgt_mask,
                        const ops::AttentionMask& memory_mask, DecoderCache* cache, AttentionMaps* maps) {
  if (cache && cache->self_attn.empty()) {
    cache->self_attn.resize(layers.size());
    cache->cross_attn.resize(layers.size());
  }
  Tensor x = x_in;
  for (size_t i = 0; i < layers.size(); ++i)
    x = layers[i]->forward(x, memory, tgt_mask, memory_mask, cache ? &cache->self_attn[i] : nullptr,
                           cache ? &cache->cross_attn[i] : nullptr, maps);
  return norm ? norm->forward(x) : x;
}

Transformer::Transformer(const LayerOptions& o, int64_t encoder_layers, int64_t decoder_layers) {
  encoder = register_module("encoder", std::make_shared<Encoder>(o, encoder_layers));
  decoder = register_module("decoder", std::make_shared<Decoder>(o, decoder_layers));
}

}  // namespace tfm::nn
