#include "nn/attention.h"

#include <algorithm>

#include "autograd/autograd.h"
#include "nn/trace.h"
#include "ops/convert.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, float dropout)
    : d_model_(d_model), heads_(heads), dropout_(dropout) {
  TFM_CHECK(heads > 0 && d_model % heads == 0, "d_model " << d_model << " is not divisible by " << heads << " heads");
  in_proj_weight = Tensor::zeros({3 * d_model, d_model});
  register_parameter("in_proj_weight", in_proj_weight);
  in_proj_bias = Tensor::zeros({3 * d_model});
  register_parameter("in_proj_bias", in_proj_bias);
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_model, d_model));
}

namespace {

// i32 [batch, count]: b throughout row b (batch row b's positions held in row b).
Tensor own_rows(int64_t batch, int64_t count, Device device) {
  Tensor ids = Tensor::empty({batch, count}, DType::i32);
  int32_t* p = ids.data_as<int32_t>();
  for (int64_t b = 0; b < batch; ++b) std::fill_n(p + b * count, count, static_cast<int32_t>(b));
  return ops::to(ids, device);
}

}  // namespace

void KVCache::select_rows(const Tensor& order) {
  if (!k.defined()) return;
  // Until now batch row b's positions were all in row b of k and v.
  if (!rows.defined()) rows = own_rows(k.size(0), length, k.device());
  rows = ops::gather_rows(rows, order);
}

namespace {

// t[:rows, begin:end] of a cache tensor [rows, positions, d].
Tensor window(const Tensor& t, int64_t rows, int64_t begin, int64_t end) { return ops::slice(ops::slice(t, 0, 0, rows), 1, begin, end); }

// Writes new keys/values [batch, t, d] at positions [length, length + t) of the cache,
// rows 0..batch-1, growing it as needed (in positions, and in rows when beam search's
// first step, one row per sentence, has branched into K beams). A row's positions are
// contiguous, so that attention reads each row's keys as one stream.
void append(KVCache& c, const Tensor& k, const Tensor& v) {
  const int64_t batch = k.size(0), t = k.size(1), d = k.size(2);
  const int64_t written = c.k.defined() ? c.k.size(0) : batch;
  TFM_CHECK(batch == written || c.rows.defined(), "KVCache: " << batch << " rows appended to a cache of " << written);
  if (!c.k.defined() || c.k.size(1) < c.length + t || batch > written) {
    // Grown by half (in steps of 16 positions) rather than doubled: beam 4 at batch 32
    // holds 128 rows per layer, and a doubled cache for 40 positions has room for 64
    // (a batch per thread: 270 -> 253 MiB peak). The copies cost nothing measurable.
    const int64_t old_capacity = c.k.defined() ? c.k.size(1) : 0;
    const int64_t capacity = c.length + t <= old_capacity ? old_capacity
                                                          : (std::max(c.length + t, old_capacity + old_capacity / 2) + 15) / 16 * 16;
    auto grow = [&](const Tensor& old) {
      Tensor storage = Tensor::empty({std::max(written, batch), capacity, d});
      if (c.length > 0) window(storage, written, 0, c.length).copy_from(ops::slice(old, 1, 0, c.length));
      return storage;
    };
    c.k = grow(c.k), c.v = grow(c.v);
  }
  window(c.k, batch, c.length, c.length + t).copy_from(k);
  window(c.v, batch, c.length, c.length + t).copy_from(v);
  if (c.rows.defined()) c.rows = ops::concat({c.rows, own_rows(batch, t, k.device())}, 1);  // new positions: rows 0..batch-1
  c.length += t;
}

}  // namespace

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const ops::AttentionMask& mask,
                                   KVCache* cache, Tensor* weights) const {
  TFM_CHECK(!cache || !autograd::grad_enabled(), "attention caches are for inference (under NoGradGuard)");
  const int64_t D = d_model_;
  auto project = [&](const Tensor& x, int64_t first, int64_t count) {  // rows [first, first+count) of the packed weights
    const int64_t begin = first * D, end = (first + count) * D;
    return ops::linear(x, ops::slice(in_proj_weight, 0, begin, end), ops::slice(in_proj_bias, 0, begin, end), products());
  };
  Tensor q, k, v;
  if (query.same(key) && key.same(value)) {
    Tensor qkv = project(query, 0, 3);  // [batch, t, 3 * d_model]
    q = ops::slice(qkv, 2, 0, D), k = ops::slice(qkv, 2, D, 2 * D), v = ops::slice(qkv, 2, 2 * D, 3 * D);
    if (cache) {  // attend to the cached prefix and the new positions
      append(*cache, k, v);
      k = ops::slice(cache->k, 1, 0, cache->length), v = ops::slice(cache->v, 1, 0, cache->length);
    }
  } else if (key.same(value)) {
    q = project(query, 0, 1);
    if (cache && cache->length > 0) {  // memory already projected
      k = cache->k, v = cache->v;
    } else {
      Tensor kv = project(key, 1, 2);  // [batch, tk, 2 * d_model]
      k = ops::slice(kv, 2, 0, D), v = ops::slice(kv, 2, D, 2 * D);
      if (cache) cache->k = k, cache->v = v, cache->length = k.size(1);
    }
  } else {
    TFM_CHECK(!cache, "attention caches need self-attention or shared keys and values");
    q = project(query, 0, 1), k = project(key, 1, 1), v = project(value, 2, 1);
  }
  const float p = training() ? dropout_ : 0.0f;
  const uint64_t key_seed = p > 0.0f ? dropout_rng().next_u64() : 0;
  Tensor context = ops::attention(q, k, v, heads_, mask, p, key_seed, weights, cache ? cache->rows : Tensor());  // [batch, tq, d_model]
  return trace(path(), out_proj->forward(context));
}

}  // namespace tfm::nn
