#include "ops/random.h"

#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

void fill(const char* name, Tensor& t, Distribution d, float a, float b, Rng& rng, uint64_t draws_per_element) {
  auto fn = kernel(name, &Kernels::random_fill, {t});
  TFM_CHECK(t.is_contiguous(), name << ": the tensor must be contiguous");
  expect_dtype(name, "the tensor", t, DType::f32);
  fn(t, d, a, b, rng.state());
  rng.set_state(rng.state() + draws_per_element * static_cast<uint64_t>(t.numel()));
}

}  // namespace

void uniform_(Tensor& t, float lo, float hi, Rng& rng) { fill("uniform_", t, Distribution::uniform, lo, hi, rng, 1); }

void normal_(Tensor& t, float std, Rng& rng) { fill("normal_", t, Distribution::normal, std, 0.0f, rng, 2); }

Tensor sample(const Tensor& logits, const Sampling& s, Rng& rng) {
  auto fn = kernel("sample", &Kernels::sample, {logits});
  TFM_CHECK(logits.dim() == 2 && logits.size(1) > 0, "sample: logits must be [rows, vocab], got " << shape_str(logits.shape()));
  expect_dtype("sample", "the logits", logits, DType::f32);
  Tensor ids = Tensor::empty({logits.size(0)}, DType::i32, logits.device());
  fn(dense(logits), s, rng.state(), ids);
  if (s.temperature > 0.0f) rng.set_state(rng.state() + static_cast<uint64_t>(logits.size(0)));
  return ids;
}

Tensor sinusoids(int64_t max_len, int64_t d_model, bool split, Device device) {
  TFM_CHECK(max_len >= 0 && d_model > 0, "sinusoids: " << max_len << " positions of width " << d_model);
  Tensor table = Tensor::empty({max_len, d_model}, DType::f32, device);
  auto fn = kernels(device).sinusoids;
  if (!fn) fail_unimplemented("sinusoids", device);
  fn(table, split);
  return table;
}

}  // namespace tfm::ops
