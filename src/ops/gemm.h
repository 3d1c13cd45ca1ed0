#pragma once
// Row-major single-precision GEMM through oneDNN (which picks AVX2/AVX-512 kernels
// at run time):  C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C.
#include <cstdint>

namespace tfm::ops {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace tfm::ops
