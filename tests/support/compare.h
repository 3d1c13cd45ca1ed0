#pragma once
// Tensor comparison for reference tests: the worst element, relative to the
// reference tensor's largest magnitude, printed on failure.
#include <string>

#include "tensor/tensor.h"

namespace tfm::testing {

struct Difference {
  double max_abs = 0.0;   // max |actual - expected|
  double relative = 0.0;  // max_abs / max(|expected|, 1e-12)
  int64_t index = -1;     // element of max_abs
  std::string describe(const std::string& name) const;
};

Difference compare(const Tensor& actual, const Tensor& expected);

// The worst of many comparisons, for a one-line report.
struct WorstDifference {
  std::string name;
  Difference diff;
  void add(const std::string& n, const Difference& d) {
    if (name.empty() || d.relative > diff.relative) name = n, diff = d;
  }
  std::string summary() const { return name.empty() ? "nothing compared" : diff.describe(name); }
};

// Two checkpoints hold the same tensors, bit for bit (e.g. a resumed and an
// uninterrupted run). Reports each tensor that differs as a test failure.
void expect_same_checkpoint_tensors(const std::string& path_a, const std::string& path_b);

}  // namespace tfm::testing

#define EXPECT_TENSOR_NEAR(name, actual, expected, rel_tol)                                       \
  do {                                                                                            \
    EXPECT_EQ((actual).shape(), (expected).shape()) << (name);                                     \
    if ((actual).shape() == (expected).shape()) {                                                 \
      auto cmp_diff_ = ::tfm::testing::compare(actual, expected);                                 \
      EXPECT_LE(cmp_diff_.relative, rel_tol) << cmp_diff_.describe(name);                          \
    }                                                                                             \
  } while (0)
