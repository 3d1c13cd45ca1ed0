// The rotary embeddings' kernel: each row's angles computed once, for all its heads.
#include <cmath>
#include <vector>

#include "ops/cpu/kernels.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

void rotary(const Tensor& x, const Tensor& positions, const Tensor& freq, RotaryLayout layout, float sign, Tensor& out) {
  const int64_t T = x.size(1), D = x.size(2), pairs = freq.numel(), dk = 2 * pairs, heads = D / dk, rows = x.size(0) * T;
  const bool interleaved = layout == RotaryLayout::interleaved;
  // Pair i of a head: values (i, i + d_k / 2) (Hugging Face's rotate_half) or (2i, 2i + 1).
  const int64_t first_step = interleaved ? 2 : 1, second = interleaved ? 1 : pairs;
  const int32_t* at = positions.data_as<int32_t>();
  const float* f = freq.data();
  parallel_region(x.numel() > (1 << 14), [&] {
    std::vector<float> cosines(static_cast<size_t>(pairs)), sines(static_cast<size_t>(pairs));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / T, t = r % T;
      const float p = static_cast<float>(at[(positions.size(0) == 1 ? 0 : b) * T + t]);
      for (int64_t i = 0; i < pairs; ++i) cosines[i] = std::cos(p * f[i]), sines[i] = sign * std::sin(p * f[i]);  // (angles in f32, as transformers')
      const float* xr = x.data() + b * x.strides()[0] + t * x.strides()[1];
      float* o = out.data() + r * D;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < pairs; ++i) {
          const int64_t u = h * dk + i * first_step, v = u + second;
          o[u] = xr[u] * cosines[i] - xr[v] * sines[i];
          o[v] = xr[v] * cosines[i] + xr[u] * sines[i];
        }
    }
  });
}

}  // namespace tfm::ops::cpu
