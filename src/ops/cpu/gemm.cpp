#include "ops/cpu/gemm.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <unordered_map>

#include "ops/cpu/cpu_isa.h"
#include "tensor/float_formats.h"
#include "threads/parallel.h"
#include "tensor/error.h"

namespace tfm::ops::cpu {
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
// Forking the second core costs about 3 us on this machine (an empty OpenMP region,
// 2 vCPUs): more than splitting saves on a small product (1 x 256 x 256 in 2.6 us on
// one thread, 6.9 us on two). Small means under 4 million multiply-adds and a B under
// 2 MB. A waiting worker that sleeps is woken too slowly for a decoding step of about a
// millisecond, and one that spins slows the other core (GOMP_SPINCOUNT=300000 or
// OMP_WAIT_POLICY=active made it worse), so only the largest products of a step gain
// from a second core. `tfm translate --threads N --workers 1 --batch 1` of 200 sentences
// of Multi30k val with the `small` model: with the old rule (1 million, 512 KB: the
// feed-forward products of one sentence, 256 x 1024, on both cores) greedy took
// 2.9-3.1 s on 2 threads against 2.0-2.3 s on 1; now 1.9-2.2 s on 2, and beam 4
// 2.3-2.5 s on 2 against 2.6-3.1 s on 1.
int threads_for(int64_t m, int64_t n, int64_t k) {
  const bool small = m * n * k < (int64_t{1} << 22) && n * k < (int64_t{1} << 19);
  return small ? 1 : omp_get_max_threads();
}

// Sets the calling thread's OpenMP thread count for oneDNN's next call, restoring it after.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadCount() { omp_set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// A product C[m, n] (f32) = alpha * op(A) op(B) + beta * C, A and B of type `in`.
// B is either strided (op(B) by ldb and tb) or a PackedWeight's blocked layout; a bias
// row [n] may be added, and the result passed through ReLU.
struct MatmulKey {
  dnnl::memory::data_type in;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  // B's layout: 0 for strided, else a PackedWeight's, named by the thread count it was
  // chosen under (see packed_weights_desc).
  int packed_b = 0;
  bool bias = false;
  int threads = 1;  // oneDNN fixes a primitive's thread count when it is made
  bool relu = false;
  bool operator==(const MatmulKey& o) const {
    return std::tie(in, ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, packed_b, bias, threads, relu) ==
           std::tie(o.in, o.ta, o.tb, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.alpha, o.beta, o.packed_b, o.bias, o.threads, o.relu);
  }
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    size_t h = static_cast<size_t>(k.in) * 32 + (k.ta ? 1 : 0) + (k.tb ? 2 : 0) + (k.bias ? 8 : 0) + (k.relu ? 16 : 0);
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc, int64_t{k.threads}, int64_t{k.packed_b}})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h ^ std::hash<float>()(k.alpha) * 31 ^ std::hash<float>()(k.beta);
  }
};

// A primitive and its arguments' memory objects, whose data handles are set per call
// (empty for runtime sizes, whose memory objects are made per call).
struct Matmul {
  dnnl::matmul primitive;
  std::unordered_map<int, dnnl::memory> args;
};

struct MatmulDescs {
  dnnl::memory::desc a, b, c, bias;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The blocked layout oneDNN's brgemm matmul kernels pick for f32 weights [k, n] when
// they run on `threads` threads: the same for any number of rows, so one packed copy
// serves every batch size. The choice depends on the thread count (on AVX-512, 3 or
// more threads block the columns differently from 1 or 2), so a packed copy records
// the count its layout was chosen under and every product names that layout
// explicitly, whatever threads it runs on: a product that asked oneDNN for its own
// choice on one thread read weights packed for three in another blocking, and printed
// garbage (the outside review's W1). Empty where the kernels oneDNN would pick are
// not brgemm ones (CPUs without AVX-512).
dnnl::memory::desc packed_weights_desc(int64_t k, int64_t n, int threads) {
  using tag = dnnl::memory::format_tag;
  const ThreadCount chosen_under(threads);
  const auto f32 = dnnl::memory::data_type::f32;
  constexpr int64_t kRows = 32;
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc({{kRows, k}, f32, tag::ab}, {{k, n}, f32, tag::any}, {{kRows, n}, f32, tag::ab}), cpu_engine());
  if (std::string(pd.impl_info_str()).rfind("brg", 0) != 0) return {};
  return pd.weights_desc();
}

// Row-major op(A) [m, k], op(B) [k, n], C [m, n], each transposed by its strides.
MatmulDescs descs_of(const MatmulKey& key) {
  using dims = dnnl::memory::dims;
  const auto f32 = dnnl::memory::data_type::f32;
  return {dnnl::memory::desc({key.m, key.k}, key.in, key.ta ? dims{1, key.lda} : dims{key.lda, 1}),
          key.packed_b ? packed_weights_desc(key.k, key.n, key.packed_b)
                       : dnnl::memory::desc({key.k, key.n}, key.in, key.tb ? dims{1, key.ldb} : dims{key.ldb, 1}),
          dnnl::memory::desc({key.m, key.n}, f32, dims{key.ldc, 1}),
          key.bias ? dnnl::memory::desc({1, key.n}, f32, dims{key.n, 1}) : dnnl::memory::desc()};
}

// Memory objects for a product's arguments, their data handles unset.
std::unordered_map<int, dnnl::memory> memory_args(const MatmulDescs& d, const dnnl::engine& engine) {
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(d.a, engine, DNNL_MEMORY_NONE)},
                                             {DNNL_ARG_WEIGHTS, dnnl::memory(d.b, engine, DNNL_MEMORY_NONE)},
                                             {DNNL_ARG_DST, dnnl::memory(d.c, engine, DNNL_MEMORY_NONE)}};
  if (!d.bias.is_zero()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(d.bias, engine, DNNL_MEMORY_NONE));
  return args;
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
    dnnl::post_ops ops;
    if (key.beta != 0.0f) ops.append_sum(key.beta);
    if (key.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
    const dnnl::matmul::desc desc = key.bias ? dnnl::matmul::desc(d.a, d.b, d.bias, d.c) : dnnl::matmul::desc(d.a, d.b, d.c);
    mm.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine_));
    if (key.m != DNNL_RUNTIME_DIM_VAL) mm.args = memory_args(d, engine_);
  }

  const dnnl::engine& engine_ = cpu_engine();
  dnnl::stream stream_{engine_};
  std::unordered_map<MatmulKey, Matmul, MatmulKeyHash> cache_;
};

// Runs the product `actual` with the primitive made for `key`: the same shape, or the
// same product with runtime (DNNL_RUNTIME_DIM_VAL) sizes and leading dimensions. Both
// name the thread count (threads_for the actual sizes).
void run_matmul(const MatmulKey& key, const MatmulKey& actual, const void* a, const void* b, float* c,
                const float* bias = nullptr) {
  thread_local MatmulCache cache;
  const ThreadCount threads(key.threads);
  Matmul& mm = cache.get(key);
  std::unordered_map<int, dnnl::memory> per_call;
  if (!(key == actual)) per_call = memory_args(descs_of(actual), cache.engine());
  std::unordered_map<int, dnnl::memory>& args = key == actual ? mm.args : per_call;
  args.at(DNNL_ARG_SRC).set_data_handle(const_cast<void*>(a));
  args.at(DNNL_ARG_WEIGHTS).set_data_handle(const_cast<void*>(b));
  args.at(DNNL_ARG_DST).set_data_handle(c);
  if (key.bias) args.at(DNNL_ARG_BIAS).set_data_handle(const_cast<float*>(bias));
  mm.primitive.execute(cache.stream(), args);
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const ThreadCount threads(threads_for(m, n, k));
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  TFM_CHECK(st == dnnl_success, "oneDNN sgemm failed (status " << static_cast<int>(st) << ") for m=" << m << " n=" << n
                                                                   << " k=" << k);
}

// Training's forward products x[rows, in] W[out, in]^T with an inner dimension at least
// twice the output's (the second feed-forward product) and thousands of rows run faster
// through the matmul primitive's brgemm kernels than through sgemm, which reads such a
// transposed B slowly (inside `base` training steps: 3600 x 512 x 2048 at 348 vs 279
// GFLOP/s; `small`'s x 256 x 1024 at 330-350 vs 265-290). Measured inside the steps, the
// other forward shapes gained nothing or lost (x 2048 x 512: 323 vs 380). A primitive is
// compiled for one shape (~1 ms) and holds ~0.5 MB, and a batch's row count changes
// every step, so the rows go in pieces of fixed sizes, 512 at a time and the rest
// halved down to 16 rows (sgemm takes the last few): a few shapes per weight, compiled
// once.
void gemm_in_row_pieces(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                        int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int64_t kPiece = 512, kSmallest = 16;
  int64_t row = 0;
  for (int64_t rows = kPiece; rows >= kSmallest; rows /= 2)
    for (; m - row >= rows; row += rows) {
      const MatmulKey key{dnnl::memory::data_type::f32, false, true, rows, n, k, lda, ldb, ldc, alpha, beta, 0, false,
                          threads_for(rows, n, k)};
      run_matmul(key, key, a + row * lda, b, c + row * ldc);
    }
  if (row < m) sgemm(false, true, m - row, n, k, alpha, a + row * lda, lda, b, ldb, beta, c + row * ldc, ldc);
}

float to_float(bf16 x) { return from_bf16(x); }
float to_float(int8_t x) { return static_cast<float>(x); }

// rows x cols numbers (bfloat16 or int8), `ld` apart, widened exactly into a
// contiguous float buffer.
template <class T>
const float* widened(const T* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  float* o = out.data();
  parallel_for(rows, rows * cols > (1 << 15), [&](int64_t r) {
    for (int64_t j = 0; j < cols; ++j) o[r * cols + j] = to_float(x[r * ld + j]);
  });
  return o;
}

// gemm_bf16 where oneDNN has no bf16 kernels: the same bfloat16 inputs, widened
// exactly to single precision and multiplied by the f32 GEMM (products and sums in
// single precision, as the bf16 kernels compute them; only the order of the sums differs).
void gemm_bf16_widened(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
                       const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  thread_local std::vector<float> af, bf;
  // op(A) [m, k] is stored as trans_a ? [k, m] : [m, k], op(B) [k, n] as trans_b ? [n, k] : [k, n].
  const int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k, b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const float* a32 = widened(a, a_rows, a_cols, lda, af);
  const float* b32 = widened(b, b_rows, b_cols, ldb, bf);
  gemm(trans_a, trans_b, m, n, k, alpha, a32, a_cols, b32, b_cols, beta, c, ldc);
}

// gemm_s8 without VNNI: the int8 values widened to single precision and multiplied by
// the f32 GEMM. Each sum of products is exact while it stays below 2^24 in magnitude
// (always for an inner dimension under 1,040 at full range), rounded to 24 bits beyond.
void gemm_s8_widened(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b_t, int64_t ldb, int32_t* c,
                     int64_t ldc) {
  thread_local std::vector<float> af, bf, cf;
  const float* a32 = widened(a, m, k, lda, af);
  const float* b32 = widened(b_t, n, k, ldb, bf);
  cf.resize(static_cast<size_t>(m * n));
  gemm(false, true, m, n, k, 1.0f, a32, k, b32, k, 0.0f, cf.data(), n);
  const float* p = cf.data();
  parallel_for(m, m * n > (1 << 15), [&](int64_t i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = static_cast<int32_t>(p[i * n + j]);
  });
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // Inside a parallel region (attention's per-head products) both would run on one
  // thread, where sgemm's lower overhead wins.
  if (!omp_in_parallel()) {
    if (use_matmul_primitive(trans_a, m, k)) {
      const MatmulKey key{dnnl::memory::data_type::f32, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, 0, false, threads_for(m, n, k)};
      run_matmul(key, key, a, b, c);
      return;
    }
    if (!trans_a && trans_b && m > 256 && k >= 2 * n) return gemm_in_row_pieces(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
               const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (!cpu_isa().bf16_products) return gemm_bf16_widened(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
  const int threads = threads_for(m, n, k);
  run_matmul({bf16_type, trans_a, trans_b, R, R, R, R, R, R, alpha, beta, 0, false, threads},
             {bf16_type, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, 0, false, threads}, a, b, c);
}

void gemm_s8(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* b_t, int64_t ldb, int32_t* c,
             int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (!cpu_isa().vnni) return gemm_s8_widened(m, n, k, a, lda, b_t, ldb, c, ldc);
  const int32_t no_offset = 0;
  const ThreadCount threads(threads_for(m, n, k));
  dnnl_status_t st = dnnl_gemm_s8s8s32('N', 'T', 'F', m, n, k, 1.0f, a, lda, 0, b_t, ldb, 0, 0.0f, c, ldc, &no_offset);
  TFM_CHECK(st == dnnl_success, "oneDNN int8 GEMM failed (status " << static_cast<int>(st) << ") for m=" << m << " n=" << n
                                                                     << " k=" << k);
}

PackedWeight::PackedWeight(const float* w, int64_t out, int64_t in) : out_(out), in_(in), layout_threads_(omp_get_max_threads()) {
  const dnnl::memory::desc packed = packed_weights_desc(in, out, layout_threads_);
  if (packed.is_zero()) return;
  data_.resize(packed.get_size() / sizeof(float));
  // w[out, in] row-major is w^T [in, out] with strides (1, in).
  dnnl::memory plain({{in, out}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, in}}, cpu_engine(), const_cast<float*>(w));
  dnnl::memory blocked(packed, cpu_engine(), data_.data());
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(plain, blocked).execute(stream, plain, blocked);
  stream.wait();
}

void PackedWeight::linear(const float* x, int64_t rows, const float* bias, float* y, bool relu) const {
  TFM_CHECK(valid(), "PackedWeight::linear: this CPU has no packed layout");
  if (rows == 0) return;
  const MatmulKey key{dnnl::memory::data_type::f32, false, false, rows, out_, in_, in_, 0, out_, 1.0f, 0.0f, layout_threads_,
                      bias != nullptr, threads_for(rows, out_, in_), relu};
  run_matmul(key, key, x, data_.data(), y, bias);
}

}  // namespace tfm::ops::cpu
