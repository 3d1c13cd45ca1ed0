#include "models/gpt.h"

#include <algorithm>
#include <cmath>

#include "autograd/autograd.h"
#include "nn/init.h"
#include "ops/convert.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::models {

GPT::GPT(const StackConfig& c) : config_(c) {
  c.validate("model configuration");
  tok_embed = register_module("tok_embed", std::make_shared<nn::Embedding>(c.vocab, c.d_model, /*scale_by_sqrt_d=*/false));
  if (c.learned_positions) pos_embed = register_module("pos_embed", std::make_shared<nn::Embedding>(c.max_len, c.d_model, false));
  else if (!c.rotary) sinusoids = register_module("pos", std::make_shared<nn::PositionalEncoding>(c.d_model, 0.0f, c.max_len));
  blocks = register_module("blocks", std::make_shared<nn::Encoder>(c.layer_options(), c.layers));
  if (!c.tied_head) lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.d_model, c.vocab, /*bias=*/false));
  if (c.scores_by_layer)
    for (size_t i = 0; i < blocks->layers.size(); ++i) blocks->layers[i]->self_attn->divide_scores(static_cast<float>(i + 1));
}

Tensor GPT::forward(const Tokens& ids, std::vector<nn::KVCache>* caches, nn::AttentionMaps* maps) {
  return logits(hidden(ids, caches, maps));  // [batch, len, d_model] -> [batch, len, vocab]
}

// The final norm runs on every position still: a row-wise op of len x d_model, where
// the head it spares is len x d_model x vocab.
Tensor GPT::last_logits(const Tokens& ids, std::vector<nn::KVCache>* caches) {
  const Tensor h = hidden(ids, caches, nullptr);  // [batch, len, d_model]
  return ops::reshape(logits(ops::slice(h, 1, h.size(1) - 1, h.size(1))), {h.size(0), config_.vocab});
}

Tensor GPT::hidden(const Tokens& ids, std::vector<nn::KVCache>* caches, nn::AttentionMaps* maps) {
  if (caches && !caches->empty() && (*caches)[0].ragged()) return hidden_ragged(ids, *caches);
  const int64_t start = caches && !caches->empty() ? (*caches)[0].length : 0;
  TFM_CHECK(start + ids.cols() <= config_.max_len,
            "sequence of " << start + ids.cols() << " tokens exceeds the model's context of " << config_.max_len);
  Tensor x = tok_embed->forward(ids.ids);  // [batch, len, d_model]
  if (pos_embed) {
    x = ops::add(x, ops::slice(pos_embed->weight, 0, start, start + ids.cols()));  // + [len, d_model]: rows start.. of the table
  } else if (sinusoids) {
    x = sinusoids->forward(x, start);
  }  // (rotary positions are the attention's)
  ops::AttentionMask causal;
  causal.causal = true;
  return blocks->forward(dropout(x, config_.dropout), causal, caches, maps);
}

Tensor GPT::logits(const Tensor& x) const {
  return lm_head ? lm_head->forward(x) : ops::linear(x, tok_embed->weight, Tensor(), products());
}

// One position per row, each after its own cached ones (decode::GenerationBatch).
Tensor GPT::hidden_ragged(const Tokens& ids, std::vector<nn::KVCache>& caches) {
  const std::vector<int64_t>& lengths = caches[0].lengths;
  TFM_CHECK(ids.cols() == 1 && ids.rows() == static_cast<int64_t>(lengths.size()),
            "a ragged batch of " << lengths.size() << " sequences takes one token each, got " << ids.rows() << "x" << ids.cols());
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  TFM_CHECK(longest < config_.max_len, "sequence of " << longest + 1 << " tokens exceeds the model's context of " << config_.max_len);
  const Tensor positions = Tensor::from_values<int32_t>({ids.rows(), 1}, std::vector<int32_t>(lengths.begin(), lengths.end()));  // [batch, 1]
  Tensor x = tok_embed->forward(ids.ids);  // [batch, 1, d_model]
  if (pos_embed) x = ops::add(x, ops::embedding(pos_embed->weight, positions));
  if (sinusoids) x = sinusoids->forward(x, positions);
  ops::AttentionMask causal;
  causal.causal = true;
  return blocks->forward(dropout(x, config_.dropout), causal, &caches);  // [batch, 1, d_model]
}

int64_t GPT::keep_product_copies_only() {
  autograd::NoGradGuard no_grad;
  ops::AttentionMask causal;
  causal.causal = true;
  Tensor x = Tensor::zeros({1, 1, config_.d_model}, device());  // (the copies are of the weights: any input makes them)
  int64_t released = 0;
  for (const auto& layer : blocks->layers) {
    nn::KVCache cache;  // (as generation runs it)
    x = layer->forward(x, causal, &cache);
    released += release_product_weights();
  }
  logits(x);
  return released + release_product_weights();
}

void GPT::init_parameters(Rng& rng) {
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.layers));
  for (auto& [name, p] : named_parameters()) {
    if (p.dim() < 2) continue;  // biases 0, LayerNorm gains 1 from construction
    const bool residual_out = name.ends_with("out_proj.weight") || name.ends_with("linear2.weight");
    ops::normal_(p, residual_out ? residual_std : 0.02f, rng);
  }
}

}  // namespace tfm::models
