#include "tensor/cuda/library.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

#include "tensor/error.h"

namespace tfm::cuda {

void* library_function(const char* library, const char* name, const char* needed_for) {
  static std::mutex mutex;
  static std::map<std::string, void*> loaded;  // never closed: their functions are kept by their call sites
  const std::lock_guard<std::mutex> lock(mutex);
  void*& handle = loaded[library];
  if (!handle) handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error(std::string("cannot load ") + library + " (" + dlerror() + "): " + needed_for +
                " needs the CUDA 13 toolkit's library on the library path (LD_LIBRARY_PATH, or /usr/local/cuda/lib64 in ld.so.conf)");
  void* fn = dlsym(handle, name);
  if (!fn) throw Error(std::string(library) + " has no " + name + " (an older version than CUDA 13's?)");
  return fn;
}

}  // namespace tfm::cuda
