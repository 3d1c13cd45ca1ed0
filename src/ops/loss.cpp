#include "ops/loss.h"

#include <algorithm>

#include "autograd/autograd.h"
#include "ops/convert.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "tensor/strided.h"

namespace tfm::ops {

namespace {

// A clear error unless targets is an i32 tensor [rows] of ids in [0, vocab) or skip_id;
// returns how many are not skip_id.
int64_t check_targets(const char* name, const Tensor& targets, int64_t rows, int64_t vocab, int skip_id) {
  TFM_CHECK(targets.dtype() == DType::i32 && targets.dim() == 1,
            name << ": targets must be an i32 tensor [rows], got " << to_string(targets.dtype()) << " " << shape_str(targets.shape()));
  TFM_CHECK(targets.size(0) == rows, name << ": " << targets.size(0) << " targets for " << rows << " rows");
  const Tensor ids = dense(to(targets, Device::CPU));  // (free where the caller has them on the host)
  const int32_t* t = ids.data_as<int32_t>();
  int64_t valid = 0;
  for (int64_t r = 0; r < rows; ++r) {
    TFM_CHECK(t[r] == skip_id || (t[r] >= 0 && t[r] < vocab), name << ": target " << t[r] << " outside vocabulary of " << vocab);
    valid += t[r] != skip_id;
  }
  return valid;
}

// The targets on the logits' device (given there, or on the host: checked there, then
// copied without a wait).
Tensor on_device(const Tensor& targets, const Tensor& logits) { return dense(to(targets, logits.device())); }

// The saved gradients times the incoming gradient g []: a float where g is in host
// memory (1 costs nothing), else g broadcast on its device (nothing waits for it).
std::vector<Tensor> scaled(const std::vector<Tensor>& grads, const Tensor& g) {
  const bool host = g.device() == Device::CPU;
  const float s = host ? g.item() : 0.0f;
  if (host && s == 1.0f) return grads;
  std::vector<Tensor> out;
  for (const Tensor& t : grads) out.push_back(!t.defined() ? Tensor() : host ? scale(t, s) : mul(t, g));
  return out;
}

// Computes (logits [rows, vocab] and targets checked) sum_i loss_i / normalizer for any row-wise smoothed target distribution
// q. When the loss will be differentiated, its gradient (p - q) / normalizer is
// computed here too, row by row from the log-probabilities, and is the only
// [rows, vocab] buffer kept for backward (neither the logits nor the
// log-probabilities outlive the forward pass). Shared by both loss forms.
Tensor smoothed_loss(const char* name, const Tensor& logits, const Tensor& targets, int skip_id, SmoothedTarget q, double normalizer) {
  auto fn = kernel(name, &Kernels::smoothed_loss, {logits});
  expect_dtype(name, "the logits", logits, DType::f32);
  const bool grad = autograd::grad_enabled() && logits.requires_grad();
  Tensor dx = grad ? Tensor::empty(logits.shape(), DType::f32, logits.device()) : Tensor();
  Tensor out = Tensor::empty({}, DType::f32, logits.device());
  fn(dense(logits), on_device(targets, logits), skip_id, q, static_cast<float>(1.0 / normalizer), grad ? &dx : nullptr, normalizer, out);
  if (!grad) return out;
  return autograd::record(out, name, {logits}, [dx](const Tensor& g) { return scaled({dx}, g); });
}

// cross_entropy's target distribution and normalizer.
SmoothedTarget ce_target(float smoothing, int64_t vocab) {
  TFM_CHECK(smoothing >= 0.0f && smoothing <= 1.0f, "cross_entropy: label smoothing " << smoothing << " outside [0, 1]");
  const float off = smoothing / static_cast<float>(vocab);
  return {1.0f - smoothing + off, off, off, false};
}

// PyTorch's mean over zero targets is NaN; we return 0 so an all-padding batch is harmless.
double ce_normalizer(int64_t valid) { return valid > 0 ? static_cast<double>(valid) : 1.0; }

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, float smoothing, int ignore_index) {
  TFM_CHECK(logits.dim() == 2, "cross_entropy: logits must be [rows, vocab], got " << shape_str(logits.shape()));
  const int64_t valid = check_targets("cross_entropy", targets, logits.size(0), logits.size(1), ignore_index);
  return smoothed_loss("cross_entropy", logits, targets, ignore_index, ce_target(smoothing, logits.size(-1)), ce_normalizer(valid));
}

Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight, const Tensor& bias, const Tensor& targets, float smoothing,
                            int ignore_index, const LinearProducts& products) {
  const char* name = "linear_cross_entropy";
  auto loss_rows = kernel(name, &Kernels::smoothed_loss, {x_in, weight, bias});
  auto product = kernel(name, &Kernels::linear, {x_in});
  TFM_CHECK(x_in.dim() == 2 && weight.dim() == 2 && x_in.size(1) == weight.size(1),
            name << ": input " << shape_str(x_in.shape()) << " does not fit weight " << shape_str(weight.shape()));
  const int64_t rows = x_in.size(0), in = weight.size(1), vocab = weight.size(0);
  TFM_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == vocab), name << ": bias " << shape_str(bias.shape()) << " for " << vocab << " outputs");
  expect_dtype(name, "every argument but the targets", {x_in, weight, bias}, DType::f32);
  const int64_t valid = check_targets(name, targets, rows, vocab, ignore_index);
  // Not a temporary copy: frozen weights' converted copies are keyed by address.
  TFM_CHECK(weight.is_contiguous(), name << ": the weight " << shape_str(weight.shape()) << " must be contiguous");
  const SmoothedTarget q = ce_target(smoothing, vocab);
  const double normalizer = ce_normalizer(valid);
  const float inv_n = static_cast<float>(1.0 / normalizer);
  const bool grad = autograd::grad_enabled() && (x_in.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  const Device device = x_in.device();
  const Tensor x = dense(x_in).detach(), b = bias.defined() ? dense(bias).detach() : bias, ids = on_device(targets, x_in), w = weight.detach();
  // (A frozen head, as under LoRA, gets no weight gradient computed; nor an input that needs none.)
  Tensor dx = grad && x_in.requires_grad() ? Tensor::empty({rows, in}, DType::f32, device) : Tensor(),
         dw = grad && weight.requires_grad() ? Tensor::empty({vocab, in}, DType::f32, device) : Tensor();
  Tensor db = grad && b.defined() ? Tensor::zeros({vocab}, device) : Tensor();

  // Rows a chunk at a time: the logits (then their gradient) of one chunk exist at once.
  // On the GPU chunks of up to 256 MiB of logits, for fewer and larger products (a base
  // Transformer's 12,500 target tokens over 8,000 words: 2 chunks, not 13).
  const int64_t kChunk = device == Device::CUDA ? std::max<int64_t>(1024, (int64_t{256} << 20) / (4 * std::max<int64_t>(vocab, 1))) : 1024;
  const Tensor chunk_buffer = Tensor::empty({std::min(rows, kChunk), vocab}, DType::f32, device);
  const int64_t chunks = std::max<int64_t>(1, (rows + kChunk - 1) / kChunk);
  // One chunk's loss is the mean itself; several chunks' sums are added up after.
  Tensor out = Tensor::empty({}, DType::f32, device), chunk_sums = chunks > 1 ? Tensor::empty({chunks}, DType::f32, device) : Tensor();
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t m = std::min(kChunk, rows - r0);
    const Tensor xc = slice(x, 0, r0, r0 + m);
    Tensor logits = slice(chunk_buffer, 0, 0, m), total = chunks > 1 ? slice(chunk_sums, 0, r0 / kChunk, r0 / kChunk + 1) : out;
    product(products, xc, w, b, false, logits);
    loss_rows(logits, slice(ids, 0, r0, r0 + m), ignore_index, q, inv_n, grad ? &logits : nullptr, chunks > 1 ? 1.0 : normalizer, total);
    if (!grad) continue;
    // The chunk's share of the linear layer's backward: dx = g w, dw += g^T x, db += the sum of g's rows.
    Tensor dxc = dx.defined() ? slice(dx, 0, r0, r0 + m) : dx;
    kernel(name, &Kernels::linear_backward, {logits})(products.precision(), logits, xc, w, dxc, dw, r0 == 0 ? 0.0f : 1.0f);
    if (db.defined()) strided_add(sum_to(logits, {vocab}), db);
  }
  if (chunks > 1) kernel(name, &Kernels::sum, {out})(chunk_sums, false, normalizer, out);
  if (rows == 0) out.fill(0.0f);
  if (!grad) return out;
  return autograd::record(out, name, {x_in, weight, bias}, [dx, dw, db](const Tensor& g) { return scaled({dx, dw, db}, g); });
}

Tensor label_smoothing_kl(const Tensor& logits, const Tensor& targets, float smoothing, int padding_idx, float normalizer) {
  TFM_CHECK(smoothing >= 0.0f && smoothing < 1.0f, "label_smoothing_kl: smoothing " << smoothing << " outside [0, 1)");
  TFM_CHECK(logits.size(-1) > 2, "label_smoothing_kl: needs a vocabulary larger than 2");
  TFM_CHECK(normalizer > 0.0f, "label_smoothing_kl: normalizer must be positive");
  TFM_CHECK(logits.dim() == 2, "label_smoothing_kl: logits must be [rows, vocab], got " << shape_str(logits.shape()));
  check_targets("label_smoothing_kl", targets, logits.size(0), logits.size(1), padding_idx);
  const float off = smoothing / static_cast<float>(logits.size(-1) - 2);
  return smoothed_loss("label_smoothing_kl", logits, targets, padding_idx, {1.0f - smoothing, off, 0.0f, true}, normalizer);
}

}  // namespace tfm::ops
