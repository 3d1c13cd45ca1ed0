// The linear layers' products in every precision (ops/linear_products.h), and the
// frozen weights' converted copies they keep.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/cpu/gemm.h"
#include "ops/cpu/kernels.h"
#include "tensor/error.h"
#include "tensor/float_formats.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {
namespace {

// A weight as ops::linear sees it: its address and shape.
using WeightKey = std::tuple<const float*, int64_t, int64_t>;

struct Int8Weight {
  std::vector<int8_t> q;     // [out, in]
  std::vector<float> scale;  // [out]: w[r, :] ~= q[r, :] * scale[r]
};

void to_bf16(const float* x, int64_t n, bf16* out) {
  parallel_for(n, n > (1 << 16), [&](int64_t i) { out[i] = tfm::to_bf16(x[i]); });
}

// The CPU's copies of one model's frozen weights.
struct CpuCopies : FrozenCopies {
  mutable std::mutex mutex;  // translation workers share the copies (map nodes never move)
  std::map<WeightKey, std::vector<bf16>> bf16_copies;
  std::map<WeightKey, Int8Weight> int8_copies;
  std::map<WeightKey, PackedWeight> packed_copies;  // f32

  size_t count() const override {
    const std::lock_guard<std::mutex> lock(mutex);
    return bf16_copies.size() + int8_copies.size() + packed_copies.size();
  }

  bool stands_in_for(const void* begin, size_t bytes) const override {
    const std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::pair<const char*, const char*>> held;  // the weights' bytes copied
    auto add = [&](const WeightKey& k) {
      const char* p = reinterpret_cast<const char*>(std::get<0>(k));
      held.emplace_back(p, p + std::get<1>(k) * std::get<2>(k) * static_cast<int64_t>(sizeof(float)));
    };
    for (const auto& entry : bf16_copies) add(entry.first);
    for (const auto& entry : int8_copies) add(entry.first);
    for (const auto& [key, packed] : packed_copies)
      if (packed.valid()) add(key);  // (an invalid one: the products read the f32 weight)
    std::sort(held.begin(), held.end());
    const char *at = static_cast<const char*>(begin), *end = at + bytes;
    for (auto it = held.begin(); it != held.end() && it->first <= at && at < end; ++it) at = std::max(at, it->second);
    return at >= end;
  }
};

std::unique_ptr<FrozenCopies> make_copies() { return std::make_unique<CpuCopies>(); }

// The copy of weight w[out, in] in `copies` (a member of FrozenCopies), made by `make`
// on first use; null where the weights are not frozen (the caller then converts w itself).
template <class Copy, class Make>
const Copy* frozen_copy(CpuCopies* frozen, std::map<WeightKey, Copy> CpuCopies::*copies, const float* w, int64_t out, int64_t in,
                        Make make) {
  if (!frozen) return nullptr;
  const std::lock_guard<std::mutex> lock(frozen->mutex);
  std::map<WeightKey, Copy>& held = frozen->*copies;
  auto it = held.find({w, out, in});
  if (it == held.end()) it = held.emplace(WeightKey{w, out, in}, make()).first;
  return &it->second;
}

std::vector<bf16> bf16_copy(const float* w, int64_t n) {
  std::vector<bf16> out(static_cast<size_t>(n));
  to_bf16(w, n, out.data());
  return out;
}

// Symmetric quantisation of each row of x[rows, cols] to [-127, 127].
void quantize_rows(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scale) {
  parallel_for(rows, rows * cols > (1 << 15), [&](int64_t r) {
    const float* xr = x + r * cols;
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(xr[c]));
    const float s = amax > 0.0f ? amax / 127.0f : 1.0f, inv = 1.0f / s;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = xr[c] * inv;  // NaN for a non-finite row: garbage out, but no undefined conversion
      q[r * cols + c] = static_cast<int8_t>(std::isnan(v) ? 0.0f : std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
    }
    scale[r] = s;
  });
}

Int8Weight quantize_weight(const float* w, int64_t out, int64_t in) {
  Int8Weight q{std::vector<int8_t>(static_cast<size_t>(out * in)), std::vector<float>(static_cast<size_t>(out))};
  quantize_rows(w, out, in, q.q.data(), q.scale.data());
  return q;
}

// A weight's address keys its frozen copy (Tensor::address); its values are read
// (w.data()) only to make one, or where there is none: a released weight
// (Storage::release) has nothing but its copy.
const float* key_of(const Tensor& w) { return static_cast<const float*>(w.address()); }

void linear_bf16(CpuCopies* frozen_copies, const float* x, int64_t rows, int64_t in, const Tensor& w, int64_t out, float beta, float* y) {
  thread_local std::vector<bf16> xb, wb;
  xb.resize(static_cast<size_t>(rows * in));
  to_bf16(x, rows * in, xb.data());
  const std::vector<bf16>* frozen =
      frozen_copy(frozen_copies, &CpuCopies::bf16_copies, key_of(w), out, in, [&] { return bf16_copy(w.data(), out * in); });
  const bf16* wp = frozen ? frozen->data() : nullptr;
  if (!frozen) {
    wb.resize(static_cast<size_t>(out * in));
    to_bf16(w.data(), out * in, wb.data());
    wp = wb.data();
  }
  gemm_bf16(false, true, rows, out, in, 1.0f, xb.data(), in, wp, in, beta, y, out);
}

void linear_int8(CpuCopies* frozen, const float* x, int64_t rows, int64_t in, const Tensor& w, int64_t out, float beta, float* y) {
  Int8Weight local;
  const Int8Weight* qw = frozen_copy(frozen, &CpuCopies::int8_copies, key_of(w), out, in, [&] { return quantize_weight(w.data(), out, in); });
  if (!qw) {
    local = quantize_weight(w.data(), out, in);
    qw = &local;
  }
  thread_local std::vector<int8_t> qx;
  thread_local std::vector<float> sx;
  thread_local std::vector<int32_t> acc;
  qx.resize(static_cast<size_t>(rows * in));
  sx.resize(static_cast<size_t>(rows));
  acc.resize(static_cast<size_t>(rows * out));
  quantize_rows(x, rows, in, qx.data(), sx.data());
  gemm_s8(rows, out, in, qx.data(), in, qw->q.data(), in, acc.data(), out);
  // Plain pointers: inside the parallel region the thread_local names would be the workers' own.
  const float *sw = qw->scale.data(), *sr = sx.data();
  const int32_t* a = acc.data();
  parallel_for(rows, rows * out > (1 << 15), [&](int64_t r) {
    for (int64_t c = 0; c < out; ++c) {
      const float v = static_cast<float>(a[r * out + c]) * sr[r] * sw[c];
      y[r * out + c] = beta == 0.0f ? v : beta * y[r * out + c] + v;
    }
  });
}

}  // namespace

void linear(const LinearProducts& products, const Tensor& x_t, const Tensor& w_t, const Tensor& bias_t, bool relu, Tensor& y_t) {
  const int64_t in = w_t.size(1), out = w_t.size(0), rows = x_t.numel() / in;
  const float *x = x_t.data(), *bias = bias_t.defined() ? bias_t.data() : nullptr;
  float* y = y_t.data();
  const Precision precision = products.precision();
  CpuCopies* frozen = static_cast<CpuCopies*>(products.frozen_copies(make_copies));
  if (precision == Precision::f32) {
    const PackedWeight* packed =
        frozen_copy(frozen, &CpuCopies::packed_copies, key_of(w_t), out, in, [&] { return PackedWeight(w_t.data(), out, in); });
    if (packed && packed->valid()) {
      packed->linear(x, rows, bias, y, relu);
      return;
    }
  }
  float beta = 0.0f;
  if (bias) {  // y = bias, then y += x w^T
    parallel_for(rows, rows * out > (1 << 15), [&](int64_t r) { std::copy_n(bias, out, y + r * out); });
    beta = 1.0f;
  }
  switch (precision) {
    case Precision::f32: gemm(false, true, rows, out, in, 1.0f, x, in, w_t.data(), in, beta, y, out); break;
    case Precision::bf16: linear_bf16(frozen, x, rows, in, w_t, out, beta, y); break;
    case Precision::int8: linear_int8(frozen, x, rows, in, w_t, out, beta, y); break;
  }
  if (relu)
    parallel_for(rows, rows * out > (1 << 15), [&](int64_t r) {
      for (float* v = y + r * out; v < y + (r + 1) * out; ++v) *v = *v > 0.0f ? *v : 0.0f;
    });
}

void linear_backward(Precision precision, const Tensor& g_t, const Tensor& x_t, const Tensor& w_t, Tensor& dx_t, Tensor& dw_t,
                     float dw_beta) {
  const int64_t in = w_t.size(1), out = w_t.size(0), rows = x_t.numel() / in;
  const float *g = g_t.data(), *x = x_t.data(), *w = w_t.data();
  float *dx = dx_t.defined() ? dx_t.data() : nullptr, *dw = dw_t.defined() ? dw_t.data() : nullptr;  // (null: not wanted)
  if (precision == Precision::f32) {
    if (dx) gemm(false, false, rows, in, out, 1.0f, g, out, w, in, 0.0f, dx, in);    // dx = g w
    if (dw) gemm(true, false, out, in, rows, 1.0f, g, out, x, in, dw_beta, dw, in);  // dw = g^T x + dw_beta dw
    return;
  }
  // Reused between calls: fresh buffers of this size would cost a page fault per 4 KiB.
  thread_local std::vector<bf16> gb, xb, wb;
  gb.resize(static_cast<size_t>(rows * out));
  to_bf16(g, rows * out, gb.data());
  if (dx) {
    wb.resize(static_cast<size_t>(out * in));
    to_bf16(w, out * in, wb.data());
    gemm_bf16(false, false, rows, in, out, 1.0f, gb.data(), out, wb.data(), in, 0.0f, dx, in);
  }
  if (dw) {
    xb.resize(static_cast<size_t>(rows * in));
    to_bf16(x, rows * in, xb.data());
    gemm_bf16(true, false, out, in, rows, 1.0f, gb.data(), out, xb.data(), in, dw_beta, dw, in);
  }
}

void matmul(bool trans_a, bool trans_b, const Tensor& a, const Tensor& b, float beta, Tensor& out) {
  const int64_t m = out.size(-2), n = out.size(-1), k = trans_a ? a.size(-2) : a.size(-1), batch = out.numel() / (m * n);
  const int64_t lda = a.size(-1), ldb = b.size(-1);
  for (int64_t i = 0; i < batch; ++i)
    gemm(trans_a, trans_b, m, n, k, 1.0f, a.data() + i * m * k, lda, b.data() + i * k * n, ldb, beta, out.data() + i * m * n, n);
}

}  // namespace tfm::ops::cpu
