// The matrix rates of a base Transformer's products on this GPU, one harness for the
// choice ops/cuda/products.cu makes (llm.c's dev/cuda habit): each linear layer's three
// products (forward y = x w^T, dx = g w, dw = g^T x) over 12,500 tokens, through
// cuBLASLt with the heuristic's first algorithm, as products.cu asks for it, in four
// forms:
//   f32          f32 operands and output, CUBLAS_COMPUTE_32F (no TF32): --precision f32
//   f32 fast16bf f32 operands rounded by cuBLASLt as it loads them (COMPUTE_32F_FAST_16BF)
//   bf16 > f32   operands already bf16, f32 output (what a separate rounding pass feeds)
//   bf16 > bf16  bf16 operands and output (PyTorch autocast's products)
// Then the forward products again with the linear layer's epilogues (bias, bias + ReLU),
// in the bf16 forms. Prints one ROW per product and form (the GPU check's format: stage,
// check, dtype, shape, -, -, -, milliseconds, -, TFLOP/s) and one per form with the 12
// products' sum.
//   tfm_gemm_rates [--tokens N] [--reps N]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "ops/cuda/cublaslt.h"
#include "tensor/cuda/runtime.h"

namespace {

using tfm::cuda::check;

void lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "tfm_gemm_rates: %s: %s\n", what, TFM_LT(cublasLtGetStatusString)(s));
    std::exit(1);
  }
}

__global__ void fill_kernel(float* f, uint16_t* h, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    const float v = (static_cast<float>(x & 0xffff) / 65535.0f - 0.5f) * 0.2f;
    f[i] = v;
    uint32_t bits;
    memcpy(&bits, &v, 4);
    h[i] = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);  // round to nearest even
  }
}

struct Form {
  const char* name;
  cudaDataType_t in, out;
  cublasComputeType_t compute;
};

// Column-major D[M, N] = op(A)[M, K] op(B)[K, N] (how cuBLAS sees a row-major product).
struct Gemm {
  std::string name;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldd;
};

struct Buffers {
  void *a32, *b32, *d32, *a16, *b16, *d16;
  float* bias;
};

double time_us(const Gemm& g, const Form& f, const Buffers& buf, cublasLtHandle_t handle, void* workspace, size_t ws_bytes, int reps,
               cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT) {
  cublasLtMatmulDesc_t desc;
  lt(TFM_LT(cublasLtMatmulDescCreate)(&desc, f.compute, CUDA_R_32F), "desc");
  const cublasOperation_t ta = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt(TFM_LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "transa");
  lt(TFM_LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "transb");
  lt(TFM_LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "epilogue");
  const void* bias = buf.bias;
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    lt(TFM_LT(cublasLtMatmulDescSetAttribute)(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), "bias");
  cublasLtMatrixLayout_t la, lb, ld;
  lt(TFM_LT(cublasLtMatrixLayoutCreate)(&la, f.in, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda), "layout a");
  lt(TFM_LT(cublasLtMatrixLayoutCreate)(&lb, f.in, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb), "layout b");
  lt(TFM_LT(cublasLtMatrixLayoutCreate)(&ld, f.out, g.m, g.n, g.ldd), "layout d");
  cublasLtMatmulPreference_t pref;
  lt(TFM_LT(cublasLtMatmulPreferenceCreate)(&pref), "preference");
  const uint64_t bytes = ws_bytes;
  lt(TFM_LT(cublasLtMatmulPreferenceSetAttribute)(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)), "workspace");
  cublasLtMatmulHeuristicResult_t chosen{};
  int found = 0;
  lt(TFM_LT(cublasLtMatmulAlgoGetHeuristic)(handle, desc, la, lb, ld, ld, pref, 1, &chosen, &found), "heuristic");
  const bool half = f.in == CUDA_R_16BF;
  const void* a = half ? buf.a16 : buf.a32;
  const void* b = half ? buf.b16 : buf.b32;
  void* d = f.out == CUDA_R_16BF ? buf.d16 : buf.d32;
  const float alpha = 1.0f, beta = 0.0f;
  auto once = [&] {
    lt(TFM_LT(cublasLtMatmul)(handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &chosen.algo, workspace, ws_bytes,
                              tfm::cuda::stream()),
       "matmul");
  };
  double us = -1;
  if (found > 0) {
    once();
    cudaEvent_t t0, t1;
    check(cudaEventCreate(&t0), "event"), check(cudaEventCreate(&t1), "event");
    check(cudaEventRecord(t0, tfm::cuda::stream()), "record");
    for (int r = 0; r < reps; ++r) once();
    check(cudaEventRecord(t1, tfm::cuda::stream()), "record");
    check(cudaEventSynchronize(t1), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, t0, t1), "elapsed");
    us = 1e3 * ms / reps;
  }
  TFM_LT(cublasLtMatmulPreferenceDestroy)(pref);
  TFM_LT(cublasLtMatrixLayoutDestroy)(la), TFM_LT(cublasLtMatrixLayoutDestroy)(lb), TFM_LT(cublasLtMatrixLayoutDestroy)(ld);
  TFM_LT(cublasLtMatmulDescDestroy)(desc);
  return us;
}

// A linear layer in -> out over T tokens, row-major as tfm holds it, in cuBLAS's terms:
// forward y' = w'^T x', dx' = w' g', dw' = x' g'^T (X' the column-major view of X).
std::vector<Gemm> layer(const std::string& name, int64_t T, int64_t in, int64_t out) {
  return {{name + " fwd", true, false, out, T, in, in, in, out},
          {name + " dx", false, false, in, T, out, in, out, in},
          {name + " dw", false, true, in, out, T, in, out, in}};
}

}  // namespace

int run(int argc, char** argv) {
  int64_t tokens = 12500;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else return std::fprintf(stderr, "usage: tfm_gemm_rates [--tokens N] [--reps N]\n"), 2;
  }
  std::vector<Gemm> gemms;
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  for (const Layer& l : {Layer{"proj 512>512", 512, 512}, Layer{"ffn 512>2048", 512, 2048}, Layer{"ffn 2048>512", 2048, 512},
                         Layer{"generator 512>8000", 512, 8000}})
    for (const Gemm& g : layer(l.name, tokens, l.in, l.out)) gemms.push_back(g);
  const int64_t n = tokens * 8000;  // the largest operand or result
  Buffers buf{};
  for (void** p : {&buf.a32, &buf.b32, &buf.d32}) check(cudaMalloc(p, n * 4), "cudaMalloc");
  for (void** p : {&buf.a16, &buf.b16, &buf.d16}) check(cudaMalloc(p, n * 2), "cudaMalloc");
  check(cudaMalloc(&buf.bias, 8000 * 4), "cudaMalloc");
  check(cudaMemset(buf.bias, 0, 8000 * 4), "cudaMemset");
  fill_kernel<<<1024, 256>>>(static_cast<float*>(buf.a32), static_cast<uint16_t*>(buf.a16), n, 1);
  fill_kernel<<<1024, 256>>>(static_cast<float*>(buf.b32), static_cast<uint16_t*>(buf.b16), n, 2);
  check(cudaDeviceSynchronize(), "fill");
  cublasLtHandle_t handle;
  lt(TFM_LT(cublasLtCreate)(&handle), "create");
  const size_t ws_bytes = size_t{32} << 20;  // products.cu's workspace
  void* workspace;
  check(cudaMalloc(&workspace, ws_bytes), "cudaMalloc");
  const Form forms[] = {{"f32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
                        {"f32 fast16bf", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF},
                        {"bf16 > f32", CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F},
                        {"bf16 > bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F}};
  for (const Form& f : forms) {
    double total_us = 0, flops = 0;
    for (const Gemm& g : gemms) {
      const double us = time_us(g, f, buf, handle, workspace, ws_bytes, reps), fl = 2.0 * g.m * g.n * g.k;
      std::printf("ROW\tgemm\t%s\t%s\t[%lld,%lld,%lld]\t-\t-\t-\t%.3f\t-\t%.0f TFLOP/s\n", g.name.c_str(), f.name,
                  static_cast<long long>(g.m), static_cast<long long>(g.n), static_cast<long long>(g.k), us / 1e3, us > 0 ? fl / us * 1e-6 : 0.0);
      total_us += us, flops += fl;
    }
    std::printf("ROW\tgemm\tall 12 products\t%s\t-\t-\t-\t-\t%.3f\t-\t%.0f TFLOP/s\n", f.name, total_us / 1e3, flops / total_us * 1e-6);
  }
  for (const Form& f : {forms[1], forms[2]})
    for (const auto& [suffix, epilogue] : {std::pair{" +bias", CUBLASLT_EPILOGUE_BIAS}, std::pair{" +bias+relu", CUBLASLT_EPILOGUE_RELU_BIAS}})
      for (size_t i = 0; i < gemms.size(); i += 3) {  // the forward products
        const Gemm& g = gemms[i];
        const double us = time_us(g, f, buf, handle, workspace, ws_bytes, reps, epilogue), fl = 2.0 * g.m * g.n * g.k;
        std::printf("ROW\tgemm\t%s%s\t%s\t[%lld,%lld,%lld]\t-\t-\t-\t%.3f\t-\t%.0f TFLOP/s\n", g.name.c_str(), suffix, f.name,
                    static_cast<long long>(g.m), static_cast<long long>(g.n), static_cast<long long>(g.k), us / 1e3,
                    us > 0 ? fl / us * 1e-6 : 0.0);
      }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfm_gemm_rates: %s\n", e.what());
    return 1;
  }
}
