#include "ops/attention.h"

#include <memory>
#include <string>

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tensor/environment.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

// A clear error unless t is [batch, time, heads*d_k] with unit last stride, or the
// packed sequences [1, rows, heads*d_k] that `packed` describes.
void check_operand(const Tensor& t, const char* name, const PackedSequences* packed) {
  expect_dtype("attention", name, t, DType::f32);
  TFM_CHECK(t.dim() == 3 && t.strides()[2] == 1, "attention: " << name << " must be [batch, time, heads*d_k] with unit last stride, got "
                                                                << shape_str(t.shape()));
  if (!packed) return;
  int64_t rows = 0;
  for (int64_t b = 0; b < packed->batch(); ++b) {
    TFM_CHECK(packed->start[b] == rows && packed->length[b] > 0, "attention: packed sequences must be non-empty and follow one another");
    rows += packed->length[b];
  }
  TFM_CHECK(t.size(0) == 1 && t.size(1) == rows, "attention: packed " << name << " must be [1, " << rows << ", heads*d_k], got "
                                                                       << shape_str(t.shape()));
}

// [batch, heads, tq, tk]: with packed sequences, the batch and lengths are the packing's.
Shape weights_shape(const Tensor& q, const Tensor& k, int64_t heads, const AttentionMask& mask) {
  const PackedSequences *packed_q = mask.packed_queries.get(), *packed_k = mask.packed_keys.get();
  return {packed_q ? packed_q->batch() : q.size(0), heads, packed_q ? packed_q->longest() : q.size(1), packed_k ? packed_k->longest() : k.size(1)};
}

void check_call(const AttentionCall& c) {
  TFM_CHECK(c.heads > 0 && c.kv_heads > 0 && c.heads % c.kv_heads == 0,
            "attention: " << c.heads << " query heads cannot share " << c.kv_heads << " key/value heads");
  const AttentionMask& mask = *c.mask;
  const PackedSequences *packed_q = mask.packed_queries.get(), *packed_k = mask.packed_keys.get();
  check_operand(c.q, "q", packed_q), check_operand(c.k, "k", packed_k), check_operand(c.v, "v", packed_k);
  const Tensor &q = c.q, &k = c.k, &v = c.v;
  const Shape shape = weights_shape(q, k, c.heads, mask);
  const int64_t B = shape[0], tq = shape[2], tk = shape[3], D = q.size(2);
  TFM_CHECK(c.heads > 0 && D % c.heads == 0, "attention: model width " << D << " not divisible by " << c.heads << " heads");
  const int64_t kv_width = D / c.heads * c.kv_heads;
  TFM_CHECK((c.key_rows.defined() || (packed_k ? packed_k->batch() : k.size(0)) == B) && v.size(0) == k.size(0) && v.size(1) == k.size(1) &&
                k.size(2) == kv_width && v.size(2) == kv_width,
            "attention: q " << shape_str(q.shape()) << ", k " << shape_str(k.shape()) << ", v " << shape_str(v.shape()) << " do not match");
  TFM_CHECK(!c.key_rows.defined() || (tq == 1 && !packed_q && !packed_k && !autograd::grad_enabled()),
            "attention: indexed keys are for decoding one query per row, without gradient");
  const Tensor& padding = mask.key_padding;
  TFM_CHECK(!padding.defined() || (!packed_k && padding.dtype() == DType::boolean && padding.dim() == 2 && padding.size(0) == B &&
                                   padding.size(1) == tk && padding.is_contiguous()),
            "attention: the padding mask must be bool [" << B << ", " << tk << "], got " << to_string(padding.dtype()) << " "
                                                         << shape_str(padding.shape()));
  TFM_CHECK(!c.key_rows.defined() || (c.key_rows.dtype() == DType::i32 && c.key_rows.dim() == 2 && c.key_rows.size(0) == B &&
                                      c.key_rows.size(1) == tk),
            "attention: key rows must be i32 [" << B << ", " << tk << "], got " << to_string(c.key_rows.dtype()) << " "
                                                << shape_str(c.key_rows.shape()));
  TFM_CHECK(!mask.causal || tk >= tq, "attention: causal mask needs at least as many keys as queries");
  TFM_CHECK(c.dropout_p >= 0.0f && c.dropout_p < 1.0f, "attention: dropout " << c.dropout_p << " outside [0, 1)");
  TFM_CHECK(c.dropout_p == 0.0f || (tq <= kAttentionDropoutLength && tk <= kAttentionDropoutLength),
            "attention: dropout over sequences longer than " << kAttentionDropoutLength << " (" << tq << " queries, " << tk << " keys)");
}

// The output [batch, tq, heads * d_k], or packed [1, rows, heads * d_k].
Tensor output_like(const Tensor& q, const Shape& weights, const AttentionMask& mask) {
  return Tensor::empty(mask.packed_queries ? Shape{1, q.size(1), q.size(2)} : Shape{weights[0], weights[2], q.size(2)}, DType::f32, q.device());
}

// Whether attention on `device` goes by flash_attention when nobody asks for the
// probabilities: the device's choice, unless TFM_FLASH_ATTENTION=0 turns it off (to time
// or check the two paths against each other on a GPU).
bool flash_by_default(Device device) {
  static const bool allowed = env_switch("TFM_FLASH_ATTENTION", true);
  return allowed && kernels(device).flash_attention_by_default;
}

}  // namespace

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionHeads heads, const AttentionMask& mask, float dropout_p,
                       DropoutKey dropout_key) {
  auto fn = kernel("flash_attention", &Kernels::flash_attention, {q, k, v, mask.key_padding});
  const AttentionCall call{q, k, v, heads.query, heads.kv, &mask, dropout_p, dropout_key, Tensor()};
  check_call(call);
  const Shape shape = weights_shape(q, k, heads.query, mask);  // [B, heads, tq, tk]
  Tensor lse = Tensor::empty({shape[0], shape[1], shape[2]}, DType::f32, q.device());
  Tensor out = output_like(q, shape, mask);
  fn(call, out, lse);

  // The backward scores the rows again: it keeps the whole mask, and the output (dO . O).
  auto kept_mask = std::make_shared<const AttentionMask>(mask);
  AttentionCall kept{q.detach(), k.detach(), v.detach(), heads.query, heads.kv, nullptr, dropout_p, dropout_key, Tensor()};
  return autograd::record(out, "flash_attention", {q, k, v}, [kept, kept_mask, lse, o = out.detach()](const Tensor& g) {
    AttentionCall c = kept;
    c.mask = kept_mask.get();
    Tensor dq = Tensor::empty(c.q.shape(), DType::f32, c.q.device()), dk = Tensor::empty(c.k.shape(), DType::f32, c.q.device()),
           dv = Tensor::empty(c.v.shape(), DType::f32, c.q.device());
    check_operand(g, "gradient", c.mask->packed_queries.get());
    kernel("flash_attention", &Kernels::flash_attention_backward, {g, c.q})(c, o, lse, g, dq, dk, dv);
    return std::vector<Tensor>{dq, dk, dv};
  });
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionHeads heads, const AttentionMask& mask, float dropout_p,
                 DropoutKey dropout_key, Tensor* weights, const Tensor& key_rows) {
  if (!weights && !key_rows.defined() && flash_by_default(device_of("attention", {q, k, v, mask.key_padding})))
    return flash_attention(q, k, v, heads, mask, dropout_p, dropout_key);
  auto fn = kernel("attention", &Kernels::attention, {q, k, v, mask.key_padding, key_rows});
  const AttentionCall call{q, k, v, heads.query, heads.kv, &mask, dropout_p, dropout_key, key_rows.defined() ? dense(key_rows) : key_rows};
  check_call(call);
  const PackedSequences* packed_q = mask.packed_queries.get();
  const Shape shape = weights_shape(q, k, heads.query, mask);  // [B, heads, tq, tk]
  // A packed sequence's rows past its length are never written: they stay 0.
  Tensor probs = packed_q ? Tensor::zeros(shape, q.device()) : Tensor::empty(shape, DType::f32, q.device());
  Tensor out = output_like(q, shape, mask);
  fn(call, out, probs);
  if (weights) *weights = probs.detach();

  // The backward needs of the mask only the packing (padding and causality are in probs).
  std::shared_ptr<const PackedSequences> keep_q = mask.packed_queries, keep_k = mask.packed_keys;
  AttentionCall kept{q.detach(), k.detach(), v.detach(), heads.query, heads.kv, nullptr, dropout_p, dropout_key, Tensor()};
  return autograd::record(out, "attention", {q, k, v}, [kept, keep_q, keep_k, probs](const Tensor& g) {
    AttentionMask packing;
    packing.packed_queries = keep_q, packing.packed_keys = keep_k;
    AttentionCall c = kept;
    c.mask = &packing;
    // Gradients in the operands' own layouts (packed or not), contiguous.
    Tensor dq = Tensor::empty(c.q.shape(), DType::f32, c.q.device()), dk = Tensor::empty(c.k.shape(), DType::f32, c.q.device()),
           dv = Tensor::empty(c.v.shape(), DType::f32, c.q.device());
    check_operand(g, "gradient", c.mask->packed_queries.get());
    kernel("attention", &Kernels::attention_backward, {g, c.q})(c, probs, g, dq, dk, dv);
    return std::vector<Tensor>{dq, dk, dv};
  });
}

}  // namespace tfm::ops
