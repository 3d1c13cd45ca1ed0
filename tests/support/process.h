#pragma once
// Helpers for tests that touch the file system or run the tfm binary.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

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

// Runs a shell command; a process killed by signal S reports code 128 + S.
CliResult run_command(const std::string& shell_command);
// Runs `tfm <args>` through the shell (so args may redirect input).
CliResult run_tfm(const std::string& args);
// Starts tfm in the background with its output appended to log_path; returns its pid.
pid_t start_tfm(const std::vector<std::string>& args, const std::string& log_path);

struct Finished {
  int code;           // as CliResult::code
  long max_rss_kib;   // the peak resident memory of tfm itself (sampled every 20 ms)
};
// Waits for a process from start_tfm.
Finished wait_tfm(pid_t pid);

}  // namespace tfm::testing
