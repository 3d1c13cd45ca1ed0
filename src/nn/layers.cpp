#include "nn/layers.h"

#include <cmath>

#include "nn/trace.h"
#include "ops/convert.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "tensor/error.h"

namespace tfm::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  weight = Tensor::untouched_zeros({out_features, in_features});
  register_parameter("weight", weight, ReadBy::products);
  if (with_bias) {
    bias = Tensor::zeros({out_features});
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  const Tensor y = ops::linear(x, weight, bias, products());
  return trace(path(), lora.empty() ? y : lora.add_to(y, x, 0, weight.size(0)));
}

Tensor Linear::forward_relu(const Tensor& x) const {
  return tracing() || !lora.empty() ? ops::relu(forward(x)) : ops::linear_relu(x, weight, bias, products());
}

Embedding::Embedding(int64_t vocab, int64_t d_model, bool scale_by_sqrt_d) : Embedding(Tensor::untouched_zeros({vocab, d_model}), scale_by_sqrt_d) {}

Embedding::Embedding(Tensor w, bool scale_by_sqrt_d) : weight(std::move(w)), scale_(scale_by_sqrt_d) { register_parameter("weight", weight); }

Tensor Embedding::forward(const Tensor& ids) const {
  Tensor e = ops::embedding(weight, ids);  // ids made on the host are checked there and copied to the table
  return scale_ ? ops::scale(e, std::sqrt(static_cast<float>(weight.size(1)))) : e;
}

LayerNorm::LayerNorm(int64_t d, float eps_, bool rms) : eps(eps_) {
  weight = Tensor::ones({d});
  register_parameter("weight", weight);
  if (rms) return;
  bias = Tensor::zeros({d});
  register_parameter("bias", bias);
}

Tensor LayerNorm::forward(const Tensor& x) const {
  return trace(path(), bias.defined() ? ops::layer_norm(x, weight, bias, eps) : ops::rms_norm(x, weight, eps));
}

PositionalEncoding::PositionalEncoding(int64_t d_model, float dropout, int64_t max_len, const PositionOptions& o)
    : PositionalEncoding(o.learned ? Tensor::zeros({max_len + o.first, d_model}) : ops::sinusoids(max_len, d_model, o.layout, o.first), o, dropout) {}

PositionalEncoding::PositionalEncoding(const PositionalEncoding& other, float dropout)
    : PositionalEncoding(other.options_.learned ? Tensor::zeros(other.table_.shape()) : other.table_, other.options_, dropout) {}

PositionalEncoding::PositionalEncoding(Tensor table, const PositionOptions& o, float dropout)
    : options_(o), table_(std::move(table)), offset_(o.learned ? o.first : 0), dropout_(dropout) {
  if (o.learned) {
    register_parameter("weight", table_);
  } else {
    register_buffer(table_);
  }
  if (o.norm) norm_ = register_module("norm", std::make_shared<LayerNorm>(table_.size(1), o.norm_eps));
}

Tensor PositionalEncoding::forward(const Tensor& x, int64_t start) const {
  const int64_t len = x.size(1);
  TFM_CHECK(start + len <= max_len(), "sequence of " << start + len << " positions exceeds the model's maximum length " << max_len());
  return finish(ops::add(x, ops::slice(table_, 0, offset_ + start, offset_ + start + len)));
}

Tensor PositionalEncoding::forward(const Tensor& x, const Tensor& positions) const {
  const Tensor rows = ops::slice(table_, 0, offset_, table_.size(0));  // [max_len, d_model]
  return finish(ops::add(x, ops::embedding(rows, positions)));  // ids past the table are an error
}

Tensor PositionalEncoding::finish(const Tensor& sum) const {
  return trace(path(), dropout(norm_ ? norm_->forward(sum) : sum, dropout_));
}

}  // namespace tfm::nn
