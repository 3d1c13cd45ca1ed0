#pragma once
// Multi-head attention (paper section 3.2.2) with PyTorch's nn.MultiheadAttention
// parameter layout: one packed in_proj for Q, K and V, and out_proj.
#include <memory>
#include <optional>
#include <vector>

#include "nn/layers.h"
#include "ops/attention.h"
#include "ops/rotary.h"

namespace tfm::nn {

// Keys and values kept between decoding steps so that a step costs one position.
// Self-attention appends each step's projections; encoder-decoder attention
// projects the memory once, on the first step, and reuses it.
//
// Vectors stay where they were written. Beam search reorders its hypotheses by
// rewriting `rows`, an index per batch row and position (ops::attention's key_rows),
// never the vectors: a step moves a few bytes per position instead of 2 * d_model floats.
//
// Ragged (a Generator's running batch, decode::GenerationBatch): batch row b is the
// sequence kept in row slots[b] of k and v, with its own lengths[b] positions; each
// step appends one position to every row, after its own, and attention masks the
// positions a row has not reached. Sequences join (adopt) and leave (release) between steps.
struct KVCache {
  Tensor k, v;  // [written rows, capacity, d_model] views; the first `length` positions are valid
  int64_t length = 0;  // ragged: the longest row's
  Tensor rows;  // i32 [batch, length]: the row of k, v holding batch row b's position j; undefined: row b
  std::vector<int64_t> slots, lengths;  // ragged: batch row b's row of k and v, and its positions
  // Batch row r becomes the old row order[r] (i64 [n]; beam search keeps the beams it extends).
  void select_rows(const Tensor& order);

  bool ragged() const { return !slots.empty(); }
  // Row `row` of sequences run as one aligned batch (`run`, not ragged: a sequence run
  // alone, or prompts of one length run together) joins as the last batch row.
  void adopt(const KVCache& run, int64_t row = 0);
  // Batch row b leaves; the rows after it move up.
  void release(int64_t b);
};

// An optional output of a stack's forward: each layer's attention probabilities
// [batch, heads, tq, tk] (before dropout), in layer order; `cross` for the
// encoder-decoder attention of decoder layers. Modules keep nothing between calls, so a
// caller that wants the maps asks for them.
struct AttentionMaps {
  std::vector<Tensor> self, cross;
};

// What sets an attention apart from the paper's (the defaults are the paper's): fewer
// key/value heads than query heads, each shared by a group of them (grouped-query
// attention: Llama 2 70B, Llama 3, Mistral, Qwen2); projections without biases (Llama),
// or with them on the queries, keys and values only (Qwen2); rotary positions.
struct AttentionOptions {
  int64_t kv_heads = 0;  // 0: as many as query heads
  bool qkv_bias = true, out_bias = true;
  std::optional<ops::Rope> rope;  // self-attention's queries and keys turned by their positions
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t heads, float dropout, const AttentionOptions& options = {});

  // query: [batch, tq, d_model], key/value: [batch, tk, d_model] -> [batch, tq, d_model].
  // Pass the same tensor as query, key and value for self-attention, and the same
  // tensor as key and value for encoder-decoder attention: projections are fused then.
  // With a cache (inference only), self-attention attends to the cached prefix plus
  // the new positions, and encoder-decoder attention reuses the projected memory.
  // Rotary positions count from the cache's length (a ragged row's from its own).
  // `weights`, where given, receives the attention probabilities [batch, heads, tq, tk].
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const ops::AttentionMask& mask,
                 KVCache* cache = nullptr, Tensor* weights = nullptr) const;
  int64_t heads() const { return heads_; }
  // Scores divided by `divisor` besides sqrt(d_k) (GPT-2's scale_attn_by_inverse_layer_idx:
  // the layer's 1-based index), by scaling the queries.
  void divide_scores(float divisor) { query_scale_ = 1.0f / divisor; }

  Tensor in_proj_weight;  // [d_model + 2 * kv_width, d_model]: rows of W_q, W_k, W_v
  Tensor in_proj_bias;    // [d_model + 2 * kv_width], or undefined without qkv_bias
  // LoRA adapters of in_proj's q, k and v blocks (models::LoraAdapter attaches them; their
  // parameters are the adapter's, not this module's); empty: none.
  LoraBlocks in_proj_lora;
  std::shared_ptr<Linear> out_proj;

 private:
  // Rows [begin, end) of the packed projection applied to x.
  Tensor project(const Tensor& x, int64_t begin, int64_t end) const;
  // The new queries and keys [batch, t, width] turned by their positions.
  Tensor turned(const Tensor& x, const KVCache* cache) const;

  int64_t d_model_, heads_, kv_heads_, kv_width_;  // kv_width_: a key's (and value's) width
  std::optional<ops::Rope> rope_;
  Tensor rotary_freq_;  // [d_k / 2] with rope_ (a buffer: moved with the model)
  float dropout_;
  float query_scale_ = 1.0f;
};

}  // namespace tfm::nn
