#include "ops/convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "autograd/autograd.h"
#include "ops/reduced_precision.h"
#include "tensor/error.h"
#include "threads/parallel.h"

namespace tfm::ops {

uint16_t to_f16(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  const uint32_t abs = f & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;  // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds past 65504: infinity
  if (abs < 0x38800000) {  // below 2^-14: a subnormal half (or zero)
    // The value in units of 2^-24, rounded to nearest even by adding it to 0.5, whose
    // unit in the last place is 2^-24: the FPU does the rounding (1024 units is 2^-14,
    // the smallest normal half, which the same bits spell).
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    const float sum = magnitude + 0.5f;
    uint32_t sum_bits;
    std::memcpy(&sum_bits, &sum, 4);
    return sign | static_cast<uint16_t>(sum_bits - 0x3f000000);
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  const uint32_t odd = (abs >> 13) & 1;
  return sign | static_cast<uint16_t>((abs - 0x38000000 + 0xfff + odd) >> 13);
}

float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float out;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    out = std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    const uint32_t bits = exponent == 31 ? 0x7f800000 | (mantissa << 13) : ((exponent + 112) << 23) | (mantissa << 13);
    std::memcpy(&out, &bits, 4);
  }
  return sign ? -out : out;
}

namespace {

template <class S>
auto widen(S v) {
  if constexpr (std::is_same_v<S, bf16_bits>) return from_bf16(v.bits);
  else if constexpr (std::is_same_v<S, f16_bits>) return from_f16(v.bits);
  else return v;
}

// One element of type S as type D (the rules in convert.h).
template <class D, class S>
D convert_value(S s) {
  const auto v = widen(s);
  using V = decltype(v);
  if constexpr (std::is_same_v<D, bf16_bits>) return {to_bf16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, f16_bits>) return {to_f16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, bool>) return v != V{0};
  else if constexpr (std::is_floating_point_v<V> && std::is_integral_v<D>) {
    if (std::isnan(v)) return D{0};
    if (v <= static_cast<V>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (v >= static_cast<V>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
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

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  TFM_CHECK(!(x.requires_grad() && autograd::grad_enabled()),
            "converting a tensor that takes part in autograd to " << to_string(dtype) << " is not differentiable; detach it first");
  const Tensor src = x.is_contiguous() ? x : x.clone();
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  with_type(src.dtype(), [&](auto s) {
    with_type(dtype, [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      const S* in = src.data_as<S>();
      D* o = out.data_as<D>();
      parallel_chunks(src.numel(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) o[i] = convert_value<D>(in[i]);
      });
    });
  });
  return out;
}

Tensor from_pixels(const Tensor& pixels) {
  TFM_CHECK(pixels.dtype() == DType::u8, "pixels must be u8, got " << to_string(pixels.dtype()));
  const Tensor src = pixels.is_contiguous() ? pixels : pixels.clone();
  Tensor out = Tensor::empty(src.shape());
  const uint8_t* in = src.data_as<uint8_t>();
  float* o = out.data();
  parallel_chunks(src.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = in[i] / 127.5f - 1.0f;
  });
  return out;
}

Tensor to(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);  // fails where the build has no such device
  out.copy_from(x);
  return out;
}

}  // namespace tfm::ops
