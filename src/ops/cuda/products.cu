// The products on the GPU (ops/cpu/products.cpp's counterparts): matmul, the linear
// layers' forward and backward, through cuBLASLt in single precision (CUBLAS_COMPUTE_32F,
// never TF32) or with bf16 operands accumulated in f32: each operand rounded to bf16
// (to nearest even, as the CPU and PyTorch round) by a pass of its own, then cuBLASLt's
// bf16 kernels. A linear layer's bias and ReLU are the product's epilogue. int8 products
// are the CPU's only.
//
// Why not CUBLAS_COMPUTE_32F_FAST_16BF, which takes the f32 operands and rounds them as
// it loads them (no pass, no buffer)? On an H200 (bench/gpu/gemm_rates.cu, window 4) a
// base Transformer's 12 products ran at 274 TFLOP/s that way against 610 from bf16
// operands, which leaves room for the rounding passes (about 5 ms of a step's 16 GB
// moved); and its rounding is not the CPU's (a bf16 product 2.3e-3 from the CPU's,
// against 4e-6 with the passes).

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "ops/cuda/cublaslt.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "tensor/float_formats.h"

namespace tfm::ops::cuda {

namespace {

// A tfm::Error naming the cuBLASLt call unless it succeeded.
void check_lt(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cublasLt: ") + what + ": " + TFM_LT(cublasLtGetStatusString)(status));
}

// This thread's cuBLASLt handle and workspace, made on first use: each host thread
// queues its products on its own stream, so a workspace is never shared between
// streams.
struct LtContext {
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;

  LtContext() {
    check_lt(TFM_LT(cublasLtCreate)(&handle), "cublasLtCreate");
    check(cudaMalloc(&workspace, kWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
  }
  ~LtContext() {  // at thread exit: nothing left to report to
    (void)cudaFree(workspace);
    (void)TFM_LT(cublasLtDestroy)(handle);
    (void)cudaGetLastError();
  }
  LtContext(const LtContext&) = delete;
  LtContext& operator=(const LtContext&) = delete;
};

LtContext& lt() {
  thread_local LtContext context;
  return context;
}

// Owners of cuBLASLt's descriptors, so that a failed call leaks none.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  MatmulDesc() { check_lt(TFM_LT(cublasLtMatmulDescCreate)(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"); }
  ~MatmulDesc() { (void)TFM_LT(cublasLtMatmulDescDestroy)(desc); }
  template <class T>
  void set(cublasLtMatmulDescAttributes_t which, T value) const {
    check_lt(TFM_LT(cublasLtMatmulDescSetAttribute)(desc, which, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute");
  }
  void transpose(cublasLtMatmulDescAttributes_t which, bool on) const { set(which, on ? CUBLAS_OP_T : CUBLAS_OP_N); }
};

// A column-major matrix [rows, cols] of `type` with leading dimension ld, repeated
// `batch` times `stride` elements apart.
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    check_lt(TFM_LT(cublasLtMatrixLayoutCreate)(&layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
             "cublasLtMatrixLayoutCreate");
    if (batch == 1) return;
    const int32_t count = static_cast<int32_t>(batch);
    check_lt(TFM_LT(cublasLtMatrixLayoutSetAttribute)(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
             "cublasLtMatrixLayoutSetAttribute (batch count)");
    check_lt(TFM_LT(cublasLtMatrixLayoutSetAttribute)(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
             "cublasLtMatrixLayoutSetAttribute (batch stride)");
  }
  ~Layout() { (void)TFM_LT(cublasLtMatrixLayoutDestroy)(layout); }
};

struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  Preference() { check_lt(TFM_LT(cublasLtMatmulPreferenceCreate)(&pref), "cublasLtMatmulPreferenceCreate"); }
  ~Preference() { (void)TFM_LT(cublasLtMatmulPreferenceDestroy)(pref); }
  template <class T>
  void set(cublasLtMatmulPreferenceAttributes_t which, T value) {
    check_lt(TFM_LT(cublasLtMatmulPreferenceSetAttribute)(pref, which, &value, sizeof(value)), "cublasLtMatmulPreferenceSetAttribute");
  }
};

// The alignment (a power of two up to 256 bytes) that every matrix of an operand
// keeps: its address, leading dimension and batch stride in bytes. The heuristic
// otherwise assumes 256 and may pick kernels that a view's offset breaks.
uint32_t alignment(const void* p, int64_t ld, int64_t stride, size_t element) {
  const uint64_t bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)) | static_cast<uint64_t>(ld) * element | static_cast<uint64_t>(stride) * element | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

// One (batched) row-major product C[m, n] = op(A)[m, k] op(B)[k, n] + beta C, A and B
// of `type` (f32 or bf16), C f32; matrix i of each operand `stride` elements after i - 1.
// Then, where given, C[i, j] += bias[j], and max(C, 0) where `relu` (a linear layer's
// forward; beta 0, batch 1).
struct Product {
  bool trans_a, trans_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda, stride_a;
  const void* b;
  int64_t ldb, stride_b;
  float* c;
  int64_t ldc, stride_c;
  float beta;
  int64_t batch = 1;
  cudaDataType_t type = CUDA_R_32F;
  const float* bias = nullptr;
  bool relu = false;
};

// c[i] *= beta (or 0 where beta is 0, never reading c): a product with k = 0.
__global__ void scale_kernel(float* c, float beta, int64_t n) {
  TFM_GRID_STRIDE(i, n) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
}

// Milliseconds since `t0` on the host.
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS's first
// operand is our B, its second our A, and a row-major [r, c] matrix is a column-major
// [c, r] one with the same leading dimension. A plan (descriptors and an algorithm) is
// made once per problem and kept: the heuristic took about 100 us of the host per
// product, a base Transformer's bf16 step makes about 250 of them in some 15 shapes,
// and the host time showed as half the step (TFM_CUDA_PROFILE, H200).
struct Plan {
  MatmulDesc desc;
  Layout first, second, out;
  cublasLtMatmulAlgo_t algo{};

  Plan(const Product& p)
      : first(p.type, p.trans_b ? p.k : p.n, p.trans_b ? p.n : p.k, p.ldb, p.batch, p.stride_b),  // our B
        second(p.type, p.trans_a ? p.m : p.k, p.trans_a ? p.k : p.m, p.lda, p.batch, p.stride_a),  // our A
        out(CUDA_R_32F, p.n, p.m, p.ldc, p.batch, p.stride_c) {
    desc.transpose(CUBLASLT_MATMUL_DESC_TRANSA, p.trans_b);
    desc.transpose(CUBLASLT_MATMUL_DESC_TRANSB, p.trans_a);
    // (cuBLAS's D is our C transposed: our columns, its rows, are what the bias runs along.)
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, p.bias ? (p.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                                   : (p.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT));
    if (p.bias) desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(p.bias));
  }

  // The heuristic's first algorithm for this problem and the operands' alignments in
  // bytes (a, b, c as in Product); false where it has none.
  bool choose(LtContext& context, uint32_t align_a, uint32_t align_b, uint32_t align_c) {
    const auto t0 = std::chrono::steady_clock::now();
    Preference pref;
    pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{LtContext::kWorkspaceBytes});
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b);  // (cuBLAS's A is our B)
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
    cublasLtMatmulHeuristicResult_t chosen{};
    int found = 0;
    check_lt(TFM_LT(cublasLtMatmulAlgoGetHeuristic)(context.handle, desc.desc, first.layout, second.layout, out.layout, out.layout, pref.pref,
                                                    1, &chosen, &found),
             "cublasLtMatmulAlgoGetHeuristic");
    algo = chosen.algo;
    tfm::cuda::profile_host("cublasLt heuristic", ms_since(t0));
    return found > 0;
  }

  // Takes `shared` (the algorithm chosen for another product of its class) where
  // cuBLASLt says it runs this problem within the workspace.
  bool adopt(const cublasLtMatmulAlgo_t& shared, LtContext& context) {
    const auto t0 = std::chrono::steady_clock::now();
    cublasLtMatmulHeuristicResult_t result{};
    const bool fits = TFM_LT(cublasLtMatmulAlgoCheck)(context.handle, desc.desc, first.layout, second.layout, out.layout, out.layout, &shared,
                                                      &result) == CUBLAS_STATUS_SUCCESS &&
                      result.workspaceSize <= LtContext::kWorkspaceBytes;
    if (fits) algo = shared;
    tfm::cuda::profile_host(fits ? "cublasLt algorithm check (a class's)" : "cublasLt algorithm check (refused)", ms_since(t0));
    return fits;
  }
};

// What makes two products one plan: shapes, layouts, type, epilogue and the operands'
// alignments.
using PlanKey = std::array<int64_t, 17>;
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = 0;
    for (int64_t v : k) h = h * 1000003u ^ std::hash<int64_t>{}(v);
    return h;
  }
};

PlanKey plan_key(const Product& p) {
  const size_t element = p.type == CUDA_R_32F ? 4 : 2;
  const int64_t epilogue = (p.bias != nullptr) * 2 + p.relu;
  return {p.trans_a, p.trans_b, p.m, p.n, p.k, p.lda, p.stride_a, p.ldb, p.stride_b, p.ldc, p.stride_c, p.batch, p.type,
          epilogue, alignment(p.a, p.lda, p.stride_a, element), alignment(p.b, p.ldb, p.stride_b, element),
          alignment(p.c, p.ldc, p.stride_c, 4)};
}

// The alignment in bytes of operand a (0), b (1) or c (2) in a plan's key.
uint32_t alignments(const PlanKey& key, int operand) { return static_cast<uint32_t>(key[static_cast<size_t>(14 + operand)]); }

// v rounded up to one of four steps an octave (..., 12288, 14336, 16384, 20480, ...).
int64_t size_class(int64_t v) {
  if (v <= 8) return v;
  const int64_t step = int64_t{1} << (61 - __builtin_clzll(static_cast<unsigned long long>(v)));  // (a quarter of v's highest bit)
  return (v + step - 1) / step * step;
}

// The product that stands for p's class: its sizes, leading dimensions and batch
// strides by size_class (the same operands, types and epilogue).
Product representative(Product p) {
  for (int64_t* v : {&p.m, &p.n, &p.k, &p.lda, &p.ldb, &p.ldc, &p.stride_a, &p.stride_b, &p.stride_c}) *v = size_class(*v);
  return p;
}

// Every batch of a training run has new token counts, so new products each step, and
// the heuristic's host time for a new problem is the GPU's idle time where little is
// queued (a step's first layer): about 20 ms of a base Transformer's bf16 step on an
// H200, where the GPU idled at the first call of each of 25 shapes (window 15). So products of one class
// (representative()) share the heuristic's algorithm for the class's representative,
// where cublasLtMatmulAlgoCheck accepts it for the real problem; else the problem gets
// its own. Either way a problem's algorithm depends on the problem alone, not on which
// came first: a resumed run computes as the uninterrupted one.
std::optional<cublasLtMatmulAlgo_t> class_algorithm(const Product& p, const PlanKey& key, LtContext& context) {
  thread_local std::unordered_map<PlanKey, std::optional<cublasLtMatmulAlgo_t>, PlanKeyHash> classes;
  const Product r = representative(p);
  PlanKey class_key = plan_key(r);
  std::copy(key.end() - 3, key.end(), class_key.end() - 3);  // (the real operands' alignments)
  auto known = classes.find(class_key);
  if (known != classes.end()) return known->second;
  if (classes.size() >= 4096) classes.clear();
  std::optional<cublasLtMatmulAlgo_t> algo;
  try {  // (a representative cuBLASLt refuses leaves the problem to its own heuristic)
    Plan plan(r);
    if (plan.choose(context, alignments(key, 0), alignments(key, 1), alignments(key, 2))) algo = plan.algo;
  } catch (const Error&) {
  }
  return classes.emplace(class_key, algo).first->second;
}

const Plan& plan_for(const Product& p, LtContext& context) {
  thread_local std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  const PlanKey key = plan_key(p);
  auto it = plans.find(key);
  if (it != plans.end()) return *it->second;
  if (plans.size() >= 4096) plans.clear();  // batches of ever new shapes: start afresh rather than grow
  auto plan = std::make_unique<Plan>(p);
  const std::optional<cublasLtMatmulAlgo_t> shared = class_algorithm(p, key, context);
  if (!shared || !plan->adopt(*shared, context))
    TFM_CHECK(plan->choose(context, alignments(key, 0), alignments(key, 1), alignments(key, 2)),
              "cublasLt: no algorithm for a " << p.m << " x " << p.n << " x " << p.k << " product");
  return *plans.emplace(key, std::move(plan)).first->second;
}

// A product's name in TFM_CUDA_PROFILE's table: type, [m, n, k], which operands are
// transposed, batch, epilogue and whether it accumulates, e.g.
// "cublasLt bf16 [12500,2048,512] NT +bias,relu": where a step's product time goes.
std::string profile_name(const Product& p) {
  std::string name = std::string("cublasLt ") + (p.type == CUDA_R_32F ? "f32" : "bf16") + " [" + std::to_string(p.m) + "," +
                     std::to_string(p.n) + "," + std::to_string(p.k) + "] " + (p.trans_a ? "T" : "N") + (p.trans_b ? "T" : "N");
  if (p.batch > 1) name += " x" + std::to_string(p.batch);
  if (p.bias) name += " +bias";
  if (p.relu) name += ",relu";
  if (p.beta != 0.0f) name += " +=";
  return name;
}

void run(const Product& p) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return;
  if (p.k == 0) {  // an empty sum (c is contiguous at every call site)
    const int64_t count = p.batch * p.m * p.n;
    scale_kernel<<<blocks_for(count), kThreads, 0, stream()>>>(p.c, p.beta, count);
    check_launch("scale_kernel");
    return;
  }
  TFM_CHECK(p.batch <= INT32_MAX, "matmul: " << p.batch << " products in one batch");
  LtContext& context = lt();
  const Plan& plan = plan_for(p, context);
  if (p.bias) plan.desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(p.bias));  // (this call's: a plan serves any)
  const float alpha = 1.0f, beta = p.beta;
  check_lt(TFM_LT(cublasLtMatmul)(context.handle, plan.desc.desc, &alpha, p.b, plan.first.layout, p.a, plan.second.layout, &beta, p.c,
                                  plan.out.layout, p.c, plan.out.layout, &plan.algo, context.workspace, LtContext::kWorkspaceBytes, stream()),
           "cublasLtMatmul");
  check_launch(tfm::cuda::profiling() ? profile_name(p).c_str() : p.type == CUDA_R_32F ? "cublasLt matmul f32" : "cublasLt matmul bf16");
}

// y[r, c] += bias[c] (where given), then max(y, 0) where `relu`: [rows, out], where
// cuBLASLt's epilogue cannot (linear's comment says when).
__global__ void bias_relu_kernel(float* y, const float* bias, bool relu, int64_t out, int64_t n) {
  TFM_GRID_STRIDE(i, n) {
    float v = y[i];
    if (bias) v += bias[i % out];
    y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

void bias_relu(Tensor& y, const float* bias, bool relu, int64_t rows, int64_t out) {
  const int64_t n = rows * out;
  bias_relu_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(y), bias, relu, out, n);
  check_launch("bias_relu_kernel");
}

// out[i] = x[i] rounded to bf16 (to nearest even), four at a time where x and out allow
// (16-byte loads, 8-byte stores: a pass moves 6 bytes an element at near the copy rate).
__global__ void to_bf16_kernel(const float* x, uint16_t* out, int64_t n) {
  const bool vector = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
  const int64_t quads = vector ? n / 4 : 0;
  TFM_GRID_STRIDE(q, quads) {
    const float4 v = reinterpret_cast<const float4*>(x)[q];
    const uint64_t packed = uint64_t{to_bf16(v.x)} | uint64_t{to_bf16(v.y)} << 16 | uint64_t{to_bf16(v.z)} << 32 | uint64_t{to_bf16(v.w)} << 48;
    reinterpret_cast<uint64_t*>(out)[q] = packed;
  }
  TFM_GRID_STRIDE(r, n - 4 * quads) out[4 * quads + r] = to_bf16(x[4 * quads + r]);
}

// The operands a product reads in `precision`: the f32 tensors themselves, or their
// bf16 roundings in a new buffer (kept in `held` while the product is queued).
struct Operand {
  const void* data;
  Tensor held;
};

Operand operand(const Tensor& t, Precision precision) {
  if (precision == Precision::f32) return {ptr<float>(t), Tensor()};
  Tensor rounded = Tensor::empty({t.numel()}, DType::bf16, t.device());
  const int64_t n = t.numel();
  to_bf16_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream()>>>(ptr<float>(t), static_cast<uint16_t*>(rounded.device_ptr()), n);
  check_launch("to_bf16_kernel");
  return {rounded.device_ptr(), rounded};
}

cudaDataType_t operand_type(Precision precision) { return precision == Precision::f32 ? CUDA_R_32F : CUDA_R_16BF; }

}  // namespace

// out [.., m, n] = op(a) op(b) + beta out, matrix by matrix over the equal leading dims
// (no broadcasting: the front end checks them equal); a and b contiguous.
void matmul(bool trans_a, bool trans_b, const Tensor& a, const Tensor& b, float beta, Tensor& out) {
  const int64_t m = out.size(-2), n = out.size(-1), k = trans_a ? a.size(-2) : a.size(-1);
  if (m == 0 || n == 0) return;
  const int64_t batch = out.numel() / (m * n);
  run({trans_a, trans_b, m, n, k, ptr<float>(a), a.size(-1), m * k, ptr<float>(b), b.size(-1), k * n, ptr<float>(out), n, m * n, beta,
       batch});
}

// y [rows, out] = x [rows, in] w [out, in]^T, then + bias and max(., 0) as asked.
void linear(const LinearProducts& products, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu, Tensor& y) {
  const Precision precision = products.precision();
  if (precision == Precision::int8) throw Error("linear: int8 products run on the CPU only; use --precision f32 or bf16 on cuda");
  const int64_t in = w.size(1), out = w.size(0), rows = in > 0 ? x.numel() / in : y.numel() / (out > 0 ? out : 1);
  const float* b = bias.defined() ? ptr<float>(bias) : nullptr;
  // cuBLASLt's epilogue needs a product that adds something up (in > 0) and a bias on 16
  // bytes (Marian's experience: 8 failed on an A100); else a pass of its own.
  const bool epilogue = in > 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
  const Operand xo = operand(x, precision), wo = operand(w, precision);
  run({false, true, rows, out, in, xo.data, in, 0, wo.data, in, 0, ptr<float>(y), out, 0, 0.0f, 1, operand_type(precision),
       epilogue ? b : nullptr, epilogue && relu});
  if (!epilogue && (b || relu)) bias_relu(y, b, relu, rows, out);
}

// dx = g w and dw = g^T x + dw_beta dw, g [rows, out]. The CPU runs every precision but
// f32 as bf16 (int8 layers never reach a backward: their forward throws here); an
// undefined gradient is skipped.
void linear_backward(Precision precision, const Tensor& g, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw, float dw_beta) {
  if (precision != Precision::f32) precision = Precision::bf16;
  const int64_t in = w.size(1), out = w.size(0), rows = out > 0 ? g.numel() / out : (in > 0 ? x.numel() / in : 0);
  const Operand go = operand(g, precision), xo = operand(x, precision), wo = operand(w, precision);
  const cudaDataType_t type = operand_type(precision);
  if (dx.defined()) run({false, false, rows, in, out, go.data, out, 0, wo.data, in, 0, ptr<float>(dx), in, 0, 0.0f, 1, type});
  if (dw.defined()) run({true, false, out, in, rows, go.data, out, 0, xo.data, in, 0, ptr<float>(dw), in, 0, dw_beta, 1, type});
}

}  // namespace tfm::ops::cuda
