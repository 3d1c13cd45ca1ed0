#include "nn/attention.h"

#include <algorithm>
#include <vector>

#include "autograd/autograd.h"
#include "nn/trace.h"
#include "ops/convert.h"
#include "ops/embedding.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "tensor/rng.h"

namespace tfm::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, float dropout, const AttentionOptions& o)
    : d_model_(d_model), heads_(heads), kv_heads_(o.kv_heads ? o.kv_heads : heads), rope_(o.rope), dropout_(dropout) {
  TFM_CHECK(heads > 0 && d_model % heads == 0, "d_model " << d_model << " is not divisible by " << heads << " heads");
  TFM_CHECK(kv_heads_ > 0 && heads % kv_heads_ == 0, heads << " heads cannot share " << kv_heads_ << " key/value heads");
  kv_width_ = d_model / heads * kv_heads_;
  in_proj_weight = Tensor::untouched_zeros({d_model + 2 * kv_width_, d_model});
  register_parameter("in_proj_weight", in_proj_weight, ReadBy::products);
  if (o.qkv_bias) {
    in_proj_bias = Tensor::zeros({d_model + 2 * kv_width_});
    register_parameter("in_proj_bias", in_proj_bias);
  }
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, o.out_bias));
  if (rope_) {
    rotary_freq_ = ops::rotary_frequencies(d_model / heads, *rope_);
    register_buffer(rotary_freq_);
  }
}

Tensor MultiHeadAttention::project(const Tensor& x, int64_t begin, int64_t end) const {
  const Tensor bias = in_proj_bias.defined() ? ops::slice(in_proj_bias, 0, begin, end) : Tensor();
  const Tensor y = ops::linear(x, ops::slice(in_proj_weight, 0, begin, end), bias, products());
  return in_proj_lora.empty() ? y : in_proj_lora.add_to(y, x, begin, end);
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

// t[row, begin:end] as [1, end - begin, d].
Tensor cell(const Tensor& t, int64_t row, int64_t begin, int64_t end) { return ops::slice(ops::slice(t, 0, row, row + 1), 1, begin, end); }

// Storage for at least `rows` rows of `positions` positions, keeping the first `keep`
// positions of the rows written so far. Grown by half (in steps of 16 positions)
// rather than doubled: beam 4 at batch 32 holds 128 rows per layer, and a doubled
// cache for 40 positions has room for 64 (a batch per thread: 270 -> 253 MiB peak).
// The copies cost nothing measurable. Zeros, not whatever the allocator last held: a
// ragged batch's rows attend over the positions others have reached with probability
// 0, and 0 times a stale -inf (a freed tensor's masked score) is NaN (the generator's
// continuous batching failed so, now and then, under load).
void reserve(KVCache& c, int64_t rows, int64_t positions, int64_t keep, int64_t d, Device device) {
  const int64_t written = c.k.defined() ? c.k.size(0) : 0, capacity = c.k.defined() ? c.k.size(1) : 0;
  if (rows <= written && positions <= capacity) return;
  const int64_t grown = positions <= capacity ? capacity : (std::max(positions, capacity + capacity / 2) + 15) / 16 * 16;
  auto grow = [&](const Tensor& old) {
    Tensor storage = Tensor::zeros({std::max(rows, written), grown, d}, device);
    if (keep > 0 && written > 0) window(storage, written, 0, keep).copy_from(ops::slice(old, 1, 0, keep));
    return storage;
  };
  c.k = grow(c.k), c.v = grow(c.v);
}

// Writes new keys/values [batch, t, d] at positions [length, length + t) of the cache,
// rows 0..batch-1, growing it as needed (in positions, and in rows when beam search's
// first step, one row per sentence, has branched into K beams). A row's positions are
// contiguous, so that attention reads each row's keys as one stream.
void append(KVCache& c, const Tensor& k, const Tensor& v) {
  const int64_t batch = k.size(0), t = k.size(1), d = k.size(2);
  const int64_t written = c.k.defined() ? c.k.size(0) : batch;
  TFM_CHECK(batch == written || c.rows.defined(), "KVCache: " << batch << " rows appended to a cache of " << written);
  reserve(c, batch, c.length + t, c.length, d, k.device());
  window(c.k, batch, c.length, c.length + t).copy_from(k);
  window(c.v, batch, c.length, c.length + t).copy_from(v);
  if (c.rows.defined()) c.rows = ops::concat({c.rows, own_rows(batch, t, k.device())}, 1);  // new positions: rows 0..batch-1
  c.length += t;
}

// Ragged: each batch row's new position [batch, 1, d] after its own.
void append_ragged(KVCache& c, const Tensor& k, const Tensor& v) {
  const int64_t batch = k.size(0), d = k.size(2);
  TFM_CHECK(k.size(1) == 1 && batch == static_cast<int64_t>(c.slots.size()),
            "KVCache: a ragged batch of " << c.slots.size() << " rows takes one position per row, got " << shape_str(k.shape()));
  const int64_t longest = *std::max_element(c.lengths.begin(), c.lengths.end()) + 1;
  reserve(c, c.k.size(0), longest, c.k.size(1), d, k.device());
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t at = c.lengths[b]++;
    cell(c.k, c.slots[b], at, at + 1).copy_from(ops::slice(k, 0, b, b + 1));
    cell(c.v, c.slots[b], at, at + 1).copy_from(ops::slice(v, 0, b, b + 1));
  }
  c.length = longest;
}

// Ragged: where each batch row's keys are (i32 [batch, length]: its slot throughout),
// and the positions it has not reached (bool [batch, length]).
std::pair<Tensor, Tensor> ragged_rows_and_padding(const KVCache& c, Device device) {
  const int64_t batch = static_cast<int64_t>(c.slots.size());
  Tensor rows = Tensor::empty({batch, c.length}, DType::i32), padding = Tensor::empty({batch, c.length}, DType::boolean);
  int32_t* r = rows.data_as<int32_t>();
  bool* p = padding.data_as<bool>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < c.length; ++j) r[b * c.length + j] = static_cast<int32_t>(c.slots[b]), p[b * c.length + j] = j >= c.lengths[b];
  return {ops::to(rows, device), ops::to(padding, device)};
}

// Where the new positions of x [batch, t, ...] stand (i32 [batch or 1, t]): after the
// cache's, each ragged row's after its own.
Tensor positions_after(const KVCache* cache, const Tensor& x) {
  if (cache && cache->ragged())
    return ops::to(Tensor::from_values<int32_t>({x.size(0), 1}, std::vector<int32_t>(cache->lengths.begin(), cache->lengths.end())), x.device());
  const int64_t start = cache ? cache->length : 0;
  return ops::reshape(ops::arange(start, start + x.size(1), x.device()), {1, x.size(1)});
}

}  // namespace

Tensor MultiHeadAttention::turned(const Tensor& x, const KVCache* cache) const {
  return ops::rotary(x, positions_after(cache, x), rotary_freq_, rope_->layout);
}

void KVCache::adopt(const KVCache& run, int64_t row) {
  TFM_CHECK(!run.ragged() && run.k.defined() && row >= 0 && row < run.k.size(0) && !run.rows.defined(),
            "KVCache: only a row of sequences run as one aligned batch joins a ragged batch");
  TFM_CHECK(ragged() || !k.defined() || length == 0, "KVCache: a sequence joins a ragged batch, not an aligned one");
  int64_t slot = 0;  // the first row of k and v that no batch row holds
  while (std::find(slots.begin(), slots.end(), slot) != slots.end()) ++slot;
  const int64_t d = run.k.size(2);
  reserve(*this, slot + 1, run.length, k.defined() ? k.size(1) : 0, d, run.k.device());
  cell(k, slot, 0, run.length).copy_from(cell(run.k, row, 0, run.length));
  cell(v, slot, 0, run.length).copy_from(cell(run.v, row, 0, run.length));
  slots.push_back(slot), lengths.push_back(run.length);
  length = std::max(length, run.length);
}

void KVCache::release(int64_t b) {
  TFM_CHECK(b >= 0 && b < static_cast<int64_t>(slots.size()), "KVCache: no batch row " << b << " to release");
  slots.erase(slots.begin() + b), lengths.erase(lengths.begin() + b);
  length = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const ops::AttentionMask& mask,
                                   KVCache* cache, Tensor* weights) const {
  TFM_CHECK(!cache || !autograd::grad_enabled(), "attention caches are for inference (under NoGradGuard)");
  const int64_t D = d_model_, KV = kv_width_;
  const bool self = query.same(key) && key.same(value);
  TFM_CHECK(self || !rope_, "rotary positions are for self-attention");
  TFM_CHECK(!rope_ || !mask.packed_queries, "rotary positions of packed sequences are not supported");
  Tensor q, k, v;
  if (self) {
    Tensor qkv = project(query, 0, D + 2 * KV);  // [batch, t, d_model + 2 kv_width]
    q = ops::slice(qkv, 2, 0, D), k = ops::slice(qkv, 2, D, D + KV), v = ops::slice(qkv, 2, D + KV, D + 2 * KV);
    if (rope_) q = turned(q, cache), k = turned(k, cache);  // (the cache keeps turned keys, as transformers')
    if (cache) {  // attend to the cached prefix and the new positions
      cache->ragged() ? append_ragged(*cache, k, v) : append(*cache, k, v);
      k = ops::slice(cache->k, 1, 0, cache->length), v = ops::slice(cache->v, 1, 0, cache->length);
    }
  } else if (key.same(value)) {
    q = project(query, 0, D);
    if (cache && cache->length > 0) {  // memory already projected
      k = cache->k, v = cache->v;
    } else {
      Tensor kv = project(key, D, D + 2 * KV);  // [batch, tk, 2 kv_width]
      k = ops::slice(kv, 2, 0, KV), v = ops::slice(kv, 2, KV, 2 * KV);
      if (cache) cache->k = k, cache->v = v, cache->length = k.size(1);
    }
  } else {
    TFM_CHECK(!cache, "attention caches need self-attention or shared keys and values");
    q = project(query, 0, D), k = project(key, D, D + KV), v = project(value, D + KV, D + 2 * KV);
  }
  if (query_scale_ != 1.0f) q = ops::scale(q, query_scale_);
  const float p = training() ? dropout_ : 0.0f;
  const DropoutKey key_seed = p > 0.0f ? dropout_key() : DropoutKey();
  if (cache && cache->ragged()) {  // each row's own positions, up to its own length
    ops::AttentionMask ragged = mask;
    auto [rows, padding] = ragged_rows_and_padding(*cache, q.device());
    ragged.key_padding = padding;
    return trace(path(), out_proj->forward(ops::attention(q, k, v, {heads_, kv_heads_}, ragged, p, key_seed, weights, rows)));
  }
  Tensor context = ops::attention(q, k, v, {heads_, kv_heads_}, mask, p, key_seed, weights, cache ? cache->rows : Tensor());  // [batch, tq, d_model]
  return trace(path(), out_proj->forward(context));
}

}  // namespace tfm::nn
