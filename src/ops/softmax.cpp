#include "ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <optional>

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

// One row's (log-probability, id) pairs from its record of the kernel's out (ops/kernels.h's
// top_log_probs); nothing where the row is not finite.
std::optional<std::vector<std::pair<double, int64_t>>> log_probs_of(const float* record, int64_t count, const std::vector<int>& excluded,
                                                                     bool renormalize) {
  double lse = record[2 * count];
  if (!std::isfinite(lse)) return std::nullopt;
  if (renormalize) {  // the excluded ids' share of the probability taken out of the normaliser
    double excluded_mass = 0.0;
    for (size_t i = 0; i < excluded.size(); ++i) {
      const float logit = record[2 * count + 1 + static_cast<int64_t>(i)];
      const bool repeated = std::find(excluded.begin(), excluded.begin() + i, excluded[i]) != excluded.begin() + i;  // Marian: pad is the start
      if (!std::isnan(logit) && !repeated) excluded_mass += std::exp(static_cast<double>(logit) - lse);
    }
    lse += std::log1p(-std::min(excluded_mass, 1.0));
    if (!std::isfinite(lse)) return std::nullopt;
  }
  std::vector<std::pair<double, int64_t>> out;
  for (int64_t k = 0; k < count && record[count + k] >= 0; ++k) out.push_back({record[k] - lse, static_cast<int64_t>(record[count + k])});
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_op("softmax", x, false); }

Tensor log_softmax(const Tensor& x) { return softmax_op("log_softmax", x, true); }

bool top_log_probs(const Tensor& logits, int64_t count, const std::vector<int>& excluded, bool renormalize,
                   const std::vector<uint8_t>& wanted, std::vector<std::vector<std::pair<double, int64_t>>>& best) {
  auto fn = kernel("top_log_probs", &Kernels::top_log_probs, {logits});
  TFM_CHECK(logits.dim() == 2 && static_cast<int64_t>(wanted.size()) == logits.size(0),
            "top_log_probs: logits " << shape_str(logits.shape()) << " for " << wanted.size() << " rows");
  TFM_CHECK(count >= 1 && excluded.size() <= kMaxExcluded, "top_log_probs: " << count << " candidates, " << excluded.size() << " ids excluded");
  expect_dtype("top_log_probs", "the logits", logits, DType::f32);
  const int64_t n = logits.size(0), width = 2 * count + 1 + static_cast<int64_t>(excluded.size());
  Tensor out = Tensor::empty({n, width}, DType::f32, logits.device());
  fn(dense(logits), count, excluded, out);
  const std::vector<float> records = out.to_vector();  // the step's one copy back
  best.assign(static_cast<size_t>(n), {});
  bool finite = true;
  for (int64_t r = 0; r < n; ++r) {
    if (!wanted[r]) continue;
    auto top = log_probs_of(records.data() + r * width, count, excluded, renormalize);
    if (top) best[r] = std::move(*top);
    else finite = false;
  }
  return finite;
}

}  // namespace tfm::ops
