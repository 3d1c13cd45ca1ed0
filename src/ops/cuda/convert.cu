// Dtype conversions on the GPU, element for element the CPU's (ops/convert.h's rules,
// tensor/float_formats.h's bits), and u8 pixels to [-1, 1].
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace tfm::ops::cuda {

namespace {

// tensor/float_formats.h's rules on the device, bit for bit (those are host-only).
// Round to nearest even; NaN stays a (quiet) NaN.
__device__ uint16_t to_bf16(float x) {
  const uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ float from_bf16(uint16_t x) { return __uint_as_float(static_cast<uint32_t>(x) << 16); }

// IEEE half, round to nearest even; past 65504 infinity, NaN stays NaN.
__device__ uint16_t to_f16(float x) {
  const uint32_t f = __float_as_uint(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  const uint32_t abs = f & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds past 65504: infinity
  if (abs < 0x38800000) {  // below 2^-14: a subnormal half (or zero), rounded by adding 0.5 (ulp 2^-24)
    const float sum = __uint_as_float(abs) + 0.5f;
    return sign | static_cast<uint16_t>(__float_as_uint(sum) - 0x3f000000);
  }
  const uint32_t odd = (abs >> 13) & 1;  // rebias the exponent, round the 13 dropped bits to nearest even
  return sign | static_cast<uint16_t>((abs - 0x38000000 + 0xfff + odd) >> 13);
}

__device__ float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float out;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24 (exact)
    out = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  } else {
    out = __uint_as_float(exponent == 31 ? 0x7f800000 | (mantissa << 13) : ((exponent + 112) << 23) | (mantissa << 13));
  }
  return sign ? -out : out;
}

template <class S>
__device__ auto widen(S v) {
  if constexpr (std::is_same_v<S, bf16_bits>) return from_bf16(v.bits);
  else if constexpr (std::is_same_v<S, f16_bits>) return from_f16(v.bits);
  else return v;
}

// One element of type S as type D, as cpu/reduce.cpp's convert_value: 16-bit floats
// through float; float to integer truncated toward zero, saturated, NaN as 0; non-zero
// as true; integer to integer as C++ converts.
template <class D, class S>
__device__ D convert_value(S s) {
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

template <class D, class S>
__global__ void convert_kernel(const S* in, D* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = convert_value<D>(in[i]);
}

// out [n] = p / 127.5 - 1 in float, as the CPU computes it.
__global__ void from_pixels_kernel(const uint8_t* in, float* out, int64_t n) {
  TFM_GRID_STRIDE(i, n) out[i] = in[i] / 127.5f - 1.0f;
}

// Calls f(T{}) with the C++ type of `dtype`'s elements.
template <class F>
void with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16_bits{});
    case DType::f16: return f(f16_bits{});
    case DType::i64: return f(int64_t{});
    case DType::i32: return f(int32_t{});
    case DType::i8: return f(int8_t{});
    case DType::u8: return f(uint8_t{});
    case DType::boolean: return f(bool{});
  }
}

}  // namespace

void convert(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  with_type(src.dtype(), [&](auto s) {
    with_type(dst.dtype(), [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      convert_kernel<D, S><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<S>(src), ptr<D>(dst), n);
      check_launch("convert");
    });
  });
}

void from_pixels(const Tensor& pixels, Tensor& out) {
  const int64_t n = pixels.numel();
  if (n == 0) return;
  from_pixels_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<uint8_t>(pixels), ptr<float>(out), n);
  check_launch("from_pixels");
}

}  // namespace tfm::ops::cuda
