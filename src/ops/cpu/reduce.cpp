// Reductions, the optimiser's update and dtype conversions.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/kernels.h"
#include "tensor/float_formats.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

double sum(const Tensor& x, bool squares) {
  // Fixed-size blocks summed in order: the result does not depend on thread count.
  const float* p = x.data();
  const int64_t n = x.numel(), block = 4096, nblocks = (n + block - 1) / block;
  std::vector<double> partial(nblocks, 0.0);
  parallel_for(nblocks, nblocks > 8, [&](int64_t b) {
    double acc = 0.0;
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) acc += squares ? static_cast<double>(p[i]) * p[i] : p[i];
    partial[b] = acc;
  });
  double total = 0.0;
  for (double v : partial) total += v;
  return total;
}

void adam(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamUpdate& u) {
  float* p = param.data();
  float* m = exp_avg.data();
  float* v = exp_avg_sq.data();
  const float* gp = grad.data();
  const int64_t n = param.numel();
  parallel_for(n, n > (1 << 14), [&](int64_t i) {
    const float gi = u.l2 != 0.0f ? gp[i] + u.l2 * p[i] : gp[i];
    p[i] *= u.shrink;
    m[i] = m[i] * u.beta1 + gi * (1.0f - u.beta1);
    v[i] = v[i] * u.beta2 + gi * gi * (1.0f - u.beta2);
    const float denom = std::sqrt(v[i]) / u.bc2_sqrt + u.eps;
    p[i] -= u.step_size * (m[i] / denom);
  });
}

namespace {

template <class S>
auto widen(S v) {
  if constexpr (std::is_same_v<S, bf16_bits>) return from_bf16(v.bits);
  else if constexpr (std::is_same_v<S, f16_bits>) return from_f16(v.bits);
  else return v;
}

// One element of type S as type D (the rules in ops/convert.h).
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

void convert(const Tensor& src, Tensor& dst) {
  with_type(src.dtype(), [&](auto s) {
    with_type(dst.dtype(), [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      const S* in = src.data_as<S>();
      D* o = dst.data_as<D>();
      parallel_chunks(src.numel(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) o[i] = convert_value<D>(in[i]);
      });
    });
  });
}

void from_pixels(const Tensor& pixels, Tensor& out) {
  const uint8_t* in = pixels.data_as<uint8_t>();
  float* o = out.data();
  parallel_chunks(pixels.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = in[i] / 127.5f - 1.0f;
  });
}

}  // namespace tfm::ops::cpu
