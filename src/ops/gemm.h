#pragma once
// Row-major GEMM through oneDNN (which picks AVX2/AVX-512 kernels at run time):
//   C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C,  C in single precision.
#include <cstdint>

namespace tfm::ops {

// A bfloat16 number: the upper half of a float's bits (see ops/reduced_precision.h).
using bf16 = uint16_t;

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same with bfloat16 inputs, accumulated in single precision (AVX-512 BF16
// instructions where the CPU has them, emulated by oneDNN elsewhere).
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
               const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Integer product C[M, N] = A[M, K] * B_t[N, K]^T, int8 inputs, exact int32 sums.
void gemm_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b_t, int64_t ldb, int32_t* c,
             int64_t ldc);

}  // namespace tfm::ops
