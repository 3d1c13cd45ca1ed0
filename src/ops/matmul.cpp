#include "ops/matmul.h"

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

// y = x W^T + b, then max(y, 0) where `relu`: one op, so that frozen weights' kernels
// apply the ReLU as they write y and no second [.., out] tensor is made.
Tensor linear_op(const char* name, const Tensor& x_in, const Tensor& w, const Tensor& bias, bool relu, const LinearProducts& products) {
  auto fn = kernel(name, &Kernels::linear, {x_in, w, bias});
  TFM_CHECK(x_in.dim() >= 1 && w.dim() == 2 && x_in.size(-1) == w.size(1),
            "linear: input " << shape_str(x_in.shape()) << " does not fit weight " << shape_str(w.shape()));
  // Not a temporary copy: frozen weights' converted copies are keyed by address.
  TFM_CHECK(w.is_contiguous(), "linear: the weight " << shape_str(w.shape()) << " must be contiguous");
  TFM_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == w.size(0)),
            "linear: bias " << shape_str(bias.shape()) << " for " << w.size(0) << " outputs");
  expect_dtype(name, "every argument", {x_in, w, bias}, DType::f32);
  const Tensor x = dense(x_in), b = bias.defined() ? dense(bias) : bias;
  Shape shape = x.shape();
  shape.back() = w.size(0);
  Tensor out = Tensor::empty(shape, DType::f32, x.device());
  fn(products, x, w, b, relu, out);

  Tensor xd = x.detach(), wd = w.detach(), yd = relu ? out.detach() : Tensor();
  const bool has_bias = bias.defined();
  const Precision precision = products.precision();
  // A frozen weight (LoRA's base, a frozen embedding's tied head) or an input that needs
  // no gradient (the first layer over frozen embeddings) gets none computed.
  const bool need_dx = x_in.requires_grad(), need_dw = w.requires_grad();
  return autograd::record(out, name, {x_in, w, bias}, [xd, wd, yd, has_bias, precision, need_dx, need_dw](const Tensor& g_in) {
    TFM_CHECK(precision != Precision::int8, "linear: int8 precision is for inference only; train in f32 or bf16");
    // Through the ReLU first: no gradient where it cut the output to 0.
    const Tensor g = dense(yd.defined() ? relu_backward(g_in, yd) : g_in);
    Tensor dx = need_dx ? Tensor::empty(xd.shape(), DType::f32, xd.device()) : Tensor(),
           dw = need_dw ? Tensor::empty(wd.shape(), DType::f32, xd.device()) : Tensor();
    kernel("linear", &Kernels::linear_backward, {g, xd})(precision, g, xd, wd, dx, dw, 0.0f);
    Tensor db = has_bias ? sum_to(g, {wd.size(0)}) : Tensor();
    return std::vector<Tensor>{dx, dw, db};
  });
}

Tensor product(bool trans_a, bool trans_b, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor out = Tensor::empty(shape, DType::f32, a.device());
  kernel("matmul", &Kernels::matmul, {a, b})(trans_a, trans_b, a, b, 0.0f, out);
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearProducts& products) {
  return linear_op("linear", x, weight, bias, false, products);
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearProducts& products) {
  return linear_op("linear_relu", x, weight, bias, true, products);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  TFM_CHECK(a_in.dim() >= 2 && a_in.dim() == b_in.dim() && a_in.size(-1) == b_in.size(-2),
            "matmul: shapes " << shape_str(a_in.shape()) << " and " << shape_str(b_in.shape()) << " do not multiply");
  for (int64_t d = 0; d + 2 < a_in.dim(); ++d)
    TFM_CHECK(a_in.size(d) == b_in.size(d), "matmul: batch dims of " << shape_str(a_in.shape()) << " and "
                                                                       << shape_str(b_in.shape()) << " differ");
  expect_dtype("matmul", "the first operand", a_in, DType::f32);
  expect_dtype("matmul", "the second operand", b_in, DType::f32);
  const Tensor a = dense(a_in).detach(), b = dense(b_in).detach();
  Shape shape = a.shape();
  shape.back() = b.size(-1);
  Tensor out = product(false, false, a, b, shape);
  return autograd::record(out, "matmul", {a_in, b_in}, [a, b](const Tensor& g_in) {
    const Tensor g = dense(g_in);
    return std::vector<Tensor>{product(false, true, g, b, a.shape()), product(true, false, a, g, b.shape())};  // g b^T, a^T g
  });
}

}  // namespace tfm::ops
