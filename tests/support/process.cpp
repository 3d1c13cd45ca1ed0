#include "support/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tensor/error.h"

namespace tfm::testing {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  dir_ = std::filesystem::temp_directory_path() / ("tfm_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void write_file(const std::string& path, const std::string& content) { std::ofstream(path, std::ios::binary) << content; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliResult run_command(const std::string& shell_command) {
  const std::string cmd = shell_command + " 2>&1";
  CliResult r{0, ""};
  FILE* pipe = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

CliResult run_tfm(const std::string& args) { return run_command(std::string(TFM_BINARY) + " " + args); }

pid_t start_tfm(const std::vector<std::string>& args, const std::string& log_path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1), ::dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(TFM_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(TFM_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

Finished wait_tfm(pid_t pid) {
  // Not wait4's ru_maxrss: Linux carries a process's peak across exec, so it would
  // include this (forked) test process. VmHWM is the peak of tfm's own memory, once
  // the child runs tfm (its command line is no longer this test's).
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string test_cmdline = read_file("/proc/self/cmdline");
  long peak = 0;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (read_file(proc + "/cmdline") != test_cmdline) {
      std::ifstream in(proc + "/status");
      for (std::string line; std::getline(in, line);)
        if (line.rfind("VmHWM:", 0) == 0) peak = std::max(peak, std::stol(line.substr(6)));
    }
    ::usleep(20000);
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), peak};
}

}  // namespace tfm::testing
