#pragma once
// cuBLASLt, loaded on first use (dlopen of libcublasLt.so.13) rather than linked: the
// library is 540 MB, and linking it cost every tfm process, on the CPU too, 200 MB of
// resident memory at start (its relocations; `tfm --version` measured 226 MB), and made
// a build with CUDA unable to start where the library is missing. Called as
//   TFM_LT(cublasLtMatmul)(handle, ...);
// each call site resolving its entry once; a missing library or entry is a one-line
// tfm::Error.
#include <cublasLt.h>

namespace tfm::ops::cuda::lt {

void* symbol(const char* name);

}  // namespace tfm::ops::cuda::lt

#define TFM_LT(name)                                                                          \
  ([]() {                                                                                     \
    static const auto fn = reinterpret_cast<decltype(&::name)>(::tfm::ops::cuda::lt::symbol(#name)); \
    return fn;                                                                                \
  }())
