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

}  // namespace tfm::training
