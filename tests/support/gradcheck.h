#pragma once
// Finite-difference gradient checking for ops (like torch.autograd.gradcheck):
// the op's output is reduced to a scalar with fixed random weights, and every
// input element's analytic gradient is compared with a central difference.
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckResult {
  double worst_error = 0.0;  // max |analytic - numeric| / max(1, |numeric|)
  std::string where;         // "input 1 element 7: analytic ... numeric ..."
};

GradcheckResult gradcheck(const OpFn& op, std::vector<Tensor> inputs, double eps = 3e-3);

// A tensor of uniform values in [lo, hi) from a fixed seed.
Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// A bool tensor (an attention mask's key padding) from 0/1 flags, row-major.
Tensor bool_tensor(const Shape& shape, const std::vector<uint8_t>& flags);

}  // namespace tfm::testing

// Asserts that op's gradients match finite differences within tol.
#define EXPECT_GRADCHECK(op, inputs, tol)                                        \
  do {                                                                          \
    auto gc_result_ = ::tfm::testing::gradcheck(op, inputs);                    \
    EXPECT_LT(gc_result_.worst_error, tol) << "worst at " << gc_result_.where;  \
  } while (0)
