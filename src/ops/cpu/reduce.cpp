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

void sum(const Tensor& x, bool squares, double divisor, Tensor& out) {
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
  const double mean = total / divisor;
  float* o = out.data();
  o[0] = static_cast<float>(mean);
  if (out.numel() == 2) o[1] = static_cast<float>(mean - o[0]);
}

void clip_to_norm(Tensor& x, const Tensor& squares, float max_norm) {
  const float* s = squares.data();
  const double coef = max_norm / (std::sqrt(static_cast<double>(s[0]) + s[1]) + 1e-6);
  if (!(coef < 1.0)) return;
  const float c = static_cast<float>(coef);
  float* p = x.data();
  parallel_chunks(x.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] *= c;
  });
}

namespace {

// One parameter's elements [begin, end) of an Adam step (torch.optim.Adam's order).
void adam_range(AdamTensors t, const AdamUpdate& u, int64_t begin, int64_t end) {  // (t: handles, to write through)
  float* p = t.param.data();
  float* m = t.exp_avg.data();
  float* v = t.exp_avg_sq.data();
  const float* g = t.grad.data();
  const float shrink = t.decays ? u.shrink : 1.0f;
  for (int64_t i = begin; i < end; ++i) {
    const float gi = u.l2 != 0.0f ? g[i] + u.l2 * p[i] : g[i];
    p[i] *= shrink;
    m[i] = m[i] * u.beta1 + gi * (1.0f - u.beta1);
    v[i] = v[i] * u.beta2 + gi * gi * (1.0f - u.beta2);
    const float denom = std::sqrt(v[i]) / u.bc2_sqrt + u.eps;
    p[i] -= u.step_size * (m[i] / denom);
  }
}

}  // namespace

void adam(const std::vector<AdamTensors>& params, const AdamUpdate& u) {
  // Every parameter cut into pieces of at most 16K elements, the pieces shared by the threads.
  constexpr int64_t kPiece = 1 << 14;
  std::vector<std::pair<size_t, int64_t>> pieces;  // (parameter, first element)
  for (size_t t = 0; t < params.size(); ++t)
    for (int64_t i = 0; i < params[t].param.numel(); i += kPiece) pieces.emplace_back(t, i);
  parallel_for(static_cast<int64_t>(pieces.size()), pieces.size() > 1, [&](int64_t k) {
    const auto [t, first] = pieces[static_cast<size_t>(k)];
    adam_range(params[t], u, first, std::min(first + kPiece, params[t].param.numel()));
  });
}

void convert(const Tensor& src, Tensor& dst) {
  with_dtype(src.dtype(), [&](auto s) {
    with_dtype(dst.dtype(), [&](auto d) {
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
