#pragma once
// Inputs tfm reads whole (configurations, SentencePiece models): only regular files
// of bounded size, so that a path such as /dev/zero, a FIFO or a huge file is refused
// before any of it is read.
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tfm::io {

// Throws tfm::Error naming `path` and `what` (e.g. "SentencePiece model") unless it is
// a regular file of at most `max_bytes`.
void check_input_file(const std::string& path, int64_t max_bytes, const std::string& what);

// The JSON document in `path`, checked as above first; invalid JSON is one error naming
// the file and the byte where it stops being JSON.
nlohmann::json read_json_file(const std::string& path, int64_t max_bytes, const std::string& what);

}  // namespace tfm::io
