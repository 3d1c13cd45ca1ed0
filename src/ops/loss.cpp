#include "ops/loss.h"

#include <algorithm>
#include <cmath>

#include "autograd/autograd.h"
#include "ops/elementwise.h"
#include "ops/reduced_precision.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/vec_math.h"
#include "tensor/error.h"
#include "tensor/strided.h"

namespace tfm::ops {

namespace {

// The target distribution of one row, as (weight of the true class, weight of
// every other class, weight of the padding column). A row is skipped when its
// target is the ignored/padding id.
struct SmoothedTarget {
  float on, off, pad_column;
  bool kl;  // KL divergence (subtracts the target's entropy) rather than cross-entropy
};

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

// The class ids of a targets tensor: i32, one dimension.
std::vector<int> class_ids(const char* name, const Tensor& targets) {
  TFM_CHECK(targets.dtype() == DType::i32 && targets.dim() == 1,
            name << ": targets must be an i32 tensor [rows], got " << to_string(targets.dtype()) << " " << shape_str(targets.shape()));
  return targets.values<int32_t>();
}

void check_targets(const char* name, const std::vector<int>& targets, int64_t rows, int64_t vocab, int skip_id) {
  TFM_CHECK(static_cast<int64_t>(targets.size()) == rows, name << ": " << targets.size() << " targets for " << rows << " rows");
  for (int t : targets) TFM_CHECK(t == skip_id || (t >= 0 && t < vocab), name << ": target " << t << " outside vocabulary of " << vocab);
}

// The saved gradients, times the incoming (scalar) gradient.
std::vector<Tensor> scaled(const std::vector<Tensor>& grads, const Tensor& g) {
  const float s = g.item();
  if (s == 1.0f) return grads;
  std::vector<Tensor> out;
  for (const Tensor& t : grads) out.push_back(t.defined() ? scale(t, s) : Tensor());
  return out;
}

// Computes sum_i loss_i / normalizer for any row-wise smoothed target distribution
// q. When the loss will be differentiated, its gradient (p - q) / normalizer is
// computed here too, row by row from the log-probabilities, and is the only
// [rows, vocab] buffer kept for backward (neither the logits nor the
// log-probabilities outlive the forward pass). Shared by both loss forms.
Tensor smoothed_loss(const char* name, const Tensor& logits, const std::vector<int>& targets, int skip_id, SmoothedTarget q,
                     double normalizer) {
  TFM_CHECK(logits.dim() == 2, name << ": logits must be [rows, vocab], got " << shape_str(logits.shape()));
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  check_targets(name, targets, rows, vocab, skip_id);
  const Tensor x = logits.is_contiguous() ? logits : logits.clone();
  const bool grad = autograd::grad_enabled() && logits.requires_grad();
  Tensor dx = grad ? Tensor::empty({rows, vocab}) : Tensor();
  const float inv_n = static_cast<float>(1.0 / normalizer);
  std::vector<double> row_losses(rows, 0.0);
#pragma omp parallel
  {
    std::vector<float> scratch(grad ? 0 : static_cast<size_t>(vocab));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      row_losses[r] = row_loss(x.data() + r * vocab, grad ? dx.data() + r * vocab : scratch.data(), vocab, targets[r], skip_id, q,
                               grad, inv_n);
  }
  double total = 0.0;
  for (double v : row_losses) total += v;
  Tensor out = Tensor::full({}, static_cast<float>(total / normalizer));
  if (!grad) return out;
  return autograd::record(out, name, {logits}, [dx](const Tensor& g) { return scaled({dx}, g); });
}

// cross_entropy's target distribution and normalizer.
SmoothedTarget ce_target(float smoothing, int64_t vocab) {
  TFM_CHECK(smoothing >= 0.0f && smoothing <= 1.0f, "cross_entropy: label smoothing " << smoothing << " outside [0, 1]");
  const float off = smoothing / static_cast<float>(vocab);
  return {1.0f - smoothing + off, off, off, false};
}

double ce_normalizer(const std::vector<int>& targets, int ignore_index) {
  int64_t valid = 0;
  for (int t : targets) valid += t != ignore_index;
  // PyTorch's mean over zero targets is NaN; we return 0 so an all-padding batch is harmless.
  return valid > 0 ? static_cast<double>(valid) : 1.0;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target_ids, float smoothing, int ignore_index) {
  const std::vector<int> targets = class_ids("cross_entropy", target_ids);
  return smoothed_loss("cross_entropy", logits, targets, ignore_index, ce_target(smoothing, logits.size(-1)),
                       ce_normalizer(targets, ignore_index));
}

Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight, const Tensor& bias, const Tensor& target_ids,
                            float smoothing, int ignore_index, const LinearProducts& products) {
  TFM_CHECK(x_in.dim() == 2 && weight.dim() == 2 && x_in.size(1) == weight.size(1),
            "linear_cross_entropy: input " << shape_str(x_in.shape()) << " does not fit weight " << shape_str(weight.shape()));
  const int64_t rows = x_in.size(0), in = weight.size(1), vocab = weight.size(0);
  TFM_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == vocab),
            "linear_cross_entropy: bias " << shape_str(bias.shape()) << " for " << vocab << " outputs");
  const std::vector<int> targets = class_ids("linear_cross_entropy", target_ids);
  check_targets("linear_cross_entropy", targets, rows, vocab, ignore_index);
  const SmoothedTarget q = ce_target(smoothing, vocab);
  const double normalizer = ce_normalizer(targets, ignore_index);
  const float inv_n = static_cast<float>(1.0 / normalizer);
  const bool grad = autograd::grad_enabled() &&
                    (x_in.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  const Precision precision = products.precision();
  TFM_CHECK(weight.is_contiguous(), "linear_cross_entropy: the weight " << shape_str(weight.shape()) << " must be contiguous");
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.clone();
  const Tensor b = bias.defined() && !bias.is_contiguous() ? bias.clone() : bias;
  Tensor dx = grad ? Tensor::empty({rows, in}) : Tensor(), dw = grad ? Tensor::empty({vocab, in}) : Tensor();
  Tensor db = grad && b.defined() ? Tensor::zeros({vocab}) : Tensor();

  // Rows a chunk at a time: the logits (then their gradient) of one chunk exist at once.
  constexpr int64_t kChunk = 1024;
  Tensor logits = Tensor::empty({std::min(rows, kChunk), vocab});
  float* lc = logits.data();
  std::vector<double> row_losses(rows, 0.0);
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t m = std::min(kChunk, rows - r0);
    const float* xc = x.data() + r0 * in;
    products.forward(xc, m, in, weight.data(), vocab, b.defined() ? b.data() : nullptr, lc);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r)
      row_losses[r0 + r] = row_loss(lc + r * vocab, lc + r * vocab, vocab, targets[r0 + r], ignore_index, q, grad, inv_n);
    if (!grad) continue;
    // The chunk's share of the linear layer's backward: dx = g w, dw += g^T x, db += the sum of g's rows.
    linear_product_backward(precision, lc, xc, weight.data(), m, in, vocab, dx.data() + r0 * in, dw.data(), r0 == 0 ? 0.0f : 1.0f);
    if (db.defined()) strided_add(sum_to(ops::slice(logits, 0, 0, m), {vocab}), db);
  }
  double total = 0.0;
  for (double v : row_losses) total += v;
  Tensor out = Tensor::full({}, static_cast<float>(total / normalizer));
  if (!grad) return out;
  return autograd::record(out, "linear_cross_entropy", {x_in, weight, bias}, [dx, dw, db](const Tensor& g) { return scaled({dx, dw, db}, g); });
}

Tensor label_smoothing_kl(const Tensor& logits, const Tensor& target_ids, float smoothing, int padding_idx, float normalizer) {
  const std::vector<int> targets = class_ids("label_smoothing_kl", target_ids);
  TFM_CHECK(smoothing >= 0.0f && smoothing < 1.0f, "label_smoothing_kl: smoothing " << smoothing << " outside [0, 1)");
  TFM_CHECK(logits.size(-1) > 2, "label_smoothing_kl: needs a vocabulary larger than 2");
  TFM_CHECK(normalizer > 0.0f, "label_smoothing_kl: normalizer must be positive");
  const float off = smoothing / static_cast<float>(logits.size(-1) - 2);
  return smoothed_loss("label_smoothing_kl", logits, targets, padding_idx, {1.0f - smoothing, off, 0.0f, true}, normalizer);
}

}  // namespace tfm::ops
