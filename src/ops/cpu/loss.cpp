// The label-smoothed losses' kernel: log-softmax, loss and gradient row by row.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/cpu/rows.h"
#include "ops/cpu/vec_math.h"

namespace tfm::ops::cpu {

namespace {

// One row's loss against q from its logits x: the log-probabilities go to lp
// (which may be x). With `grad`, lp then becomes the row's gradient (p - q) * inv_n.
// A row whose target is skip_id has loss 0 (and gradient 0).
double row_loss(const float* x, float* lp, int64_t vocab, int t, int skip_id, const SmoothedTarget& q, bool grad, float inv_n) {
  if (t == skip_id) {
    if (grad) std::fill_n(lp, vocab, 0.0f);
    return 0.0;
  }
  log_softmax_row(x, lp, vocab);
  // sum_j q_j (L_j - lp_j), L_j = log q_j for KL: every column holds q.off except
  // the target's (q.on) and the padding column's (q.pad_column).
  auto term = [&](double qj, float lpj) { return qj > 0.0 ? qj * ((q.kl ? std::log(qj) : 0.0) - lpj) : 0.0; };
  const bool pad_column = skip_id >= 0 && skip_id < vocab;
  double acc = term(q.on, lp[t]) + (pad_column ? term(q.pad_column, lp[skip_id]) : 0.0);
  if (q.off > 0.0f) {
    double sum_lp = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum_lp += lp[j];
    acc += q.off * (static_cast<double>(vocab) * (q.kl ? std::log(static_cast<double>(q.off)) : 0.0) - sum_lp);
    acc -= term(q.off, lp[t]) + (pad_column ? term(q.off, lp[skip_id]) : 0.0);
  }
  if (grad) {
    vec::exp_shifted(lp, lp, vocab, 0.0f);  // p = e^lp, in place
    const float p_target = lp[t], p_pad = pad_column ? lp[skip_id] : 0.0f;
    for (int64_t j = 0; j < vocab; ++j) lp[j] = (lp[j] - q.off) * inv_n;
    lp[t] = (p_target - q.on) * inv_n;
    if (pad_column) lp[skip_id] = (p_pad - q.pad_column) * inv_n;
  }
  return acc;
}

}  // namespace

void smoothed_loss(const Tensor& logits, const Tensor& targets, int skip_id, const SmoothedTarget& q, float inv_n, Tensor* grad,
                   double divisor, Tensor& total_out) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  const int32_t* t = targets.data_as<int32_t>();
  std::vector<double> row_losses(rows, 0.0);
#pragma omp parallel
  {
    std::vector<float> scratch(grad ? 0 : static_cast<size_t>(vocab));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      row_losses[r] = row_loss(logits.data() + r * vocab, grad ? grad->data() + r * vocab : scratch.data(), vocab, t[r], skip_id, q,
                               grad != nullptr, inv_n);
  }
  double total = 0.0;  // in row order: the same for any thread count
  for (double v : row_losses) total += v;
  total_out.data()[0] = static_cast<float>(total / divisor);
}

}  // namespace tfm::ops::cpu
