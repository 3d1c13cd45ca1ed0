#include "nn/attention.h"

#include "nn/trace.h"
#include "ops/matmul.h"
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

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const ops::AttentionMask& mask) {
  const int64_t D = d_model_;
  auto project = [&](const Tensor& x, int64_t first, int64_t count) {  // rows [first, first+count) of the packed weights
    return ops::linear(x, in_proj_weight.slice(0, first * D, (first + count) * D), in_proj_bias.slice(0, first * D, (first + count) * D));
  };
  Tensor q, k, v;
  if (query.same(key) && key.same(value)) {
    Tensor qkv = project(query, 0, 3);  // [batch, t, 3 * d_model]
    q = qkv.slice(2, 0, D), k = qkv.slice(2, D, 2 * D), v = qkv.slice(2, 2 * D, 3 * D);
  } else if (key.same(value)) {
    q = project(query, 0, 1);
    Tensor kv = project(key, 1, 2);  // [batch, tk, 2 * d_model]
    k = kv.slice(2, 0, D), v = kv.slice(2, D, 2 * D);
  } else {
    q = project(query, 0, 1), k = project(key, 1, 1), v = project(value, 2, 1);
  }
  const float p = training() ? dropout_ : 0.0f;
  const uint64_t key_seed = p > 0.0f ? global_rng().next_u64() : 0;
  Tensor context = ops::attention(q, k, v, heads_, mask, p, key_seed, &weights_);  // [batch, tq, d_model]
  return trace(path(), out_proj->forward(context));
}

}  // namespace tfm::nn
