#pragma once
// Row-major GEMM through oneDNN (which picks AVX2/AVX-512 kernels at run time):
//   C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C,  C in single precision.
#include <cstdint>
#include <vector>

namespace tfm::ops::cpu {

// A bfloat16 number: the upper half of a float's bits (see ops/linear_products.h).
using bf16 = uint16_t;

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same with bfloat16 inputs, accumulated in single precision (AVX-512 BF16
// instructions where the CPU has them, elsewhere widened to the f32 GEMM: cpu_isa.cpp).
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
               const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Integer product C[M, N] = A[M, K] * B_t[N, K]^T, int8 inputs, int32 sums: exact with
// VNNI; elsewhere through the f32 GEMM, exact below 2^24 and rounded to 24 bits above
// (oneDNN's own int8 kernels saturate there).
void gemm_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b_t, int64_t ldb, int32_t* c,
             int64_t ldc);

// A linear layer's weight w[out, in] reordered once into the blocked layout that
// oneDNN's matmul kernels read fastest, for weights that no longer change
// (inference; see LinearProducts::freeze). Products with a few dozen rows run up to twice as
// fast as from the plain layout (2 cores, 32 x 256 x 1024: 44 vs 87 us).
class PackedWeight {
 public:
  // Invalid where this CPU's kernels have no such layout (then use gemm).
  PackedWeight(const float* w, int64_t out, int64_t in);
  bool valid() const { return !data_.empty(); }
  // y[rows, out] = x[rows, in] w^T, plus bias[out] where given; with `relu`, max(y, 0)
  // applied as the kernels write y (no second pass over it).
  void linear(const float* x, int64_t rows, const float* bias, float* y, bool relu = false) const;

 private:
  int64_t out_, in_;
  int layout_threads_;  // the thread count its blocked layout was chosen under
  std::vector<float> data_;
};

}  // namespace tfm::ops::cpu
