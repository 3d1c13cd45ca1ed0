#pragma once
// The element rules of every device's kernels: float to bfloat16 and to IEEE half,
// rounded to nearest even as PyTorch converts, and back; and one element of any dtype
// as any other (ops/convert.h's rules). Compiled for the GPU too (TFM_HOST_DEVICE).
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/dtype.h"
#include "tensor/host_device.h"

namespace tfm {

// Round to nearest even, as PyTorch's float -> bfloat16 conversion; NaN stays NaN.
TFM_HOST_DEVICE inline uint16_t to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN: keep it a (quiet) NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

TFM_HOST_DEVICE inline float from_bf16(uint16_t x) { return std::bit_cast<float>(static_cast<uint32_t>(x) << 16); }

// IEEE 754 half, round to nearest even; past 65504 infinity, NaN stays NaN.
TFM_HOST_DEVICE inline uint16_t to_f16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  const uint32_t abs = f & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;  // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds past 65504: infinity
  if (abs < 0x38800000) {  // below 2^-14: a subnormal half (or zero)
    // The value in units of 2^-24, rounded to nearest even by adding it to 0.5, whose
    // unit in the last place is 2^-24: the FPU does the rounding (1024 units is 2^-14,
    // the smallest normal half, which the same bits spell).
    const float sum = std::bit_cast<float>(abs) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(sum) - 0x3f000000);
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  const uint32_t odd = (abs >> 13) & 1;
  return sign | static_cast<uint16_t>((abs - 0x38000000 + 0xfff + odd) >> 13);
}

TFM_HOST_DEVICE inline float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float out;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24 (exact)
    out = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  } else {
    out = std::bit_cast<float>(exponent == 31 ? 0x7f800000 | (mantissa << 13) : ((exponent + 112) << 23) | (mantissa << 13));
  }
  return sign ? -out : out;
}

// A 16-bit float's value as float; any other element as it is.
template <class S>
TFM_HOST_DEVICE auto widen(S v) {
  if constexpr (std::is_same_v<S, bf16_bits>) return from_bf16(v.bits);
  else if constexpr (std::is_same_v<S, f16_bits>) return from_f16(v.bits);
  else return v;
}

// One element of type S as type D (the rules of ops/convert.h): 16-bit floats through
// float; float to integer truncated toward zero, saturated, NaN as 0; non-zero as true;
// integer to integer as C++ converts.
template <class D, class S>
TFM_HOST_DEVICE D convert_value(S s) {
  const auto v = widen(s);
  using V = decltype(v);
  if constexpr (std::is_same_v<D, bf16_bits>) return {to_bf16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, f16_bits>) return {to_f16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, bool>) return v != V{0};
  else if constexpr (std::is_floating_point_v<V> && std::is_integral_v<D>) {
    if (v != v) return D{0};  // NaN
    if (v <= static_cast<V>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (v >= static_cast<V>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

}  // namespace tfm
