#include "ops/reduce.h"

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace tfm::ops {

namespace {

// x's total (or its squares'), divided by `divisor`, on x's device: a scalar, or the two
// floats of ops/kernels.h's sum.
Tensor total(const char* name, const Tensor& x, bool squares, double divisor, const Shape& shape = {}) {
  auto fn = kernel(name, &Kernels::sum, {x});
  expect_dtype(name, "its input", x, DType::f32);
  Tensor out = Tensor::empty(shape, DType::f32, x.device());
  fn(dense(x), squares, divisor, out);
  return out;
}

// The scalar g [] broadcast to `shape` on g's device, times s (the backward of a sum).
Tensor broadcast(const Tensor& g, const Shape& shape, float s) {
  const Tensor full = dense(make_view(g, shape, Shape(shape.size(), 0), 0));
  return s == 1.0f ? full : scale(full, s);
}

}  // namespace

Tensor sum(const Tensor& x) {
  Shape shape = x.shape();
  return autograd::record(total("sum", x, false, 1.0), "sum", {x},
                          [shape](const Tensor& g) { return std::vector<Tensor>{broadcast(g, shape, 1.0f)}; });
}

Tensor mean(const Tensor& x) {
  const double n = static_cast<double>(x.numel());
  Shape shape = x.shape();
  return autograd::record(total("mean", x, false, n), "mean", {x},
                          [shape, n](const Tensor& g) { return std::vector<Tensor>{broadcast(g, shape, static_cast<float>(1.0 / n))}; });
}

Tensor sum_of_squares(const Tensor& x) { return total("sum_of_squares", x, true, 1.0, {2}); }

}  // namespace tfm::ops
