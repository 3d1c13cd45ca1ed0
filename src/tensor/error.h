#pragma once
// One exception type for every user-facing failure: the CLI prints its message
// as a single line and exits non-zero.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tfm {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The error for a model's outputs (`what`: its scores, embeddings...) that hold NaN or
// infinity: they come from corrupted or too large weights, and are never printed as results.
[[noreturn]] inline void fail_not_finite(const std::string& what) {
  std::ostringstream message;
  message << "the model's " << what << " are not finite (NaN or infinity): its weights are corrupted or too large";
  throw Error(message.str());
}
inline void expect_finite(const float* values, size_t n, const std::string& what) {
  if (!std::all_of(values, values + n, [](float x) { return std::isfinite(x); })) fail_not_finite(what);
}

}  // namespace tfm

// TFM_CHECK(cond, "message " << value) throws tfm::Error when cond is false.
#define TFM_CHECK(cond, msg)                         \
  do {                                               \
    if (!(cond)) {                                   \
      std::ostringstream tfm_check_os_;              \
      tfm_check_os_ << msg;                          \
      throw ::tfm::Error(tfm_check_os_.str());       \
    }                                                \
  } while (0)
