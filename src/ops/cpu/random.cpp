// Random fills, token sampling and the sinusoid position table.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/host_rules.h"
#include "tensor/error.h"
#include "tensor/rng.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

void random_fill(Tensor& t, Distribution d, float a, float b, uint64_t counter) {
  float* p = t.data();
  parallel_for(t.numel(), t.numel() > (1 << 15), [&](int64_t i) {
    if (d == Distribution::uniform) {
      Rng r(counter + static_cast<uint64_t>(i));
      p[i] = static_cast<float>(r.uniform(a, b));
    } else {
      Rng r(counter + 2 * static_cast<uint64_t>(i));
      p[i] = static_cast<float>(r.normal()) * a;
    }
  });
}


void sample(const Tensor& logits, const std::vector<SampledRow>& rows, Tensor& ids) {
  const int64_t vocab = logits.size(1);
  int32_t* out = ids.data_as<int32_t>();
  for (size_t r = 0; r < rows.size(); ++r) out[r] = sample_row(logits.data() + static_cast<int64_t>(r) * vocab, vocab, rows[r]);
}

namespace {

// fairseq's table (SinusoidLayout::fairseq) in single precision, each step rounded as
// torch rounds it in M2M100SinusoidalPositionalEmbedding.get_embedding: the frequency
// exp(c * -rate) and the angle pos * frequency in float; then sin and cos of that float.
void fairseq_sinusoids(Tensor& table, int64_t first) {
  const int64_t max_len = table.size(0), d_model = table.size(1), half = d_model / 2;
  const float rate = static_cast<float>(std::log(10000.0) / static_cast<double>(half - 1));
  std::vector<float> frequency(static_cast<size_t>(half));
  for (int64_t c = 0; c < half; ++c) frequency[static_cast<size_t>(c)] = std::exp(static_cast<float>(c) * -rate);
  float* p = table.data();
  parallel_for(max_len, max_len * d_model > (1 << 15), [&](int64_t row) {
    const float pos = static_cast<float>(first + row);
    for (int64_t c = 0; c < half; ++c) {
      const double angle = pos * frequency[static_cast<size_t>(c)];  // (the product rounded to float first)
      p[row * d_model + c] = static_cast<float>(std::sin(angle));
      p[row * d_model + half + c] = static_cast<float>(std::cos(angle));
    }
  });
}

}  // namespace

void sinusoids(Tensor& table, SinusoidLayout layout, int64_t first) {
  if (layout == SinusoidLayout::fairseq) return fairseq_sinusoids(table, first);
  const bool split = layout == SinusoidLayout::split;
  const int64_t max_len = table.size(0), d_model = table.size(1), half = (d_model + 1) / 2;
  float* p = table.data();
  // angle(pos, i) = pos / 10000^(2i/d); interleaved: PE(pos, 2i) = sin, PE(pos, 2i+1) = cos;
  // split: PE(pos, i) = sin and PE(pos, half + i) = cos.
  // sin and cos of every angle took 13 ms of `tfm translate`'s start (a `small` model's
  // 5000 x 256 table: 640,000 of each). So each run of kRun positions starts from the
  // exact sin and cos of its first angle a, and turns by the exact sin and cos of k w
  // (w the column's frequency, k < kRun): sin(a + kw) = sin a cos kw + cos a sin kw, and
  // cos(a + kw) = cos a cos kw - sin a sin kw, in double, within a few units of 1e-16 of
  // the direct values: rounded to float, about 1 value in 500,000 lands one unit in the
  // last place from the direct one's rounding (a 512-wide table: 2 of 2.6 million).
  // 40 times fewer sines.
  constexpr int64_t kRun = 64;
  std::vector<double> frequency(static_cast<size_t>(half)), turn_sin(static_cast<size_t>(half * kRun)), turn_cos(turn_sin.size());
  for (int64_t i = 0; i < d_model; i += 2) frequency[i / 2] = std::exp(static_cast<double>(i) * -(std::log(10000.0) / d_model));
  for (int64_t c = 0; c < half; ++c)
    for (int64_t k = 0; k < kRun; ++k) {
      turn_sin[c * kRun + k] = std::sin(static_cast<double>(k) * frequency[c]);
      turn_cos[c * kRun + k] = std::cos(static_cast<double>(k) * frequency[c]);
    }
  const int64_t runs = (max_len + kRun - 1) / kRun;
  parallel_for(runs, max_len * d_model > (1 << 15), [&](int64_t run) {
    const int64_t first = run * kRun;
    for (int64_t i = 0; i < d_model; i += 2) {
      const int64_t c = i / 2, sin_at = split ? c : i, cos_at = split ? half + c : i + 1;
      const double a = static_cast<double>(first) * frequency[c], sin_a = std::sin(a), cos_a = std::cos(a);
      for (int64_t pos = first; pos < std::min(first + kRun, max_len); ++pos) {
        const double ts = turn_sin[c * kRun + (pos - first)], tc = turn_cos[c * kRun + (pos - first)];
        p[pos * d_model + sin_at] = static_cast<float>(sin_a * tc + cos_a * ts);
        if (i + 1 < d_model) p[pos * d_model + cos_at] = static_cast<float>(cos_a * tc - sin_a * ts);
      }
    }
  });
}

}  // namespace tfm::ops::cpu
