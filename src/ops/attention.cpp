#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "threads/parallel.h"
#include "ops/softmax.h"
#include "ops/vec_math.h"
#include "tensor/error.h"

namespace tfm::ops {

int64_t PackedSequences::longest() const { return length.empty() ? 0 : *std::max_element(length.begin(), length.end()); }

namespace {

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
  int64_t length(int64_t b) const { return packed ? packed->length[b] : time; }
};

Operand operand(const Tensor& t, const char* name, const PackedSequences* packed) {
  TFM_CHECK(t.dim() == 3 && t.strides()[2] == 1, "attention: " << name << " must be [batch, time, heads*d_k] with unit last stride, got "
                                                                << shape_str(t.shape()));
  if (packed) {
    int64_t rows = 0;
    for (int64_t b = 0; b < packed->batch(); ++b) {
      TFM_CHECK(packed->start[b] == rows && packed->length[b] > 0, "attention: packed sequences must be non-empty and follow one another");
      rows += packed->length[b];
    }
    TFM_CHECK(t.size(0) == 1 && t.size(1) == rows, "attention: packed " << name << " must be [1, " << rows << ", heads*d_k], got "
                                                                         << shape_str(t.shape()));
  }
  return {t.data(), t.strides()[0], t.strides()[1], packed, packed ? packed->longest() : t.size(1)};
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionMask& mask, float dropout_p,
                 uint64_t dropout_key, Tensor* weights, const int32_t* key_rows) {
  const PackedSequences *packed_q = mask.packed_queries.get(), *packed_k = mask.packed_keys.get();
  Operand oq = operand(q, "q", packed_q), ok = operand(k, "k", packed_k), ov = operand(v, "v", packed_k);
  const int64_t B = packed_q ? packed_q->batch() : q.size(0), tq = oq.time, tk = ok.time, D = q.size(2);
  TFM_CHECK(heads > 0 && D % heads == 0, "attention: model width " << D << " not divisible by " << heads << " heads");
  TFM_CHECK((key_rows || (packed_k ? packed_k->batch() : k.size(0)) == B) && v.size(0) == k.size(0) && v.size(1) == k.size(1) &&
                k.size(2) == D && v.size(2) == D,
            "attention: q " << shape_str(q.shape()) << ", k " << shape_str(k.shape()) << ", v " << shape_str(v.shape()) << " do not match");
  TFM_CHECK(!key_rows || (tq == 1 && !packed_q && !packed_k && !autograd::grad_enabled()),
            "attention: indexed keys are for decoding one query per row, without gradient");
  TFM_CHECK(mask.key_padding.empty() || (!packed_k && static_cast<int64_t>(mask.key_padding.size()) == B * tk),
            "attention: padding mask has " << mask.key_padding.size() << " entries for " << B << "x" << tk << " keys");
  TFM_CHECK(!mask.causal || tk >= tq, "attention: causal mask needs at least as many keys as queries");
  TFM_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, "attention: dropout " << dropout_p << " outside [0, 1)");
  const int64_t dk = D / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Keys that query i of row b sees: its sequence's, up to the causal horizon.
  auto visible_keys = [&](int64_t b, int64_t i) {
    const int64_t keys = ok.length(b);
    return mask.causal ? std::min(keys, i + keys - oq.length(b) + 1) : keys;
  };

  // A packed sequence's rows past its length are never written: they stay 0.
  Tensor probs = packed_q ? Tensor::zeros({B, heads, tq, tk}) : Tensor::empty({B, heads, tq, tk});
  Tensor out = Tensor::empty(packed_q ? Shape{1, q.size(1), D} : Shape{B, tq, D});
  const Operand oo = operand(out, "out", packed_q);
  auto out_row = [&](int64_t b, int64_t i) { return const_cast<float*>(oo.row(b, i)); };

  // Masks a row of scores of query row b, position i, and normalises it in place;
  // returns the probabilities to weight the values with: the row itself, or under
  // dropout a masked copy in `dropped` (P stays intact: users inspect it, backward needs it).
  auto probabilities = [&](float* row, int64_t b, int64_t i, int64_t offset, float* dropped) -> const float* {
    const int64_t visible = visible_keys(b, i);
    for (int64_t j = 0; j < tk; ++j)
      if (j >= visible || (!mask.key_padding.empty() && mask.key_padding[b * tk + j])) row[j] = neg_inf;
    softmax_row(row, row, tk);
    if (dropout_p == 0.0f) return row;
    dropout_kernel(row, dropped, tk, dropout_p, dropout_key, offset);
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
        const int64_t row = key_rows ? key_rows[j * B + b] : b;
        key[j] = ok.row(row, j), value[j] = ov.row(row, j);
      }
    };
    auto attend = [&](int64_t b, int64_t h, int64_t i) {
      // Keys after the causal horizon get no probability: neither scored nor summed.
      const int64_t visible = visible_keys(b, i);
      float* p = probs.data() + ((b * heads + h) * tq + i) * tk;
      const float* qi = oq.row(b, i) + h * dk;
      int64_t j = 0;
      for (; j + 8 <= visible; j += 8) vec::scaled_dot8(qi, key.data() + j, h * dk, dk, scale, p + j);
      for (; j < visible; ++j) p[j] = scale * vec::dot(qi, key[j] + h * dk, dk);
      const float* pd = probabilities(p, b, i, ((b * heads + h) * tq + i) * tk, scratch.data());
      vec::weighted_row_sum(pd, value.data(), h * dk, visible, dk, out_row(b, i) + h * dk);
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
          gemm(false, true, tq_b, tk_b, dk, scale, oq.row(b, 0) + h * dk, oq.row_stride, ok.row(b, 0) + h * dk, ok.row_stride, 0.0f, p, tk);
          for (int64_t i = 0; i < tq_b; ++i)
            probabilities(p + i * tk, b, i, (b * heads + h) * tq * tk + i * tk, dropout_p > 0.0f ? scratch.data() + i * tk : nullptr);
          gemm(false, false, tq_b, dk, tk_b, 1.0f, dropout_p > 0.0f ? scratch.data() : p, tk, ov.row(b, 0) + h * dk, ov.row_stride, 0.0f,
               out_row(b, 0) + h * dk, D);
        }
    }
  });
  if (weights) *weights = probs.detach();

  Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  std::shared_ptr<const PackedSequences> keep_q = mask.packed_queries, keep_k = mask.packed_keys;
  return autograd::record(out, "attention", {q, k, v}, [=](const Tensor& g) {
    // Gradients in the operands' own layouts (packed or not), contiguous.
    Tensor dq = Tensor::empty(qd.shape()), dkt = Tensor::empty(kd.shape()), dv = Tensor::empty(vd.shape());
    const Operand oq = operand(qd, "q", keep_q.get()), ok = operand(kd, "k", keep_k.get()), ov = operand(vd, "v", keep_k.get());
    const Operand og = operand(g, "gradient", keep_q.get()), odq = operand(dq, "dq", keep_q.get()),
                  odk = operand(dkt, "dk", keep_k.get()), odv = operand(dv, "dv", keep_k.get());
    auto at = [&](const Operand& o, int64_t b, int64_t h) { return const_cast<float*>(o.row(b, 0)) + h * dk; };
#pragma omp parallel
    {
      std::vector<float> dp(tq * tk), scratch(dropout_p > 0.0f ? tq * tk : 0);
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t bh = b * heads + h, tq_b = oq.length(b), tk_b = ok.length(b);
          const float* p = probs.data() + bh * tq * tk;
          const float* go = og.row(b, 0) + h * dk;
          const float* pd = p;
          if (dropout_p > 0.0f) {
            dropout_kernel(p, scratch.data(), tq * tk, dropout_p, dropout_key, bh * tq * tk);
            pd = scratch.data();
          }
          // dV = P_dropped^T dO ; dP_dropped = dO V^T
          gemm(true, false, tk_b, dk, tq_b, 1.0f, pd, tk, go, og.row_stride, 0.0f, at(odv, b, h), D);
          gemm(false, true, tq_b, tk_b, dk, 1.0f, go, og.row_stride, ov.row(b, 0) + h * dk, ov.row_stride, 0.0f, dp.data(), tk);
          for (int64_t i = 0; i < tq_b; ++i) {
            float* dr = dp.data() + i * tk;
            const float* pr = p + i * tk;
            if (dropout_p > 0.0f) dropout_kernel(dr, dr, tk_b, dropout_p, dropout_key, bh * tq * tk + i * tk);
            float dot = 0.0f;
            for (int64_t j = 0; j < tk_b; ++j) dot += dr[j] * pr[j];
            for (int64_t j = 0; j < tk_b; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;  // dS, scale folded in
          }
          gemm(false, false, tq_b, dk, tk_b, 1.0f, dp.data(), tk, ok.row(b, 0) + h * dk, ok.row_stride, 0.0f, at(odq, b, h), D);
          gemm(true, false, tk_b, dk, tq_b, 1.0f, dp.data(), tk, oq.row(b, 0) + h * dk, oq.row_stride, 0.0f, at(odk, b, h), D);
        }
    }
    return std::vector<Tensor>{dq, dkt, dv};
  });
}

}  // namespace tfm::ops
