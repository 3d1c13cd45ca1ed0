#pragma once
// The backend op table's cases (ggml's test-backend-ops is the model): each op's front
// end on small inputs, and its oracle, plain loops in double. tests/test_backend_ops.cpp
// runs every case a device claims against the oracle; the GPU check (tests/gpu/check.cpp)
// also compares each device's result with the CPU's and with a second run of its own.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/kernels.h"
#include "tensor/tensor.h"

namespace tfm::op_cases {

using Values = std::vector<double>;

struct Input {
  Shape shape;
  Values values;
  DType dtype = DType::f32;
  bool differentiable = true;  // f32 inputs only
};

// What a claim's dtype is for an op: its floating-point inputs' (which the harness
// converts to it), its products' precision, or the dtype it makes.
enum class DTypeIs { inputs, precision, result };

// One op on one set of inputs: its front end (on tensors already on the device under
// test; `dtype` is the claim's) and its oracle.
struct OpCase {
  std::string op;
  std::vector<Input> inputs;
  std::function<Tensor(const std::vector<Tensor>&, DType)> run;
  std::function<Values(const std::vector<Values>&)> oracle;
  bool differentiable = true;
  DTypeIs dtype_is = DTypeIs::inputs;
};

std::vector<OpCase> cases();

// Tolerances: |got - want| <= tol * max(1, |want|).
double forward_tolerance(DType dtype);
double backward_tolerance(DType dtype);

// What one run of a case gave: its values (a result, or one input's gradient), the
// oracle's, and the worst |got - want| / max(1, |want|) and where.
struct Outcome {
  Values got, want;
  double error = 0.0;
  size_t at = 0;
  int input = -1;  // whose gradient (backward)
};
Outcome run_forward(const OpCase& c, Device device, DType dtype);
// Autograd's gradient of sum(out * g) for each differentiable input, against central
// differences of the oracle.
std::vector<Outcome> run_backward(const OpCase& c, Device device, DType dtype);
bool has_backward(const OpCase& c, DType dtype);

// An input of a case on `device`; floating-point inputs in `dtype`.
Tensor make(const Input& in, Device device, DType dtype = DType::f32);
// A tensor's values as doubles, from any device and dtype.
Values values_of(const Tensor& t);

// Whether `device` can run here: its kernels are built and a device is present.
bool usable(Device device, std::string& why);

}  // namespace tfm::op_cases
