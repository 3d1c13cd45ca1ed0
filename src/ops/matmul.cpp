#include "ops/matmul.h"

#include "autograd/autograd.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/reduced_precision.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

// y = x W^T + b, then max(y, 0) where `relu`: one op, so that frozen weights' kernels
// apply the ReLU as they write y and no second [.., out] tensor is made.
Tensor linear_op(const Tensor& x_in, const Tensor& w, const Tensor& bias, bool relu, const LinearProducts& products) {
  TFM_CHECK(x_in.dim() >= 1 && w.dim() == 2 && x_in.size(-1) == w.size(1),
            "linear: input " << shape_str(x_in.shape()) << " does not fit weight " << shape_str(w.shape()));
  // Not a temporary copy: frozen weights' converted copies are keyed by address.
  TFM_CHECK(w.is_contiguous(), "linear: the weight " << shape_str(w.shape()) << " must be contiguous");
  TFM_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == w.size(0)),
            "linear: bias " << shape_str(bias.shape()) << " for " << w.size(0) << " outputs");
  Tensor x = x_in.is_contiguous() ? x_in : x_in.clone();
  const Tensor bc = bias.defined() && !bias.is_contiguous() ? bias.clone() : bias;
  const int64_t in = w.size(1), out_f = w.size(0), rows = x.numel() / in;
  Shape shape = x.shape();
  shape.back() = out_f;
  Tensor out = Tensor::empty(shape);
  products.forward(x.data(), rows, in, w.data(), out_f, bc.defined() ? bc.data() : nullptr, out.data(), relu);

  Tensor xd = x.detach(), wd = w.detach(), yd = relu ? out.detach() : Tensor();
  const bool has_bias = bias.defined();
  const Precision precision = products.precision();
  return autograd::record(out, relu ? "linear_relu" : "linear", {x_in, w, bias},
                          [xd, wd, yd, has_bias, rows, in, out_f, precision](const Tensor& g_in) {
    // Through the ReLU first: no gradient where it cut the output to 0.
    const Tensor g = yd.defined() ? relu_backward(g_in, yd) : g_in;
    Tensor dx = Tensor::empty(xd.shape()), dw = Tensor::empty(wd.shape());
    linear_product_backward(precision, g.data(), xd.data(), wd.data(), rows, in, out_f, dx.data(), dw.data(), 0.0f);
    Tensor db = has_bias ? sum_to(g, {out_f}) : Tensor();
    return std::vector<Tensor>{dx, dw, db};
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearProducts& products) {
  return linear_op(x, weight, bias, false, products);
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearProducts& products) {
  return linear_op(x, weight, bias, true, products);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  TFM_CHECK(a_in.dim() >= 2 && a_in.dim() == b_in.dim() && a_in.size(-1) == b_in.size(-2),
            "matmul: shapes " << shape_str(a_in.shape()) << " and " << shape_str(b_in.shape()) << " do not multiply");
  for (int64_t d = 0; d + 2 < a_in.dim(); ++d)
    TFM_CHECK(a_in.size(d) == b_in.size(d), "matmul: batch dims of " << shape_str(a_in.shape()) << " and "
                                                                       << shape_str(b_in.shape()) << " differ");
  Tensor a = a_in.is_contiguous() ? a_in : a_in.clone();
  Tensor b = b_in.is_contiguous() ? b_in : b_in.clone();
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1), batch = a.numel() / (m * k);
  Shape shape = a.shape();
  shape.back() = n;
  Tensor out = Tensor::empty(shape);
  for (int64_t i = 0; i < batch; ++i) gemm(false, false, m, n, k, 1.0f, a.data() + i * m * k, k, b.data() + i * k * n, n, 0.0f, out.data() + i * m * n, n);

  Tensor ad = a.detach(), bd = b.detach();
  return autograd::record(out, "matmul", {a_in, b_in}, [ad, bd, m, n, k, batch](const Tensor& g) {
    Tensor da = Tensor::empty(ad.shape()), db = Tensor::empty(bd.shape());
    for (int64_t i = 0; i < batch; ++i) {
      gemm(false, true, m, k, n, 1.0f, g.data() + i * m * n, n, bd.data() + i * k * n, n, 0.0f, da.data() + i * m * k, k);
      gemm(true, false, k, n, m, 1.0f, ad.data() + i * m * k, k, g.data() + i * m * n, n, 0.0f, db.data() + i * k * n, n);
    }
    return std::vector<Tensor>{da, db};
  });
}

}  // namespace tfm::ops
