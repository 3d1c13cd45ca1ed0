#include "cli/stop_on_signal.h"

#include <atomic>
#include <chrono>
#include <cstdlib>

#include "io/output_file.h"

namespace tfm::cli {
namespace {

// A signal handler can reach only what is global; one training run per process.
std::atomic<bool> g_stop{false};

void on_interrupt(int) {
  if (!g_stop.exchange(true)) return;
  io::discard_pending_output();  // a second Ctrl-C: stop now, leaving no half-written checkpoint behind
  std::_Exit(130);
}

// The reader of standard output went away (`tfm lm train ... | head`): stop as for Ctrl-C,
// saved; the writes after it fail without a signal (a second SIGPIPE must not end the
// process before the save), and the exit status says so.
void stop_on_broken_pipe(int) {
  std::signal(SIGPIPE, SIG_IGN);
  g_stop = true;
}

}  // namespace

StopOnSignal::StopOnSignal(bool on_broken_pipe) : on_broken_pipe_(on_broken_pipe) {
  g_stop = false;
  watcher_ = std::jthread([this](std::stop_token done) {
    while (!done.stop_requested()) {
      if (g_stop) {
        source_.request_stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  previous_int_ = std::signal(SIGINT, on_interrupt);
  previous_term_ = std::signal(SIGTERM, on_interrupt);
  previous_hup_ = std::signal(SIGHUP, on_interrupt);
  if (on_broken_pipe) previous_pipe_ = std::signal(SIGPIPE, stop_on_broken_pipe);
}

StopOnSignal::~StopOnSignal() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
  std::signal(SIGHUP, previous_hup_);
  if (on_broken_pipe_) std::signal(SIGPIPE, previous_pipe_);
}

}  // namespace tfm::cli
