#include "tensor/environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "tensor/error.h"

namespace tfm {

bool env_switch(const char* name, bool otherwise) {
  const char* set = std::getenv(name);
  std::string value = set ? set : "";
  if (value.empty()) return otherwise;
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (value == "1" || value == "true" || value == "on" || value == "yes") return true;
  if (value == "0" || value == "false" || value == "off" || value == "no") return false;
  throw Error(std::string(name) + "=" + set + ": set it to 1 (on, true, yes) or 0 (off, false, no)");
}

}  // namespace tfm
