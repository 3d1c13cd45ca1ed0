#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/autograd.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/parallel.h"
#include "ops/softmax.h"
#include "ops/vec_math.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

// Geometry of one [batch, time, heads * d_k] operand that may be a strided view.
struct Operand {
  const float* base;
  int64_t batch_stride, row_stride;
  const float* head(int64_t b, int64_t h, int64_t dk) const { return base + b * batch_stride + h * dk; }
};

Operand operand(const Tensor& t, const char* name) {
  TFM_CHECK(t.dim() == 3 && t.strides()[2] == 1, "attention: " << name << " must be [batch, time, heads*d_k] with unit last stride, got "
                                                                << shape_str(t.shape()));
  return {t.data(), t.strides()[0], t.strides()[1]};
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const AttentionMask& mask, float dropout_p,
                 uint64_t dropout_key, Tensor* weights, const int32_t* key_rows) {
  Operand oq = operand(q, "q"), ok = operand(k, "k"), ov = operand(v, "v");
  const int64_t B = q.size(0), tq = q.size(1), tk = k.size(1), D = q.size(2);
  TFM_CHECK(heads > 0 && D % heads == 0, "attention: model width " << D << " not divisible by " << heads << " heads");
  TFM_CHECK((key_rows || k.size(0) == B) && v.size(0) == k.size(0) && v.size(1) == tk && k.size(2) == D && v.size(2) == D,
            "attention: q " << shape_str(q.shape()) << ", k " << shape_str(k.shape()) << ", v " << shape_str(v.shape()) << " do not match");
  TFM_CHECK(!key_rows || (tq == 1 && !autograd::grad_enabled()), "attention: indexed keys are for decoding one query per row, without gradient");
  TFM_CHECK(mask.key_padding.empty() || static_cast<int64_t>(mask.key_padding.size()) == B * tk,
            "attention: padding mask has " << mask.key_padding.size() << " entries for " << B << "x" << tk << " keys");
  TFM_CHECK(!mask.causal || tk >= tq, "attention: causal mask needs at least as many keys as queries");
  TFM_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, "attention: dropout " << dropout_p << " outside [0, 1)");
  const int64_t dk = D / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const int64_t causal_shift = tk - tq;
  const float neg_inf = -std::numeric_limits<float>::infinity();

  Tensor probs = Tensor::empty({B, heads, tq, tk});
  Tensor out = Tensor::empty({B, tq, D});

  // Masks a row of scores of query row b, position i, and normalises it in place;
  // returns the probabilities to weight the values with: the row itself, or under
  // dropout a masked copy in `dropped` (P stays intact: users inspect it, backward needs it).
  auto probabilities = [&](float* row, int64_t b, int64_t i, int64_t offset, float* dropped) -> const float* {
    for (int64_t j = 0; j < tk; ++j) {
      const bool masked = (!mask.key_padding.empty() && mask.key_padding[b * tk + j]) || (mask.causal && j > i + causal_shift);
      if (masked) row[j] = neg_inf;
    }
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
      for (int64_t j = 0; j < tk; ++j) {
        const int64_t row = key_rows ? key_rows[j * B + b] : b;
        key[j] = ok.head(row, 0, dk) + j * ok.row_stride, value[j] = ov.head(row, 0, dk) + j * ov.row_stride;
      }
    };
    auto attend = [&](int64_t b, int64_t h, int64_t i) {
      // Keys after the causal horizon get no probability: neither scored nor summed.
      const int64_t visible = mask.causal ? std::min(tk, i + causal_shift + 1) : tk;
      float* p = probs.data() + ((b * heads + h) * tq + i) * tk;
      const float* qi = oq.head(b, h, dk) + i * oq.row_stride;
      int64_t j = 0;
      for (; j + 8 <= visible; j += 8) vec::scaled_dot8(qi, key.data() + j, h * dk, dk, scale, p + j);
      for (; j < visible; ++j) p[j] = scale * vec::dot(qi, key[j] + h * dk, dk);
      const float* pd = probabilities(p, b, i, ((b * heads + h) * tq + i) * tk, scratch.data());
      vec::weighted_row_sum(pd, value.data(), h * dk, visible, dk, out.data() + (b * tq + i) * D + h * dk);
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
          for (int64_t i = 0; i < tq; ++i) attend(b, h, i);
        }
    } else {
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < heads; ++h) {
          float* p = probs.data() + (b * heads + h) * tq * tk;
          gemm(false, true, tq, tk, dk, scale, oq.head(b, h, dk), oq.row_stride, ok.head(b, h, dk), ok.row_stride, 0.0f, p, tk);
          for (int64_t i = 0; i < tq; ++i)
            probabilities(p + i * tk, b, i, (b * heads + h) * tq * tk + i * tk, dropout_p > 0.0f ? scratch.data() + i * tk : nullptr);
          gemm(false, false, tq, dk, tk, 1.0f, dropout_p > 0.0f ? scratch.data() : p, tk, ov.head(b, h, dk), ov.row_stride, 0.0f,
               out.data() + b * tq * D + h * dk, D);
        }
    }
  });
  if (weights) *weights = probs.detach();

  Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  return autograd::record(out, "attention", {q, k, v}, [=](const Tensor& g) {
    Tensor dq = Tensor::empty({B, tq, D}), dkt = Tensor::empty({B, tk, D}), dv = Tensor::empty({B, tk, D});
    Operand oq = operand(qd, "q"), ok = operand(kd, "k"), ov = operand(vd, "v");
#pragma omp parallel
    {
      std::vector<float> dp(tq * tk), scratch(dropout_p > 0.0f ? tq * tk : 0);
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t bh = b * heads + h;
          const float* p = probs.data() + bh * tq * tk;
          const float* go = g.data() + b * tq * D + h * dk;
          const float* pd = p;
          if (dropout_p > 0.0f) {
            dropout_kernel(p, scratch.data(), tq * tk, dropout_p, dropout_key, bh * tq * tk);
            pd = scratch.data();
          }
          // dV = P_dropped^T dO ; dP_dropped = dO V^T
          gemm(true, false, tk, dk, tq, 1.0f, pd, tk, go, D, 0.0f, dv.data() + b * tk * D + h * dk, D);
          gemm(false, true, tq, tk, dk, 1.0f, go, D, ov.head(b, h, dk), ov.row_stride, 0.0f, dp.data(), tk);
          for (int64_t i = 0; i < tq; ++i) {
            float* dr = dp.data() + i * tk;
            const float* pr = p + i * tk;
            if (dropout_p > 0.0f) dropout_kernel(dr, dr, tk, dropout_p, dropout_key, bh * tq * tk + i * tk);
            float dot = 0.0f;
            for (int64_t j = 0; j < tk; ++j) dot += dr[j] * pr[j];
            for (int64_t j = 0; j < tk; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;  // dS, scale folded in
          }
          gemm(false, false, tq, dk, tk, 1.0f, dp.data(), tk, ok.head(b, h, dk), ok.row_stride, 0.0f, dq.data() + b * tq * D + h * dk, D);
          gemm(true, false, tk, dk, tq, 1.0f, dp.data(), tk, oq.head(b, h, dk), oq.row_stride, 0.0f, dkt.data() + b * tk * D + h * dk, D);
        }
    }
    return std::vector<Tensor>{dq, dkt, dv};
  });
}

}  // namespace tfm::ops
