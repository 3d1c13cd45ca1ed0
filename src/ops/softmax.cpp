#include "ops/softmax.h"

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

Tensor softmax_op(const char* name, const Tensor& x, bool log) {
  auto fn = kernel(name, &Kernels::softmax, {x});
  expect_dtype(name, "its input", x, DType::f32);
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  fn(dense(x), log, out);
  Tensor yd = out.detach();
  return autograd::record(out, name, {x}, [yd, log, name](const Tensor& g) {
    Tensor dx = Tensor::empty(yd.shape(), DType::f32, yd.device());
    kernel(name, &Kernels::softmax_backward, {yd, g})(yd, dense(g), log, dx);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_op("softmax", x, false); }

Tensor log_softmax(const Tensor& x) { return softmax_op("log_softmax", x, true); }

bool top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, bool renormalize,
                   const std::vector<uint8_t>& wanted, std::vector<std::vector<std::pair<double, int64_t>>>& best) {
  auto fn = kernel("top_log_probs", &Kernels::top_log_probs, {logits});
  TFM_CHECK(logits.dim() == 2 && static_cast<int64_t>(wanted.size()) == logits.size(0),
            "top_log_probs: logits " << shape_str(logits.shape()) << " for " << wanted.size() << " rows");
  expect_dtype("top_log_probs", "the logits", logits, DType::f32);
  return fn(dense(logits), count, excluded, renormalize, wanted, best);
}

}  // namespace tfm::ops
