#pragma once
// Training progress: a one-line bar redrawn in place on a terminal, plain log
// lines every `log_every` steps otherwise (files, CI logs).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>

namespace tfm::training {

class Progress {
 public:
  // `unit` names what update() counts ("tok", "img"): the rate is shown per second.
  // `lines`: where the log lines go; null: standard error (a bar on a terminal).
  // `silent`: nothing at all (the processes of a data-parallel job other than rank 0).
  Progress(int64_t total_steps, int64_t first_step, int64_t log_every, std::string unit = "tok", std::ostream* lines = nullptr,
           bool silent = false);
  // Call after each step with that step's loss, learning rate and items (tokens, images);
  // `label` (e.g. "epoch 3") leads the line.
  void update(int64_t step, double loss, double lr, int64_t tokens, const std::string& label = "");
  void finish();
  // A wall-clock budget (seconds from now): the ETA never exceeds what is left of it.
  void set_time_limit(double seconds) { time_limit_ = seconds; }

 private:
  int64_t total_, first_, log_every_;
  template <class... Args>
  void print(const char* format, Args... args);

  std::string unit_;
  std::ostream* lines_;
  bool tty_, silent_;
  int64_t tokens_ = 0;
  double time_limit_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// A running count redrawn in place on a terminal ("sentences translated: 1200 (35.2/s)"),
// its line ended when it goes; silent when `out` is not a terminal, so that pipelines,
// files and tests see only the results.
class Counter {
 public:
  explicit Counter(std::string what, std::FILE* out = stderr);
  ~Counter();
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;
  void add(int64_t n);

 private:
  std::string what_;
  std::FILE* out_;
  bool tty_;
  int64_t count_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// "1h02m", "3m05s", "12s"
std::string format_duration(double seconds);

// "1 patch", "16 patches": `n` and the noun, in the plural unless n is 1.
std::string count_of(int64_t n, const std::string& singular, const std::string& plural);

}  // namespace tfm::training
