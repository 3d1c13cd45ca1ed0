#include "ops/loss.h"

#include <algorithm>
#include <cmath>

#include "autograd/autograd.h"
#include "ops/elementwise.h"
#include "ops/softmax.h"
#include "ops/vec_math.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

// The target distribution of one row, as (weight of the true class, weight of
// every other class, weight of the padding column). A row is skipped when its
// target is the ignored/padding id.
struct SmoothedTarget {
  float on, off, pad_column;
  bool kl;  // KL divergence (subtracts the target's entropy) rather than cross-entropy
};

// Computes sum_i loss_i / normalizer for any row-wise smoothed target distribution
// q. When the loss will be differentiated, its gradient (p - q) / normalizer is
// computed here too, row by row from the log-probabilities, and is the only
// [rows, vocab] buffer kept for backward (neither the logits nor the
// log-probabilities outlive the forward pass). Shared by both loss forms.
Tensor smoothed_loss(const char* name, const Tensor& logits, const std::vector<int>& targets, int skip_id, SmoothedTarget q,
                     double normalizer) {
  TFM_CHECK(logits.dim() == 2, name << ": logits must be [rows, vocab], got " << shape_str(logits.shape()));
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  TFM_CHECK(static_cast<int64_t>(targets.size()) == rows, name << ": " << targets.size() << " targets for " << rows << " rows");
  for (int t : targets) TFM_CHECK(t == skip_id || (t >= 0 && t < vocab), name << ": target " << t << " outside vocabulary of " << vocab);
  const Tensor x = logits.is_contiguous() ? logits : logits.clone();
  const bool grad = autograd::grad_enabled() && logits.requires_grad();
  Tensor dx = grad ? Tensor::empty({rows, vocab}) : Tensor();
  const bool pad_column = skip_id >= 0 && skip_id < vocab;
  const float inv_n = static_cast<float>(1.0 / normalizer);
  std::vector<double> row_loss(rows, 0.0);
#pragma omp parallel
  {
    std::vector<float> scratch(grad ? 0 : static_cast<size_t>(vocab));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float* lp = grad ? dx.data() + r * vocab : scratch.data();
      const int t = targets[r];
      if (t == skip_id) {
        if (grad) std::fill_n(lp, vocab, 0.0f);
        continue;
      }
      log_softmax_row(x.data() + r * vocab, lp, vocab);
      // sum_j q_j (L_j - lp_j), L_j = log q_j for KL: every column holds q.off except
      // the target's (q.on) and the padding column's (q.pad_column).
      auto term = [&](double qj, float lpj) { return qj > 0.0 ? qj * ((q.kl ? std::log(qj) : 0.0) - lpj) : 0.0; };
      double acc = term(q.on, lp[t]) + (pad_column ? term(q.pad_column, lp[skip_id]) : 0.0);
      if (q.off > 0.0f) {
        double sum_lp = 0.0;
        for (int64_t j = 0; j < vocab; ++j) sum_lp += lp[j];
        acc += q.off * (static_cast<double>(vocab) * (q.kl ? std::log(static_cast<double>(q.off)) : 0.0) - sum_lp);
        acc -= term(q.off, lp[t]) + (pad_column ? term(q.off, lp[skip_id]) : 0.0);
      }
      row_loss[r] = acc;
      if (!grad) continue;
      vec::exp_shifted(lp, lp, vocab, 0.0f);  // p = e^lp, in place
      const float p_target = lp[t], p_pad = pad_column ? lp[skip_id] : 0.0f;
      for (int64_t j = 0; j < vocab; ++j) lp[j] = (lp[j] - q.off) * inv_n;
      lp[t] = (p_target - q.on) * inv_n;
      if (pad_column) lp[skip_id] = (p_pad - q.pad_column) * inv_n;
    }
  }
  double total = 0.0;
  for (double v : row_loss) total += v;
  Tensor out = Tensor::full({}, static_cast<float>(total / normalizer));
  if (!grad) return out;
  return autograd::record(out, name, {logits}, [dx](const Tensor& g) {
    const float s = g.item();
    return std::vector<Tensor>{s == 1.0f ? dx : scale(dx, s)};
  });
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const std::vector<int>& targets, float smoothing, int ignore_index) {
  TFM_CHECK(smoothing >= 0.0f && smoothing <= 1.0f, "cross_entropy: label smoothing " << smoothing << " outside [0, 1]");
  const float vocab = static_cast<float>(logits.size(-1));
  const float off = smoothing / vocab;
  int64_t valid = 0;
  for (int t : targets) valid += t != ignore_index;
  // PyTorch's mean over zero targets is NaN; we return 0 so an all-padding batch is harmless.
  const double normalizer = valid > 0 ? static_cast<double>(valid) : 1.0;
  return smoothed_loss("cross_entropy", logits, targets, ignore_index, {1.0f - smoothing + off, off, off, false}, normalizer);
}

Tensor label_smoothing_kl(const Tensor& logits, const std::vector<int>& targets, float smoothing, int padding_idx, float normalizer) {
  TFM_CHECK(smoothing >= 0.0f && smoothing < 1.0f, "label_smoothing_kl: smoothing " << smoothing << " outside [0, 1)");
  TFM_CHECK(logits.size(-1) > 2, "label_smoothing_kl: needs a vocabulary larger than 2");
  TFM_CHECK(normalizer > 0.0f, "label_smoothing_kl: normalizer must be positive");
  const float off = smoothing / static_cast<float>(logits.size(-1) - 2);
  return smoothed_loss("label_smoothing_kl", logits, targets, padding_idx, {1.0f - smoothing, off, 0.0f, true}, normalizer);
}

}  // namespace tfm::ops
