#pragma once
// Attention weights of one input, every layer and head, as the model classes return them
// (Translator::attention, Generator::attention, Encoder::attention, Classifier::attention)
// for drawing: `tfm serve`'s web page shows them the way the Illustrated Transformer does.
#include <cstdint>
#include <string>
#include <vector>

namespace tfm {

// One kind of attention in every layer: row-major [layers, heads, queries, keys]; each
// row (one query's weights over the keys) sums to 1.
struct AttentionWeights {
  int64_t layers = 0, heads = 0, queries = 0, keys = 0;
  std::vector<float> values;
  // The weights of `query` over the keys in `layer`, `head`.
  const float* row(int64_t layer, int64_t head, int64_t query) const { return values.data() + ((layer * heads + head) * queries + query) * keys; }
};

// A translation model on one sentence and its translation, teacher-forced.
struct TranslationAttention {
  std::string translation;                 // the target the weights are of
  std::vector<std::string> source_tokens;  // the source's subwords, then </s>: the keys of `encoder` and `cross`
  std::vector<std::string> target_tokens;  // <s>, then the target's subwords: the queries of `decoder` and `cross`
  AttentionWeights encoder, decoder, cross;  // encoder self-, decoder (causal) self-, encoder-decoder attention
};

// A language model's or an encoder's self-attention over a text's tokens.
struct TextAttention {
  std::vector<std::string> tokens;  // queries and keys alike
  AttentionWeights self;
};

}  // namespace tfm
