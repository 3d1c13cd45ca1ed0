#include "support/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "io/safetensors.h"

namespace tfm::testing {

Difference compare(const Tensor& actual, const Tensor& expected) {
  std::vector<float> a = actual.to_vector(), e = expected.to_vector();
  Difference d;
  double scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::abs(e[i])));
    const double diff = std::abs(static_cast<double>(a[i]) - e[i]);
    if (diff > d.max_abs || std::isnan(diff)) {
      d.max_abs = std::isnan(diff) ? INFINITY : diff;
      d.index = static_cast<int64_t>(i);
    }
  }
  d.relative = d.max_abs / std::max(scale, 1e-12);
  return d;
}

std::string Difference::describe(const std::string& name) const {
  std::ostringstream os;
  os << name << ": worst difference " << max_abs << " at element " << index << " (" << relative << " of the tensor's scale)";
  return os.str();
}

void expect_same_checkpoint_tensors(const std::string& path_a, const std::string& path_b) {
  io::SafeTensors a = io::read_safetensors(path_a), b = io::read_safetensors(path_b);
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << path_a << " vs " << path_b;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    EXPECT_EQ(a.tensors[i].second.to_vector(), b.tensors[i].second.to_vector()) << a.tensors[i].first;
  }
}

}  // namespace tfm::testing
