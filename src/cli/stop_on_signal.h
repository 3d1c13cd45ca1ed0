#pragma once
// Ctrl-C, SIGTERM, SIGHUP (the terminal closed) and SIGPIPE (standard output's reader gone)
// during a training command. The library's Trainer only reads a
// stop token (tfm::train's); the command line is what turns signals into it.
#include <csignal>
#include <stop_token>
#include <thread>

namespace tfm::cli {

// While it lives, the first SIGINT, SIGTERM or SIGHUP requests a stop on token(): the run
// stops after its current step and saves last.safetensors. A second ends the process at
// once (exit 130), removing any half-written file. With `on_broken_pipe` (training),
// SIGPIPE requests the stop alone; a server, whose sockets raise none, leaves it as it is.
// The previous handlers come back after.
class StopOnSignal {
 public:
  explicit StopOnSignal(bool on_broken_pipe = true);
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
  void (*previous_hup_)(int);
  bool on_broken_pipe_;
  void (*previous_pipe_)(int) = SIG_DFL;
};

}  // namespace tfm::cli
