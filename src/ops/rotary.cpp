#include "ops/rotary.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tensor/error.h"

namespace tfm::ops {

namespace {

// transformers' _compute_llama3_parameters: wavelengths longer than the original
// context's low-frequency bound are stretched by `factor`, shorter than its
// high-frequency bound kept, and those between blended.
double llama3_frequency(double f, const RopeScaling& s) {
  const double context = static_cast<double>(s.original_max_positions), wavelength = 2.0 * std::numbers::pi / f;
  if (wavelength < context / s.high_freq_factor) return f;
  if (wavelength > context / s.low_freq_factor) return f / s.factor;
  const double smooth = (context / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

}  // namespace

Tensor rotary_frequencies(int64_t head_width, const Rope& rope) {
  TFM_CHECK(head_width > 0 && head_width % 2 == 0, "rotary: heads of " << head_width << " values do not make pairs");
  const RopeScaling& s = rope.scaling;
  TFM_CHECK(s.type.empty() || s.type == "linear" || s.type == "llama3",
            "rope_scaling type '" << s.type << "' is not supported (tfm has linear and llama3)");
  TFM_CHECK(s.type.empty() || s.factor >= 1.0, "rope_scaling factor " << s.factor << " is below 1");
  TFM_CHECK(s.type != "llama3" || s.high_freq_factor > s.low_freq_factor,
            "rope_scaling: high_freq_factor " << s.high_freq_factor << " must exceed low_freq_factor " << s.low_freq_factor);
  std::vector<float> freq(static_cast<size_t>(head_width / 2));
  for (size_t i = 0; i < freq.size(); ++i) {
    // In f32 as transformers: 1 / theta^(2i / d_k).
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_width);
    const double f = 1.0f / std::pow(static_cast<float>(rope.theta), exponent);
    freq[i] = static_cast<float>(s.type == "linear" ? f / s.factor : s.type == "llama3" ? llama3_frequency(f, s) : f);
  }
  return Tensor::from_values<float>({static_cast<int64_t>(freq.size())}, freq);
}

Tensor rotary(const Tensor& x, const Tensor& positions, const Tensor& freq, RotaryLayout layout) {
  auto fn = kernel("rotary", &Kernels::rotary, {x, positions, freq});
  expect_dtype("rotary", "x", x, DType::f32), expect_dtype("rotary", "freq", freq, DType::f32);
  expect_dtype("rotary", "positions", positions, DType::i32);
  TFM_CHECK(x.dim() == 3 && x.strides()[2] == 1, "rotary: x must be [batch, time, heads*d_k] with unit last stride, got " << shape_str(x.shape()));
  const int64_t pairs = freq.numel();
  TFM_CHECK(freq.dim() == 1 && pairs > 0 && x.size(2) % (2 * pairs) == 0,
            "rotary: " << pairs << " frequencies do not divide rows of " << x.size(2) << " into heads");
  TFM_CHECK(positions.dim() == 2 && (positions.size(0) == 1 || positions.size(0) == x.size(0)) && positions.size(1) == x.size(1),
            "rotary: positions must be [" << x.size(0) << " or 1, " << x.size(1) << "], got " << shape_str(positions.shape()));
  const Tensor at = dense(positions), f = dense(freq);
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  fn(x, at, f, layout, 1.0f, out);
  return autograd::record(out, "rotary", {x}, [at, f, layout](const Tensor& g) {
    Tensor dx = Tensor::empty(g.shape(), DType::f32, g.device());
    kernel("rotary", &Kernels::rotary, {g, at})(dense(g), at, f, layout, -1.0f, dx);  // the inverse turn
    return std::vector<Tensor>{dx};
  });
}

}  // namespace tfm::ops
