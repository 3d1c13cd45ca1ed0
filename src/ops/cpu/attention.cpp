// The fused attention kernels: scores, mask, softmax, dropout and the weighted sum of
// the values per query row and head, never writing a [tq, tk] block of scores twice.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "ops/cpu/gemm.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/rows.h"
#include "ops/cpu/vec_math.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

namespace {

// Keys that query i sees of a sequence of `keys` keys and `queries` queries: all of them,
// or up to the causal horizon (0 or more).
int64_t visible_keys(int64_t keys, int64_t queries, bool causal, int64_t i) {
  return causal ? std::max<int64_t>(0, std::min(keys, i + keys - queries + 1)) : keys;
}

// Geometry of one operand that may be a strided view: [batch, time, heads * d_k], or
// packed sequences [1, rows, heads * d_k] (row i of sequence b is row start[b] + i).
struct Operand {
  const float* base;
  int64_t batch_stride, row_stride;
  const PackedSequences* packed;
  int64_t time;  // the padded length: a packed operand's longest sequence
  const float* row(int64_t b, int64_t i) const {
    return base + (packed ? (packed->start[b] + i) * row_stride : b * batch_stride + i * row_stride);
  }
  float* row(int64_t b, int64_t i) { return const_cast<float*>(std::as_const(*this).row(b, i)); }
  int64_t length(int64_t b) const { return packed ? packed->length[b] : time; }
};

Operand operand(const Tensor& t, const PackedSequences* packed) {
  return {t.data(), t.strides()[0], t.strides()[1], packed, packed ? packed->longest() : t.size(1)};
}

// The sizes of one call: D the queries' width, heads of dk values; `group` query heads
// share each K/V head (grouped-query attention), whose rows are kv_width wide.
struct Geometry {
  int64_t B, tq, tk, D, heads, dk, group, kv_width;
  float scale;
  int64_t kv_column(int64_t h) const { return h / group * dk; }  // query head h's keys and values
};

Geometry geometry(const AttentionCall& c, const Operand& oq, const Operand& ok) {
  const int64_t B = c.mask->packed_queries ? c.mask->packed_queries->batch() : c.q.size(0), D = c.q.size(2);
  const int64_t dk = D / c.heads;
  return {B, oq.time, ok.time, D, c.heads, dk, c.heads / c.kv_heads, dk * c.kv_heads, 1.0f / std::sqrt(static_cast<float>(dk))};
}

// What FlashAttention's reference (below) needs of a call to score and mask one query
// row the same way in both directions.
struct FlashRows {
  Geometry geo;
  Operand q, k, v;
  const bool* padding;  // [B, tk], or null
  bool causal;
  float dropout_p;
  DropoutKey dropout;

  int64_t visible(int64_t b, int64_t i) const { return visible_keys(k.length(b), q.length(b), causal, i); }
  // s[j] for j < k.length(b): query (b, h, i)'s scaled score of key j, -inf where masked.
  void scores(int64_t b, int64_t h, int64_t i, float* s) const {
    const float* qi = q.row(b, i) + h * geo.dk;
    for (int64_t j = 0; j < k.length(b); ++j) {
      const bool seen = j < visible(b, i) && !(padding && padding[b * geo.tk + j]);
      s[j] = seen ? geo.scale * vec::dot(qi, k.row(b, j) + geo.kv_column(h), geo.dk) : -std::numeric_limits<float>::infinity();
    }
  }
  // What dropout multiplies probability (b, h, i, j) by: 0, or 1 / (1 - p) (dropout_row's rule).
  float keep(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (dropout_p == 0.0f) return 1.0f;
    const uint64_t first = dropout_index(dropout.first_row + b, attention_dropout_place(h, i, 0));
    return hash_uniform(dropout.key, first + static_cast<uint64_t>(j)) < dropout_p ? 0.0f : 1.0f / (1.0f - dropout_p);
  }
};

FlashRows flash_rows(const AttentionCall& c) {
  const AttentionMask& mask = *c.mask;
  const Operand q = operand(c.q, mask.packed_queries.get()), k = operand(c.k, mask.packed_keys.get());
  return {geometry(c, q, k), q, k, operand(c.v, mask.packed_keys.get()),
          mask.key_padding.defined() ? mask.key_padding.data_as<bool>() : nullptr, mask.causal, c.dropout_p, c.dropout_key};
}

}  // namespace

void attention(const AttentionCall& c, Tensor& out, Tensor& probs) {
  const AttentionMask& mask = *c.mask;
  const PackedSequences *packed_q = mask.packed_queries.get(), *packed_k = mask.packed_keys.get();
  const Operand oq = operand(c.q, packed_q), ok = operand(c.k, packed_k), ov = operand(c.v, packed_k);
  Operand oo = operand(out, packed_q);
  const Geometry geo = geometry(c, oq, ok);
  const int64_t B = geo.B, tq = geo.tq, tk = geo.tk, D = geo.D, heads = geo.heads, dk = geo.dk;
  const float scale = geo.scale, dropout_p = c.dropout_p;
  const uint64_t dropout_key = c.dropout_key.key;
  const int64_t first_row = c.dropout_key.first_row;
  const int32_t* key_rows = c.key_rows.defined() ? c.key_rows.data_as<int32_t>() : nullptr;  // [B, tk]
  const bool* padding = mask.key_padding.defined() ? mask.key_padding.data_as<bool>() : nullptr;  // [B, tk]
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto visible_of = [&](int64_t b, int64_t i) { return visible_keys(ok.length(b), oq.length(b), mask.causal, i); };

  // Masks a row of scores of query row b, position i, and normalises it in place;
  // returns the probabilities to weight the values with: the row itself, or under
  // dropout a masked copy in `dropped` (P stays intact: users inspect it, backward needs it).
  auto probabilities = [&](float* row, int64_t b, int64_t h, int64_t i, float* dropped) -> const float* {
    const int64_t visible = visible_of(b, i);
    for (int64_t j = 0; j < tk; ++j)
      if (j >= visible || (padding && padding[b * tk + j])) row[j] = neg_inf;
    softmax_row(row, row, tk);
    if (dropout_p == 0.0f) return row;
    dropout_row(row, dropped, tk, dropout_p, dropout_key, dropout_index(first_row + b, attention_dropout_place(h, i, 0)));
    return dropped;
  };

  // Few keys per query (every decoding step, Multi30k's sentences) go by dot products
  // per query and key: two GEMM calls per head cost more to make than to compute at
  // that size (4,000 tokens on 2 cores: 16 keys in 763 vs 1,425 us, 32 in 1,241 vs
  // 1,214; causal 48 in 1,567 vs 1,972). Up to 48 keys they stay a third slower at
  // most (40 keys: 1,529 vs 1,363 us; 48: 1,934 vs 1,443), which spares a translation
  // of such sentences the first sgemm call's one-time 39 ms set-up (64 keys: 3,152 vs
  // 1,682 us).
  const bool by_dot_products = tq == 1 || (mask.causal ? tk / 2 : tk) <= 48;
  // A decoding step of one sentence is a few microseconds of work: less than waking
  // the second core costs (~3 us).
  parallel_region(B * tq * tk * D > (1 << 15), [&] {
    std::vector<float> scratch(dropout_p > 0.0f ? (by_dot_products ? tk : tq * tk) : 0);
    // Query i of row b, head h, against the keys and values rows[j] + h * dk.
    std::vector<const float*> key(tk), value(tk);
    auto gather_rows = [&](int64_t b) {
      for (int64_t j = 0; j < ok.length(b); ++j) {
        const int64_t row = key_rows ? key_rows[b * tk + j] : b;
        key[j] = ok.row(row, j), value[j] = ov.row(row, j);
      }
    };
    auto attend = [&](int64_t b, int64_t h, int64_t i) {
      // Keys after the causal horizon get no probability: neither scored nor summed.
      const int64_t visible = visible_of(b, i);
      float* p = probs.data() + ((b * heads + h) * tq + i) * tk;
      const float* qi = oq.row(b, i) + h * dk;
      const int64_t kv = geo.kv_column(h);
      int64_t j = 0;
      for (; j + 8 <= visible; j += 8) vec::scaled_dot8(qi, key.data() + j, kv, dk, scale, p + j);
      for (; j < visible; ++j) p[j] = scale * vec::dot(qi, key[j] + kv, dk);
      const float* pd = probabilities(p, b, h, i, scratch.data());
      vec::weighted_row_sum(pd, value.data(), kv, visible, dk, oo.row(b, i) + h * dk);
    };
    if (tq == 1) {  // a decoding step: each row's keys and values read once, whole, for all heads
#pragma omp for schedule(static)
      for (int64_t b = 0; b < B; ++b) {
        gather_rows(b);
        for (int64_t h = 0; h < heads; ++h) attend(b, h, 0);
      }
    } else if (by_dot_products) {  // a head's slices of the keys stay in L1 across the queries
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < heads; ++h) {
          gather_rows(b);
          for (int64_t i = 0; i < oq.length(b); ++i) attend(b, h, i);
        }
    } else {
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t tq_b = oq.length(b), tk_b = ok.length(b);
          float* p = probs.data() + (b * heads + h) * tq * tk;
          gemm(false, true, tq_b, tk_b, dk, scale, oq.row(b, 0) + h * dk, oq.row_stride, ok.row(b, 0) + geo.kv_column(h), ok.row_stride, 0.0f, p, tk);
          for (int64_t i = 0; i < tq_b; ++i)
            probabilities(p + i * tk, b, h, i, dropout_p > 0.0f ? scratch.data() + i * tk : nullptr);
          gemm(false, false, tq_b, dk, tk_b, 1.0f, dropout_p > 0.0f ? scratch.data() : p, tk, ov.row(b, 0) + geo.kv_column(h), ov.row_stride, 0.0f,
               oo.row(b, 0) + h * dk, D);
        }
    }
  });
}

void attention_backward(const AttentionCall& c, const Tensor& probs, const Tensor& g, Tensor& dq, Tensor& dk_out, Tensor& dv) {
  const PackedSequences *packed_q = c.mask->packed_queries.get(), *packed_k = c.mask->packed_keys.get();
  const Operand oq = operand(c.q, packed_q), ok = operand(c.k, packed_k), ov = operand(c.v, packed_k);
  const Operand og = operand(g, packed_q);
  Operand odq = operand(dq, packed_q), odk = operand(dk_out, packed_k), odv = operand(dv, packed_k);
  const Geometry geo = geometry(c, oq, ok);
  const int64_t B = geo.B, tq = geo.tq, tk = geo.tk, D = geo.D, heads = geo.heads, dk = geo.dk, group = geo.group, kv_width = geo.kv_width;
  const float scale = geo.scale, dropout_p = c.dropout_p;
  const uint64_t dropout_key = c.dropout_key.key;
  const int64_t first_row = c.dropout_key.first_row;
  // A thread takes a K/V head and sums its gradients over the query heads that share
  // it in order (the first one's products write, the others' add): no two threads
  // write one row, and the sums' order is fixed.
#pragma omp parallel
  {
    std::vector<float> dp(tq * tk), scratch(dropout_p > 0.0f ? tq * tk : 0);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kvh = 0; kvh < heads / group; ++kvh)
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          const int64_t bh = b * heads + h, tq_b = oq.length(b), tk_b = ok.length(b), kv = kvh * dk;
          const float beta = h == kvh * group ? 0.0f : 1.0f;
          const float* p = probs.data() + bh * tq * tk;
          const float* go = og.row(b, 0) + h * dk;
          const float* pd = p;
          if (dropout_p > 0.0f) {
            for (int64_t i = 0; i < tq; ++i)
              dropout_row(p + i * tk, scratch.data() + i * tk, tk, dropout_p, dropout_key, dropout_index(first_row + b, attention_dropout_place(h, i, 0)));
            pd = scratch.data();
          }
          // dV = P_dropped^T dO ; dP_dropped = dO V^T
          gemm(true, false, tk_b, dk, tq_b, 1.0f, pd, tk, go, og.row_stride, beta, odv.row(b, 0) + kv, kv_width);
          gemm(false, true, tq_b, tk_b, dk, 1.0f, go, og.row_stride, ov.row(b, 0) + kv, ov.row_stride, 0.0f, dp.data(), tk);
          for (int64_t i = 0; i < tq_b; ++i) {
            float* dr = dp.data() + i * tk;
            const float* pr = p + i * tk;
            if (dropout_p > 0.0f) dropout_row(dr, dr, tk_b, dropout_p, dropout_key, dropout_index(first_row + b, attention_dropout_place(h, i, 0)));
            float dot = 0.0f;
            for (int64_t j = 0; j < tk_b; ++j) dot += dr[j] * pr[j];
            for (int64_t j = 0; j < tk_b; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;  // dS, scale folded in
          }
          gemm(false, false, tq_b, dk, tk_b, 1.0f, dp.data(), tk, ok.row(b, 0) + kv, ok.row_stride, 0.0f, odq.row(b, 0) + h * dk, D);
          gemm(true, false, tk_b, dk, tq_b, 1.0f, dp.data(), tk, oq.row(b, 0) + h * dk, oq.row_stride, beta, odk.row(b, 0) + kv, kv_width);
        }
  }
}

// FlashAttention-2's contract (ops/kernels.h) in plain loops: the reference that the
// GPU's kernels are checked against (and what ops::flash_attention runs on the CPU and
// the simulated device when called directly: the op table, OpsGrad). Never a fast
// path here: the CPU's kernels above keep a row's scores in cache, so ops::attention
// does not pick these on the CPU (Kernels::flash_attention_by_default).
void flash_attention(const AttentionCall& c, Tensor& out, Tensor& lse) {
  const FlashRows r = flash_rows(c);
  Operand o = operand(out, c.mask->packed_queries.get());
  const Geometry& geo = r.geo;
  const float neg_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < geo.B; ++b)
    for (int64_t h = 0; h < geo.heads; ++h) {
      std::vector<float> s(static_cast<size_t>(geo.tk));
      for (int64_t i = 0; i < geo.tq; ++i) {
        float& l = lse.data()[(b * geo.heads + h) * geo.tq + i];
        l = neg_inf;
        if (i >= r.q.length(b)) continue;  // past a packed sequence's end: no row of out
        float* oi = o.row(b, i) + h * geo.dk;
        std::fill(oi, oi + geo.dk, 0.0f);
        const int64_t keys = r.k.length(b);
        if (keys == 0) continue;
        r.scores(b, h, i, s.data());
        const float m = *std::max_element(s.begin(), s.begin() + keys);
        if (m == neg_inf) continue;  // no key seen: attend nowhere (out 0), as attention does
        float sum = 0.0f;
        for (int64_t j = 0; j < keys; ++j) sum += std::exp(s[j] - m);
        l = m + std::log(sum);
        for (int64_t j = 0; j < keys; ++j) {
          const float p = std::exp(s[j] - l) * r.keep(b, h, i, j);
          const float* vj = r.v.row(b, j) + geo.kv_column(h);
          if (p != 0.0f)
            for (int64_t d = 0; d < geo.dk; ++d) oi[d] += p * vj[d];
        }
      }
    }
}

// P recomputed from lse; dO . O_i = rowsum(dP_dropped P) (O = P_dropped V); dS = P (dP -
// that) scale; dQ = dS K, dK = dS^T Q, dV = P_dropped^T dO. A thread takes a batch row's
// K/V head and its query heads in order: no two threads write one row.
void flash_attention_backward(const AttentionCall& c, const Tensor& out, const Tensor& lse, const Tensor& g, Tensor& dq, Tensor& dk,
                              Tensor& dv) {
  const FlashRows r = flash_rows(c);
  const PackedSequences* packed_q = c.mask->packed_queries.get();
  const Operand o = operand(out, packed_q), og = operand(g, packed_q);
  Operand odq = operand(dq, packed_q), odk = operand(dk, c.mask->packed_keys.get()), odv = operand(dv, c.mask->packed_keys.get());
  const Geometry& geo = r.geo;
  std::fill(dk.data(), dk.data() + dk.numel(), 0.0f);
  std::fill(dv.data(), dv.data() + dv.numel(), 0.0f);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < geo.B; ++b)
    for (int64_t kvh = 0; kvh < geo.heads / geo.group; ++kvh) {
      std::vector<float> s(static_cast<size_t>(geo.tk));
      for (int64_t h = kvh * geo.group; h < (kvh + 1) * geo.group; ++h)
        for (int64_t i = 0; i < r.q.length(b); ++i) {
          const float l = lse.data()[(b * geo.heads + h) * geo.tq + i];
          const float *gi = og.row(b, i) + h * geo.dk, *qi = r.q.row(b, i) + h * geo.dk;
          float* dqi = odq.row(b, i) + h * geo.dk;
          std::fill(dqi, dqi + geo.dk, 0.0f);
          if (l == -std::numeric_limits<float>::infinity()) continue;  // a row that saw no key
          r.scores(b, h, i, s.data());
          const float row_dot = vec::dot(gi, o.row(b, i) + h * geo.dk, geo.dk);
          for (int64_t j = 0; j < r.k.length(b); ++j) {
            const float p = std::exp(s[j] - l), keep = r.keep(b, h, i, j);
            if (p == 0.0f) continue;
            const float *kj = r.k.row(b, j) + kvh * geo.dk, *vj = r.v.row(b, j) + kvh * geo.dk;
            const float ds = p * (vec::dot(gi, vj, geo.dk) * keep - row_dot) * geo.scale;
            float *dkj = odk.row(b, j) + kvh * geo.dk, *dvj = odv.row(b, j) + kvh * geo.dk;
            for (int64_t d = 0; d < geo.dk; ++d) dqi[d] += ds * kj[d], dkj[d] += ds * qi[d], dvj[d] += p * keep * gi[d];
          }
        }
    }
}

}  // namespace tfm::ops::cpu
