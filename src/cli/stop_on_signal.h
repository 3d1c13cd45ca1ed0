#pragma once
// Ctrl-C and SIGTERM during a training command. The library's Trainer only reads a
// stop token (tfm::train's); the command line is what turns signals into it.
#include <csignal>
#include <stop_token>
#include <thread>

namespace tfm::cli {

// While it lives, the first SIGINT or SIGTERM requests a stop on token(): the run stops
// after its current step and saves last.safetensors. A second ends the process at once
// (exit 130), removing any half-written file. The previous handlers come back after.
class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  std::stop_token token() const { return source_.get_token(); }

 private:
  std::stop_source source_;
  // A signal handler may only set a flag (request_stop is not async-signal-safe): this
  // thread looks at it every 20 ms and requests the stop.
  std::jthread watcher_;
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

}  // namespace tfm::cli
