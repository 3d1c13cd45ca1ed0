#pragma once
// Helpers for tests that touch the file system or run the tfm binary.
#include <filesystem>
#include <functional>
#include <string>

namespace tfm::testing {

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

void write_file(const std::string& path, const std::string& content);
// The message of the tfm::Error that f throws ("" if it throws none).
std::string error_of(const std::function<void()>& f);
std::string read_file(const std::string& path);

struct CliResult {
  int code;
  std::string output;  // stdout and stderr together
};

// Runs `tfm <args>` through the shell (so args may redirect input).
CliResult run_tfm(const std::string& args);

}  // namespace tfm::testing
