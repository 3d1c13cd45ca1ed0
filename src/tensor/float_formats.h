#pragma once
// The 16-bit float formats' element rules, for every device's kernels: float to
// bfloat16 and to IEEE half, rounded to nearest even as PyTorch converts, and back.
#include <bit>
#include <cmath>
#include <cstdint>

namespace tfm {

// Round to nearest even, as PyTorch's float -> bfloat16 conversion; NaN stays NaN.
inline uint16_t to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN: keep it a (quiet) NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float from_bf16(uint16_t x) { return std::bit_cast<float>(static_cast<uint32_t>(x) << 16); }

// IEEE 754 half, round to nearest even; past 65504 infinity, NaN stays NaN.
inline uint16_t to_f16(float x) {
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

inline float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float out;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    out = std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    out = std::bit_cast<float>(exponent == 31 ? 0x7f800000 | (mantissa << 13) : ((exponent + 112) << 23) | (mantissa << 13));
  }
  return sign ? -out : out;
}

}  // namespace tfm
