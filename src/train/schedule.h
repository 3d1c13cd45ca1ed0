#pragma once
// The learning rate at each step: Noam's schedule (the paper's), constant, or cosine
// decay (nanoGPT's), each with its warm-up (tfm/training.h's Schedule).
#include <cstdint>

#include "tfm/training.h"

namespace tfm::training {

using tfm::Schedule;
// The learning rate at `step` (counted from 1).
float learning_rate(const Schedule& schedule, int64_t step);

}  // namespace tfm::training
