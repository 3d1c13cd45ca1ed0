#include "io/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/error.h"

namespace tfm::io {

void check_input_file(const std::string& path, int64_t max_bytes, const std::string& what) {
  struct stat st {};
  TFM_CHECK(::stat(path.c_str(), &st) == 0, path << ": cannot open the " << what << " (" << std::strerror(errno) << ")");
  TFM_CHECK(S_ISREG(st.st_mode), path << ": the " << what << " is not a regular file");
  TFM_CHECK(st.st_size <= max_bytes,
            path << ": the " << what << " is " << st.st_size << " bytes, more than the " << max_bytes << " tfm reads");
}

nlohmann::json read_json_file(const std::string& path, int64_t max_bytes, const std::string& what) {
  check_input_file(path, max_bytes, what);
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  TFM_CHECK(in, path << ": cannot read the " << what);
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ": not valid JSON (at byte " + std::to_string(e.byte) + ")");
  }
}

}  // namespace tfm::io
