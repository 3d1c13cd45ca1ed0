#pragma once
// The learning rate at each step: Noam's schedule (the paper's), constant, or cosine
// decay (nanoGPT's), each with its warm-up (tfm/training.h's Schedule).
#include <cstdint>

#include "tfm/training.h"

namespace tfm::training {

using tfm::Schedule;
// The learning rate at `step` (counted from 1).
float learning_rate(const Schedule& schedule, int64_t step);

// What the families' training defaults (tfm/training.h's training_defaults(), beside
// each family's model) are made of:
// an encoder-decoder's trainer (`tfm train`): the paper's schedule (factor 1, `warmup`
// steps) and AdamW, whose weight decay is 0 unless given, as in every trainer;
TrainingOptions paper_training(const char* out_dir, int64_t warmup, double clip_norm, int64_t validate_every);
// a cosine schedule from `lr` to `min_lr` after `warmup` steps, and AdamW;
TrainingOptions cosine_training(const char* out_dir, float lr, float min_lr, int64_t warmup, float beta2, float weight_decay);
// training on random windows of a text: the step count decides, not the epochs.
TrainingOptions steps_of_windows(TrainingOptions t, int64_t max_steps, int64_t validate_every);

}  // namespace tfm::training
