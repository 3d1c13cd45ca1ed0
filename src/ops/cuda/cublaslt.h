#pragma once
// cuBLASLt, loaded on first use (dlopen of libcublasLt.so.13) rather than linked: the
// library is 540 MB, and linking it cost every tfm process, on the CPU too, 200 MB of
// resident memory at start (its relocations; `tfm --version` measured 226 MB), and made
// a build with CUDA unable to start where the library is missing. Called as
//   TFM_LT(cublasLtMatmul)(handle, ...);
// each call site resolving its entry once; a missing library or entry is a one-line
// tfm::Error.
#include <cublasLt.h>

#include "tensor/cuda/library.h"

#define TFM_LT(name)                                                                                                       \
  ([]() {                                                                                                                  \
    static const auto fn = reinterpret_cast<decltype(&::name)>(::tfm::cuda::library_function("libcublasLt.so.13", #name, \
                                                                                               "a product on the GPU")); \
    return fn;                                                                                                             \
  }())
