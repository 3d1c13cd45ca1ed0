#include "ops/gemm.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>

#include "tensor/error.h"

namespace tfm::ops {
namespace {

// oneDNN offers two single-precision paths. dnnl_sgemm is the better one for tall
// products (training) and for a handful of rows, but slow when A has a few dozen
// rows, as decoding a batch does. There the matmul primitive's brgemm kernels are up
// to 4x faster (2 cores: 32 x 2048 x 512 in 315 vs 617 us, 32 x 256 x 1024 in 81 vs
// 251 us, 32 x 768 x 256 in 69 vs 101 us); from 64 rows on they win only with a long
// inner dimension (128 x 256 x 1024: 200 vs 363 us; 128 x 768 x 256: 162 vs 155 us).
// The choice depends on the shape alone, so results are reproducible run to run.
bool use_matmul_primitive(bool trans_a, int64_t m, int64_t k) {
  if (trans_a || m < 16 || m > 256) return false;
  return m <= 48 || k >= 512;
}
// A product C[m, n] (f32) = alpha * op(A) op(B) + beta * C, A and B of type `in`.
struct MatmulKey {
  dnnl::memory::data_type in;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  bool operator==(const MatmulKey& o) const {
    return std::tie(in, ta, tb, m, n, k, lda, ldb, ldc, alpha, beta) ==
           std::tie(o.in, o.ta, o.tb, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.alpha, o.beta);
  }
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    size_t h = static_cast<size_t>(k.in) * 4 + (k.ta ? 1 : 0) + (k.tb ? 2 : 0);
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc}) h = h * 1000003u ^ static_cast<size_t>(v);
    return h ^ std::hash<float>()(k.alpha) * 31 ^ std::hash<float>()(k.beta);
  }
};

// A primitive and its three memory objects, whose data handles are set per call.
struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
};

struct MatmulDescs {
  dnnl::memory::desc a, b, c;
};

// Row-major op(A) [m, k], op(B) [k, n], C [m, n], each transposed by its strides.
MatmulDescs descs_of(const MatmulKey& key) {
  using dims = dnnl::memory::dims;
  return {dnnl::memory::desc({key.m, key.k}, key.in, key.ta ? dims{1, key.lda} : dims{key.lda, 1}),
          dnnl::memory::desc({key.k, key.n}, key.in, key.tb ? dims{1, key.ldb} : dims{key.ldb, 1}),
          dnnl::memory::desc({key.m, key.n}, dnnl::memory::data_type::f32, dims{key.ldc, 1})};
}

class MatmulCache {
 public:
  // Each new shape costs a JIT compilation (~250 us); decoding repeats its shapes.
  Matmul& get(const MatmulKey& key) {
    // A long run sees a few hundred shapes, but cap the cache anyway.
    if (cache_.size() >= 4096 && !cache_.count(key)) cache_.clear();
    Matmul& mm = cache_[key];
    if (!mm.primitive) create(key, mm);
    return mm;
  }
  dnnl::stream& stream() { return stream_; }
  const dnnl::engine& engine() const { return engine_; }

 private:
  void create(const MatmulKey& key, Matmul& mm) {
    const MatmulDescs d = descs_of(key);
    dnnl::primitive_attr attr;
    if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
    if (key.beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(key.beta);
      attr.set_post_ops(ops);
    }
    mm.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(d.a, d.b, d.c), attr, engine_));
    if (key.m == DNNL_RUNTIME_DIM_VAL) return;  // memory objects need real sizes: made per call
    mm.a = dnnl::memory(d.a, engine_, DNNL_MEMORY_NONE);
    mm.b = dnnl::memory(d.b, engine_, DNNL_MEMORY_NONE);
    mm.c = dnnl::memory(d.c, engine_, DNNL_MEMORY_NONE);
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::unordered_map<MatmulKey, Matmul, MatmulKeyHash> cache_;
};

// Runs the product `actual` with the primitive made for `key`: the same shape, or the
// same product with runtime (DNNL_RUNTIME_DIM_VAL) sizes and leading dimensions.
void run_matmul(const MatmulKey& key, const MatmulKey& actual, const void* a, const void* b, float* c) {
  thread_local MatmulCache cache;
  Matmul& mm = cache.get(key);
  dnnl::memory ma = mm.a, mb = mm.b, mc = mm.c;
  if (!(key == actual)) {
    const MatmulDescs d = descs_of(actual);
    ma = dnnl::memory(d.a, cache.engine(), DNNL_MEMORY_NONE);
    mb = dnnl::memory(d.b, cache.engine(), DNNL_MEMORY_NONE);
    mc = dnnl::memory(d.c, cache.engine(), DNNL_MEMORY_NONE);
  }
  ma.set_data_handle(const_cast<void*>(a));
  mb.set_data_handle(const_cast<void*>(b));
  mc.set_data_handle(c);
  mm.primitive.execute(cache.stream(), {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  TFM_CHECK(st == dnnl_success, "oneDNN sgemm failed (status " << static_cast<int>(st) << ") for m=" << m << " n=" << n
                                                                   << " k=" << k);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // Inside a parallel region (attention's per-head products) both would run on one
  // thread, where sgemm's lower overhead wins.
  if (use_matmul_primitive(trans_a, m, k) && !omp_in_parallel()) {
    const MatmulKey key{dnnl::memory::data_type::f32, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta};
    run_matmul(key, key, a, b, c);
    return;
  }
  sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
               const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty product: C = beta * C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  // One primitive with runtime sizes per transposition, alpha and beta: oneDNN's bf16
  // GEMM kernels then need no JIT compilation per shape (training's batch shapes vary
  // every step; a fixed-shape brgemm primitive each cost ~1 ms and its own scratch
  // memory) and are as fast or faster (4000 x 8000 x 256: 768 vs 578 GFLOP/s).
  constexpr int64_t R = DNNL_RUNTIME_DIM_VAL;
  const dnnl::memory::data_type bf16_type = dnnl::memory::data_type::bf16;
  run_matmul({bf16_type, trans_a, trans_b, R, R, R, R, R, R, alpha, beta},
             {bf16_type, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta}, a, b, c);
}

void gemm_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b_t, int64_t ldb, int32_t* c,
             int64_t ldc) {
  if (m == 0 || n == 0) return;
  const int32_t no_offset = 0;
  dnnl_status_t st = dnnl_gemm_s8s8s32('N', 'T', 'F', m, n, k, 1.0f, a, lda, 0, b_t, ldb, 0, 0.0f, c, ldc, &no_offset);
  TFM_CHECK(st == dnnl_success, "oneDNN int8 GEMM failed (status " << static_cast<int>(st) << ") for m=" << m << " n=" << n
                                                                     << " k=" << k);
}

}  // namespace tfm::ops
