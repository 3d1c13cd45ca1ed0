#include "ops/reduce.h"

#include <vector>

#include "autograd/autograd.h"
#include "threads/parallel.h"

namespace tfm::ops {

namespace {

// Fixed-size blocks summed in order: the result does not depend on thread count.
template <class F>
double blocked_sum(const Tensor& x, F term) {
  Tensor xc = x.is_contiguous() ? x : x.clone();
  const float* p = xc.data();
  const int64_t n = xc.numel(), block = 4096, nblocks = (n + block - 1) / block;
  std::vector<double> partial(nblocks, 0.0);
  parallel_for(nblocks, nblocks > 8, [&](int64_t b) {
    double acc = 0.0;
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) acc += term(p[i]);
    partial[b] = acc;
  });
  double total = 0.0;
  for (double v : partial) total += v;
  return total;
}

}  // namespace

Tensor sum(const Tensor& x) {
  Tensor out = Tensor::full({}, static_cast<float>(blocked_sum(x, [](float v) { return static_cast<double>(v); })));
  Shape shape = x.shape();
  return autograd::record(out, "sum", {x}, [shape](const Tensor& g) { return std::vector<Tensor>{Tensor::full(shape, g.item())}; });
}

Tensor mean(const Tensor& x) {
  const double n = static_cast<double>(x.numel());
  Tensor out = Tensor::full({}, static_cast<float>(blocked_sum(x, [](float v) { return static_cast<double>(v); }) / n));
  Shape shape = x.shape();
  return autograd::record(out, "mean", {x}, [shape, n](const Tensor& g) {
    return std::vector<Tensor>{Tensor::full(shape, static_cast<float>(g.item() / n))};
  });
}

double sum_of_squares(const Tensor& x) {
  return blocked_sum(x, [](float v) { return static_cast<double>(v) * v; });
}

}  // namespace tfm::ops
