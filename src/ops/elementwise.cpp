#include "ops/elementwise.h"

#include <algorithm>

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

Shape broadcast_shape(const Shape& a, const Shape& b) {
  const size_t nd = std::max(a.size(), b.size());
  Shape out(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t da = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    int64_t db = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    TFM_CHECK(da == db || da == 1 || db == 1, "shapes " << shape_str(a) << " and " << shape_str(b) << " do not broadcast");
    out[i] = std::max(da, db);
  }
  return out;
}

Tensor binary(const char* name, Binary op, const Tensor& a, const Tensor& b, float s = 1.0f) {
  auto fn = kernel(name, &Kernels::binary, {a, b});
  expect_dtype(name, "the first operand", a, DType::f32);
  expect_dtype(name, "the second operand", b, DType::f32);
  Tensor out = Tensor::empty(broadcast_shape(a.shape(), b.shape()), DType::f32, a.device());
  fn(op, a, b, s, out);
  return out;
}

Tensor unary(const char* name, Unary op, const Tensor& x, float s = 1.0f) {
  auto fn = kernel(name, &Kernels::unary, {x});
  expect_dtype(name, "its input", x, DType::f32);
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  fn(op, dense(x), s, out);
  return out;
}

Tensor dropout_op(const char* name, const Tensor& x, float p, DropoutKey key, const PackedRows& packed, bool relu) {
  auto fn = kernel(name, &Kernels::dropout, {x});
  expect_dtype(name, "its input", x, DType::f32);
  TFM_CHECK(!packed || (x.dim() == 3 && x.size(0) == 1 && packed->batch() > 0 &&
                        packed->start.back() + packed->length.back() == x.size(1)),
            name << ": packed sequences must be [1, tokens, features], got " << shape_str(x.shape()));
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  fn(dense(x), p, key, packed.get(), relu, out);
  return out;
}

void check_probability(float p) { TFM_CHECK(p >= 0.0f && p < 1.0f, "dropout probability " << p << " outside [0, 1)"); }

}  // namespace

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  auto fn = kernel("sum_to", &Kernels::sum_to, {g});
  Tensor out = Tensor::empty(shape, DType::f32, g.device());
  fn(g, out);
  return out;
}

void scale_(Tensor& dst, float s) {
  TFM_CHECK(dst.is_contiguous(), "scale_ needs a contiguous tensor, got strides " << shape_str(dst.strides()));
  expect_dtype("scale_", "its tensor", dst, DType::f32);
  kernel("scale_", &Kernels::scale_in_place, {dst})(dst, s);
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary("add", Binary::add, a, b);
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record(out, "add", {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary("mul", Binary::mul, a, b);
  Tensor ad = a.detach(), bd = b.detach();
  return autograd::record(out, "mul", {a, b}, [ad, bd](const Tensor& g) {
    return std::vector<Tensor>{sum_to(mul(g, bd), ad.shape()), sum_to(mul(g, ad), bd.shape())};
  });
}

Tensor scale(const Tensor& x, float s) {
  Tensor out = unary("scale", Unary::scale, x, s);
  return autograd::record(out, "scale", {x}, [s](const Tensor& g) { return std::vector<Tensor>{scale(g, s)}; });
}

Tensor relu(const Tensor& x) {
  Tensor out = unary("relu", Unary::relu, x);
  Tensor od = out.detach();
  return autograd::record(out, "relu", {x}, [od](const Tensor& g) { return std::vector<Tensor>{relu_backward(g, od)}; });
}

Tensor relu_backward(const Tensor& grad, const Tensor& output) { return binary("relu_backward", Binary::relu_backward, grad, output); }

namespace {

// An activation whose backward needs its input: g * f'(x).
Tensor activation(const char* name, Unary f, Binary slope, const Tensor& x) {
  Tensor out = unary(name, f, x);
  Tensor xd = x.detach();
  return autograd::record(out, name, {x}, [name, slope, xd](const Tensor& g) {
    return std::vector<Tensor>{binary(name, slope, g, xd)};
  });
}

}  // namespace

Tensor gelu(const Tensor& x) { return activation("gelu", Unary::gelu, Binary::gelu_backward, x); }
Tensor gelu_tanh(const Tensor& x) { return activation("gelu_tanh", Unary::gelu_tanh, Binary::gelu_tanh_backward, x); }
Tensor silu(const Tensor& x) { return activation("silu", Unary::silu, Binary::silu_backward, x); }

Tensor tanh(const Tensor& x) {
  Tensor out = unary("tanh", Unary::tanh, x);
  Tensor od = out.detach();
  return autograd::record(out, "tanh", {x}, [od](const Tensor& g) {
    return std::vector<Tensor>{binary("tanh", Binary::tanh_backward, g, od)};
  });
}

Tensor dropout(const Tensor& x, float p, DropoutKey key, const PackedRows& packed) {
  check_probability(p);
  if (p == 0.0f) return x;
  // The mask is recomputed from (key, index) in backward instead of being stored.
  Tensor out = dropout_op("dropout", x, p, key, packed, false);
  return autograd::record(out, "dropout", {x}, [key, p, packed](const Tensor& g) {
    return std::vector<Tensor>{dropout_op("dropout", g, p, key, packed, false)};
  });
}

Tensor relu_dropout(const Tensor& x, float p, DropoutKey key, const PackedRows& packed) {
  check_probability(p);
  if (p == 0.0f) return relu(x);
  Tensor out = dropout_op("relu_dropout", x, p, key, packed, true);
  const float keep_scale = 1.0f / (1.0f - p);
  Tensor od = out.detach();
  return autograd::record(out, "relu_dropout", {x}, [od, keep_scale](const Tensor& g) {
    return std::vector<Tensor>{binary("relu_dropout", Binary::relu_backward, g, od, keep_scale)};
  });
}

}  // namespace tfm::ops
