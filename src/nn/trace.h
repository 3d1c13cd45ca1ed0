#pragma once
// Optional capture of intermediate outputs by module name, the C++ side of the
// PyTorch forward hooks that the reference fixtures are made with.
#include <map>
#include <string>

#include "tensor/tensor.h"

namespace tfm::nn {

// While a TraceRecorder is alive, modules record their outputs into it.
class TraceRecorder {
 public:
  TraceRecorder();
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;
  std::map<std::string, Tensor> outputs;
};

// Records `t` under `name` if a recorder is active; returns t.
const Tensor& trace(const std::string& name, const Tensor& t);

// Whether a recorder is active (on this thread).
bool tracing();

}  // namespace tfm::nn
