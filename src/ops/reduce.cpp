#include "ops/reduce.h"

#include "autograd/autograd.h"
#include "ops/dispatch.h"

namespace tfm::ops {

namespace {

double total(const char* name, const Tensor& x, bool squares) {
  auto fn = kernel(name, &Kernels::sum, {x});
  expect_dtype(name, "its input", x, DType::f32);
  return fn(dense(x), squares);
}

}  // namespace

Tensor sum(const Tensor& x) {
  Tensor out = Tensor::full({}, static_cast<float>(total("sum", x, false)), x.device());
  Shape shape = x.shape();
  return autograd::record(out, "sum", {x}, [shape](const Tensor& g) { return std::vector<Tensor>{Tensor::full(shape, g.item(), g.device())}; });
}

Tensor mean(const Tensor& x) {
  const double n = static_cast<double>(x.numel());
  Tensor out = Tensor::full({}, static_cast<float>(total("mean", x, false) / n), x.device());
  Shape shape = x.shape();
  return autograd::record(out, "mean", {x}, [shape, n](const Tensor& g) {
    return std::vector<Tensor>{Tensor::full(shape, static_cast<float>(g.item() / n), g.device())};
  });
}

double sum_of_squares(const Tensor& x) { return total("sum_of_squares", x, true); }

}  // namespace tfm::ops
