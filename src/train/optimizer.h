#pragma once
// Adam (Kingma & Ba) and AdamW, with torch.optim's exact update order, the paper's
// warm-up learning rate ("Noam" schedule), and gradient clipping by global norm.
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "tensor/tensor.h"
#include "tfm/training.h"

namespace tfm::training {

using tfm::AdamOptions;  // tfm/training.h


// The moments of all parameters live in two flat buffers (one for each moment).
class Adam {
 public:
  Adam(std::vector<std::pair<std::string, Tensor>> named_params, AdamOptions options);
  void step();  // one update of every parameter that has a gradient, in one pass
  void zero_grad();
  void set_lr(float lr) { options_.lr = lr; }
  float lr() const { return options_.lr; }
  int64_t steps() const { return step_; }

  // The moments as named tensors ("exp_avg.<param>", "exp_avg_sq.<param>") for checkpoints.
  std::vector<std::pair<std::string, Tensor>> state() const;
  // Restores the moments and the step count written by state().
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors, int64_t step);

 private:
  struct Slot {
    std::string name;
    Tensor param, exp_avg, exp_avg_sq;
  };
  std::vector<Slot> slots_;
  AdamOptions options_;
  int64_t step_ = 0;
};

// lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step counted from 1.
float noam_lr(int64_t step, int64_t d_model, float factor, int64_t warmup);

// Scales the gradients in `grads` (a flat gradient buffer, or a process's range of one)
// so that their global L2 norm is at most max_norm (infinite: leaves them), as
// torch.nn.utils.clip_grad_norm_ does; returns their sum of squares before clipping,
// on their device as ops::sum_of_squares gives it (f32 [2]), where nothing waits for it. With `across`, grads are this
// process's share of the model's and the sum is the whole model's (a wait: the
// processes' shares are summed on the host).
Tensor clip_grad_norm(Tensor grads, double max_norm, dist::Communicator* across = nullptr);

}  // namespace tfm::training
