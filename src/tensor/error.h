#pragma once
// One exception type for every user-facing failure: the CLI prints its message
// as a single line and exits non-zero.
#include <sstream>
#include <stdexcept>
#include <string>

namespace tfm {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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
