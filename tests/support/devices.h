#pragma once
// Training on the simulated device (tensor/device.h) against the CPU.
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "support/compare.h"
#include "tfm/training.h"

namespace tfm::testing {

// Trains `task` with `o` on the CPU and on the simulated device, into DIR/cpu and
// DIR/sim, and expects the same weights bit for bit: the simulated device runs the CPU's
// kernels, and no code above them may read its memory.
template <class Task>
void expect_the_simulated_device_trains_as_the_cpu(const std::string& dir, TrainingOptions o, const Task& task) {
  std::ostringstream log;
  for (const char* device : {"cpu", "sim"}) {
    o.out_dir = dir + "/" + device, o.device = device;
    ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  }
  expect_same_checkpoint_tensors(dir + "/cpu/last.safetensors", dir + "/sim/last.safetensors");
}

// The same, the simulated device's run stopped halfway and resumed there.
template <class Task>
void expect_the_simulated_device_trains_and_resumes_as_the_cpu(const std::string& dir, TrainingOptions o, const Task& task) {
  std::ostringstream log;
  o.out_dir = dir + "/cpu", o.device = "cpu";
  ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  TrainingOptions first = o;
  first.out_dir = dir + "/sim", first.device = "sim", first.max_steps = o.max_steps / 2;
  ASSERT_FALSE(tfm::train(first, task, {}, &log).stopped) << log.str();
  TrainingOptions rest = first;
  rest.max_steps = o.max_steps, rest.resume = dir + "/sim/last.safetensors";
  ASSERT_FALSE(tfm::train(rest, task, {}, &log).stopped) << log.str();
  expect_same_checkpoint_tensors(dir + "/cpu/last.safetensors", dir + "/sim/last.safetensors");
}

}  // namespace tfm::testing
