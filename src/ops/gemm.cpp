#include "ops/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include "tensor/error.h"

namespace tfm::ops {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  TFM_CHECK(st == dnnl_success, "oneDNN sgemm failed (status " << static_cast<int>(st) << ") for m=" << m << " n=" << n
                                                                   << " k=" << k);
}

}  // namespace tfm::ops
