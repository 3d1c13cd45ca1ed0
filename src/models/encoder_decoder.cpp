#include "models/encoder_decoder.h"

#include <algorithm>

#include "nn/init.h"
#include "nn/trace.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "ops/softmax.h"

namespace tfm::models {

Generator::Generator(Tensor w) : weight(std::move(w)), bias(Tensor::zeros({weight.size(0)})) {
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

Tensor Generator::logits(const Tensor& x) const { return nn::trace(path(), ops::linear(x, weight, bias, products())); }

Tensor Generator::forward(const Tensor& x) const { return ops::log_softmax(logits(x)); }

Tensor Generator::loss(const Tensor& x, const Tensor& targets, float label_smoothing, int ignore_index) const {
  return ops::linear_cross_entropy(ops::reshape(x, {-1, x.size(-1)}), weight, bias, ops::reshape(targets, {-1}), label_smoothing, ignore_index, products());
}

EncoderDecoder::EncoderDecoder(const TransformerConfig& c) : config_(c) {
  c.validate("model configuration");
  // With share_embeddings one [vocab, d_model] matrix serves all three (Press & Wolf, 2017;
  // paper section 3.4), allocated once: an opus-mt model's is 113 MiB, and allocating
  // three to keep one raised its peak while loading by 227 MiB.
  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(c.src_vocab, c.d_model, c.scale_embedding));
  const auto target_matrix = [&] { return c.share_embeddings ? src_embed->weight : Tensor::zeros({c.tgt_vocab, c.d_model}); };
  tgt_embed = register_module("tgt_embed", std::make_shared<nn::Embedding>(target_matrix(), c.scale_embedding));
  src_pos = register_module("src_pos", std::make_shared<nn::PositionalEncoding>(c.d_model, c.dropout, c.max_len, c.position_options()));
  tgt_pos = register_module("tgt_pos", std::make_shared<nn::PositionalEncoding>(*src_pos, c.dropout));
  transformer = register_module("transformer", std::make_shared<nn::Transformer>(c.layer_options(), c.encoder_layers, c.decoder_layers));
  generator = register_module("generator", std::make_shared<Generator>(c.tie_generator ? tgt_embed->weight : target_matrix()));
}

Tensor EncoderDecoder::encode(const Tokens& src, const ops::AttentionMask& src_mask, nn::AttentionMaps* maps) {
  Tensor x = src_pos->forward(src_embed->forward(src.ids));  // [batch, src_len, d_model]
  return transformer->encoder->forward(x, src_mask, nullptr, maps);
}

Tensor EncoderDecoder::decode(const Tensor& memory, const ops::AttentionMask& src_mask, const Tokens& tgt,
                              const ops::AttentionMask& tgt_mask, nn::DecoderCache* cache, nn::AttentionMaps* maps) {
  const int64_t start = cache ? cache->length() : 0;
  Tensor x = tgt_pos->forward(tgt_embed->forward(tgt.ids), start);  // [batch, tgt_len, d_model]
  return transformer->decoder->forward(x, memory, tgt_mask, src_mask, cache, maps);
}

ops::AttentionMask EncoderDecoder::target_mask(const Tokens& tgt) const {
  // The look-ahead mask hides a right-padded target's padding from every real position;
  // the key-padding mask is kept where it can be told from the start symbol (Marian
  // starts from the pad id, which must stay visible).
  ops::AttentionMask mask = padding_mask(tgt, config_.pad_id, device(), /*causal=*/true);
  if (config_.bos_id == config_.pad_id) mask.key_padding = Tensor();
  return mask;
}

Tensor EncoderDecoder::forward(const Tokens& src, const Tokens& tgt) {
  const ops::AttentionMask tgt_mask = target_mask(tgt);
  const Unpadded unpadded = unpad(src, config_.pad_id);
  const auto& lengths = unpadded.sequences->length;
  if (std::find(lengths.begin(), lengths.end(), 0) != lengths.end()) {  // a source of padding alone attends to nothing
    const ops::AttentionMask src_mask = padding_mask(src, config_.pad_id, device());
    return decode(encode(src, src_mask), src_mask, tgt, tgt_mask);
  }
  // The encoder runs on the source's real tokens only, one sentence after another: no
  // product, layer norm or attention spends time on padding (PyTorch's nn.Transformer
  // fast path does the same with nested tensors). The values of the real tokens are
  // those of the padded computation.
  const Tensor x = src_pos->forward(src_embed->forward(src.ids));  // [batch, src_len, d_model]
  ops::AttentionMask packed;
  packed.packed_queries = packed.packed_keys = unpadded.sequences;
  Tensor memory = transformer->encoder->forward(at_tokens(x, unpadded), packed);  // [1, tokens, d_model]
  ops::AttentionMask memory_mask;
  memory_mask.packed_keys = unpadded.sequences;
  return decode(memory, memory_mask, tgt, tgt_mask);
}

void EncoderDecoder::init_parameters(Rng& rng) {
  // Vectors keep their construction values: biases 0, LayerNorm gains 1.
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) nn::init::xavier_uniform_(p, rng);
}

}  // namespace tfm::models
