#pragma once
// Files for fuzz targets whose reader takes a path: each process writes its inputs
// into a directory of its own under /tmp.
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

namespace tfm::fuzz {

// /tmp/tfm_fuzz_<target>_<pid>, created.
inline std::string scratch_dir(const std::string& target) {
  const std::string dir = "/tmp/tfm_fuzz_" + target + "_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::string& path, const char* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
}

}  // namespace tfm::fuzz
