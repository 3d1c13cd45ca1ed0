#pragma once
// Fused multi-head scaled dot-product attention:
//   softmax(Q K^T / sqrt(d_k) + mask) -> dropout -> weighted sum of V, per head.
#include <cstdint>

#include "ops/attention_mask.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace tfm::ops {

// The heads of the queries and of the keys and values. Multi-head attention has as many
// of each; grouped-query attention (Llama, Mistral, Qwen2) shares each K/V head among
// query / kv query heads, multi-query attention one among all: query head h reads K/V
// head h / (query / kv), which is never copied per query head.
struct AttentionHeads {
  int64_t query, kv;
  AttentionHeads(int64_t heads) : query(heads), kv(heads) {}  // NOLINT(google-explicit-constructor): multi-head
  AttentionHeads(int64_t query_heads, int64_t kv_heads) : query(query_heads), kv(kv_heads) {}
};

// q: [batch, tq, heads * d_k], k and v: [batch, tk, kv_heads * d_k]. Each may be a view
// with any row stride (e.g. a slice of a fused QKV projection) but unit stride in
// its last dimension; head h uses columns [h * d_k, (h + 1) * d_k).
// Returns [batch, tq, heads * d_k], heads concatenated. If `weights` is non-null
// it receives the attention probabilities [batch, heads, tq, tk] (before dropout).
// Packed queries (mask.packed_queries) make q and the result [1, rows, heads * d_k];
// packed keys, k and v. tq and tk are then the longest sequence's length, and
// weights beyond a sequence's length are 0.
//
// key_rows (decoding: one query per row, no gradient; i32 [batch, tk]) says where each
// query row's keys are: key j of query row b is row key_rows[b, j] of k and v, which
// may then have any number of rows. A cache keeps its vectors where they were written
// and beam search reorders its hypotheses by rewriting this index alone.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionHeads heads, const AttentionMask& mask,
                 float dropout_p = 0.0f, DropoutKey dropout_key = {}, Tensor* weights = nullptr, const Tensor& key_rows = Tensor());

// The same attention (without weights and key_rows) by FlashAttention-2's rule: the
// probabilities are never stored, only each query row's log-sum-exp, from which the
// backward recomputes them; memory linear in the sequence rather than quadratic.
// attention() itself goes this way where the device prefers it (the GPU) and nobody asks
// for the probabilities; TFM_FLASH_ATTENTION=0 in the environment turns that off.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionHeads heads, const AttentionMask& mask,
                       float dropout_p = 0.0f, DropoutKey dropout_key = {});

}  // namespace tfm::ops
