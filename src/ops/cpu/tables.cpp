// Indexing kernels: embedding lookups, row gathers, comparisons, image patches, position ranges.
#include <cstring>

#include "ops/cpu/kernels.h"
#include "tensor/error.h"
#include "threads/parallel.h"

namespace tfm::ops::cpu {

void embedding(const Tensor& w, const Tensor& ids_t, Tensor& out) {
  const int64_t d = w.size(1), n = ids_t.numel();
  const int32_t* ids = ids_t.data_as<int32_t>();  // (each a row of w: ops::checked_indices)
  parallel_for(n, n * d > (1 << 15), [&](int64_t i) { std::memcpy(out.data() + i * d, w.data() + ids[i] * d, sizeof(float) * d); });
}

void embedding_backward(const Tensor& ids_t, const Tensor& g, Tensor& dw) {
  // Serial scatter-add: ids repeat, and a fixed order keeps results reproducible.
  const int64_t d = dw.size(1), n = ids_t.numel();
  const int32_t* ids = ids_t.data_as<int32_t>();
  float* pdw = dw.data();
  std::memset(pdw, 0, sizeof(float) * dw.numel());
  for (int64_t i = 0; i < n; ++i) {
    float* row = pdw + static_cast<int64_t>(ids[i]) * d;
    const float* gr = g.data() + i * d;
    for (int64_t j = 0; j < d; ++j) row[j] += gr[j];
  }
}

void arange(int64_t start, Tensor& out) {
  int32_t* p = out.data_as<int32_t>();
  for (int64_t i = 0; i < out.numel(); ++i) p[i] = static_cast<int32_t>(start + i);
}

void gather_rows(const Tensor& x, const Tensor& rows_t, Tensor& out) {
  const int64_t n = rows_t.numel(), bytes = x.size(0) > 0 ? x.numel() / x.size(0) * static_cast<int64_t>(size_of(x.dtype())) : 0;
  const int64_t* rows = rows_t.data_as<int64_t>();
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * bytes, src + rows[i] * bytes, static_cast<size_t>(bytes));  // (rows of x: checked)
}

void gather_rows_backward(const Tensor& rows_t, const Tensor& g, Tensor& dx) {
  const int64_t n = rows_t.numel(), row = dx.size(0) > 0 ? dx.numel() / dx.size(0) : 0;
  const int64_t* rows = rows_t.data_as<int64_t>();
  std::memset(dx.data(), 0, sizeof(float) * dx.numel());
  for (int64_t i = 0; i < n; ++i) {  // a row gathered twice gets both gradients
    float* d = dx.data() + rows[i] * row;
    const float* gi = g.data() + i * row;
    for (int64_t c = 0; c < row; ++c) d[c] += gi[c];
  }
}

void equal(const Tensor& x, int64_t value, Tensor& out) {
  const int32_t* p = x.data_as<int32_t>();
  bool* o = out.data_as<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = p[i] == value;
}

void patchify(const Tensor& images, int64_t P, Tensor& out) {
  const int64_t B = images.size(0), C = images.size(1), H = images.size(2), W = images.size(3), gh = H / P, gw = W / P;
  const float* src = images.data();
  float* dst = out.data();
  parallel_for(B * gh * gw, B * gh * gw > 256, [&](int64_t patch) {  // patch n of image b
    const int64_t b = patch / (gh * gw), n = patch % (gh * gw);
    float* row = dst + patch * C * P * P;
    const int64_t y0 = (n / gw) * P, x0 = (n % gw) * P;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t dy = 0; dy < P; ++dy)
        for (int64_t dx = 0; dx < P; ++dx) *row++ = src[((b * C + c) * H + y0 + dy) * W + x0 + dx];
  });
}

}  // namespace tfm::ops::cpu
