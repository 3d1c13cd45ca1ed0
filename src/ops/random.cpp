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

namespace {

Tensor sample_rows(const Tensor& logits, const std::vector<SampledRow>& rows) {
  auto fn = kernel("sample", &Kernels::sample, {logits});
  TFM_CHECK(logits.dim() == 2 && logits.size(1) > 0, "sample: logits must be [rows, vocab], got " << shape_str(logits.shape()));
  TFM_CHECK(static_cast<int64_t>(rows.size()) == logits.size(0), "sample: " << rows.size() << " rows' settings for logits " << shape_str(logits.shape()));
  expect_dtype("sample", "the logits", logits, DType::f32);
  Tensor ids = Tensor::empty({logits.size(0)}, DType::i32, logits.device());
  fn(dense(logits), rows, ids);
  return ids;
}

}  // namespace

Tensor sample(const Tensor& logits, const Sampling& s, Rng& rng) {
  std::vector<SampledRow> rows;
  for (int64_t r = 0; r < logits.size(0); ++r) rows.push_back({s, rng.state() + static_cast<uint64_t>(r)});
  Tensor ids = sample_rows(logits, rows);
  if (s.temperature > 0.0f) rng.set_state(rng.state() + static_cast<uint64_t>(logits.size(0)));
  return ids;
}

Tensor sample(const Tensor& logits, const std::vector<RowSampling>& rows) {
  std::vector<SampledRow> drawn;
  for (const RowSampling& r : rows) drawn.push_back({r.sampling, r.rng->state(), r.seen, r.generated});
  Tensor ids = sample_rows(logits, drawn);
  for (const RowSampling& r : rows)
    if (r.sampling.temperature > 0.0f) r.rng->set_state(r.rng->state() + 1);
  return ids;
}

Tensor sinusoids(int64_t max_len, int64_t d_model, SinusoidLayout layout, int64_t first, Device device) {
  TFM_CHECK(max_len >= 0 && d_model > 0 && first >= 0, "sinusoids: " << max_len << " positions of width " << d_model << " from " << first);
  TFM_CHECK(layout == SinusoidLayout::fairseq ? d_model % 2 == 0 && d_model >= 4 : first == 0,
            "sinusoids: fairseq's tables are of an even width of 4 or more, and only they start past position 0");
  Tensor table = Tensor::empty({max_len, d_model}, DType::f32, device);
  auto fn = kernels(device).sinusoids;
  if (!fn) fail_unimplemented("sinusoids", device);
  fn(table, layout, first);
  return table;
}

}  // namespace tfm::ops
