#pragma once
// Rotary position embeddings (RoFormer; Llama and its relatives): each head's d_k
// values are d_k / 2 pairs, and pair i of the vector at position p is turned by the
// angle p * freq[i]. Queries and keys so turned score by their distance alone.
#include <cstdint>
#include <string>

#include "ops/kernels.h"
#include "tensor/tensor.h"

namespace tfm::ops {

// What stretches the frequencies for contexts longer than training's (config.json's
// rope_scaling, as transformers computes it): "linear" divides every frequency by
// `factor`; "llama3" divides the low ones by `factor`, keeps the high ones and blends
// between (wavelengths against original_max_positions / low_freq_factor and
// / high_freq_factor). Empty type: none.
struct RopeScaling {
  std::string type;
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_positions = 8192;
};

struct Rope {
  double theta = 10000.0;  // rope_theta: freq[i] = theta^(-2i / d_k) before scaling
  RotaryLayout layout = RotaryLayout::half;
  RopeScaling scaling;
};

// freq f32 [head_width / 2] on the host: transformers' inv_freq for heads of `head_width`.
Tensor rotary_frequencies(int64_t head_width, const Rope& rope);

// x [batch, time, heads * d_k] (a view with unit last stride, such as a slice of a fused
// projection) turned at positions i32 [batch, time] (or [1, time] for every row) by freq
// [d_k / 2] (rotary_frequencies, on x's device) -> [batch, time, heads * d_k]. Its
// gradient turns back by the same angles.
Tensor rotary(const Tensor& x, const Tensor& positions, const Tensor& freq, RotaryLayout layout);

}  // namespace tfm::ops
