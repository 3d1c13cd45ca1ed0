#include "ops/cuda/cublaslt.h"

#include <dlfcn.h>

#include <string>

#include "tensor/error.h"

namespace tfm::ops::cuda::lt {

namespace {

constexpr const char* kLibrary = "libcublasLt.so.13";

void* library() {
  static void* const handle = [] {
    void* h = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!h)
      throw Error(std::string("cuda: cannot load ") + kLibrary + " (" + dlerror() +
                  "): the CUDA 13 toolkit's cuBLAS must be on the library path (LD_LIBRARY_PATH, or /usr/local/cuda/lib64 in ld.so.conf)");
    return h;
  }();
  return handle;
}

}  // namespace

void* symbol(const char* name) {
  void* fn = dlsym(library(), name);
  if (!fn) throw Error(std::string("cuda: ") + kLibrary + " has no " + name + " (an older cuBLAS than CUDA 13's?)");
  return fn;
}

}  // namespace tfm::ops::cuda::lt
