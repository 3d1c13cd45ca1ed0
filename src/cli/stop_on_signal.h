#pragma once
// Ctrl-C and SIGTERM during a training command. The library's Trainer only reads a
// stop flag (TrainerOptions::stop); the command line is what turns signals into it.
#include <atomic>

#include "train/trainer.h"

namespace tfm::cli {

// While it lives, the first SIGINT or SIGTERM asks the run in `options` to stop after
// its current step and save last.safetensors; a second ends the process at once
// (exit 130), removing any half-written file. The previous handlers come back after.
class StopOnSignal {
 public:
  explicit StopOnSignal(train::TrainerOptions& options);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

}  // namespace tfm::cli
