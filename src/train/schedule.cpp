#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include "train/optimizer.h"

namespace tfm::training {

float learning_rate(const Schedule& schedule, int64_t step) {
  using Kind = Schedule::Kind;
  const auto& [kind, lr, min_lr, warmup, decay_steps, d_model] = schedule;
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  switch (kind) {
    case Kind::Noam: {  // min_lr: a floor under the decay, not under the warm-up
      const float v = noam_lr(step, d_model, lr, warmup);
      return step > warmup ? std::max(v, min_lr) : v;
    }
    case Kind::Constant: return warmup > 0 && s < warmup ? static_cast<float>(lr * s / warmup) : lr;
    case Kind::Cosine: {
      if (warmup > 0 && s < warmup) return static_cast<float>(lr * s / warmup);  // nanoGPT's get_lr
      if (s >= decay_steps) return min_lr;
      const double ratio = (s - warmup) / std::max<double>(1.0, static_cast<double>(decay_steps - warmup));
      return static_cast<float>(min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr));
    }
  }
  return lr;
}

TrainingOptions paper_training(const char* out_dir, int64_t warmup, double clip_norm, int64_t validate_every) {
  TrainingOptions t;
  t.out_dir = out_dir;
  t.schedule = {Schedule::Kind::Noam, 1.0f, 0.0f, warmup, 0, /*d_model: the model's*/ 0};
  t.adam.decoupled = true;
  t.clip_norm = clip_norm;
  t.validate_every = validate_every;
  return t;
}

TrainingOptions cosine_training(const char* out_dir, float lr, float min_lr, int64_t warmup, float beta2, float weight_decay) {
  TrainingOptions t;
  t.out_dir = out_dir;
  t.schedule = {Schedule::Kind::Cosine, lr, min_lr, warmup, /*decay_steps: the run's last step*/ 0, 0};
  t.adam = {lr, 0.9f, beta2, 1e-8f, weight_decay, /*decoupled=*/true};
  t.clip_norm = 1.0;
  return t;
}

TrainingOptions steps_of_windows(TrainingOptions t, int64_t max_steps, int64_t validate_every) {
  t.epochs = 1000000;
  t.max_steps = max_steps;
  t.validate_every = validate_every;
  return t;
}

}  // namespace tfm::training
