#include "io/finite.h"

#include <algorithm>
#include <cmath>

#include "io/safetensors.h"

namespace tfm::io {

bool all_finite(const Tensor& t) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f16 && t.dtype() != DType::bf16) return true;
  const Tensor f = to_f32(t);
  return std::all_of(f.data(), f.data() + f.numel(), [](float v) { return std::isfinite(v); });
}

}  // namespace tfm::io
