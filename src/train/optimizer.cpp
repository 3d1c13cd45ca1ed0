#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "ops/elementwise.h"
#include "ops/optimizer.h"
#include "ops/reduce.h"
#include "tensor/error.h"

namespace tfm::training {

Adam::Adam(std::vector<std::pair<std::string, Tensor>> named_params, AdamOptions options) : options_(options) {
  int64_t total = 0;
  for (const auto& [name, p] : named_params) total += p.numel();
  const Device device = named_params.empty() ? Device::CPU : named_params.front().second.device();
  const Tensor exp_avg = Tensor::zeros({total}, device), exp_avg_sq = Tensor::zeros({total}, device);  // the moments in two flat buffers
  int64_t offset = 0;
  for (auto& [name, p] : named_params) {
    const Shape strides = contiguous_strides(p.shape());
    slots_.push_back({name, p, make_view(exp_avg, p.shape(), strides, offset), make_view(exp_avg_sq, p.shape(), strides, offset)});
    offset += p.numel();
  }
}

void Adam::step() {
  ++step_;
  const float b1 = options_.beta1, b2 = options_.beta2, wd = options_.weight_decay;
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step_));
  ops::AdamUpdate u{b1, b2, options_.eps, static_cast<float>(options_.lr / bias_correction1),
                    static_cast<float>(std::sqrt(bias_correction2)), options_.decoupled ? 0.0f : wd, 1.0f};
  u.shrink = options_.decoupled ? 1.0f - options_.lr * wd : 1.0f;  // (AdamW decays matrices only)
  std::vector<ops::AdamTensors> update;
  for (Slot& s : slots_) {
    const Tensor g = s.param.grad();
    if (!g.defined()) continue;  // as torch.optim: a parameter without a gradient is left alone
    update.push_back({s.param, g, s.exp_avg, s.exp_avg_sq, s.param.dim() >= 2});
  }
  ops::adam_update(update, u);
}

void Adam::zero_grad() {
  for (Slot& s : slots_) s.param.zero_grad();
}

std::vector<std::pair<std::string, Tensor>> Adam::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Slot& s : slots_) {
    out.emplace_back("exp_avg." + s.name, s.exp_avg);
    out.emplace_back("exp_avg_sq." + s.name, s.exp_avg_sq);
  }
  return out;
}

void Adam::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors, int64_t step) {
  auto find = [&](const std::string& name) -> const Tensor& {
    for (const auto& [n, t] : tensors)
      if (n == name) return t;
    throw Error("optimizer state is missing '" + name + "'");
  };
  for (Slot& s : slots_) {
    for (auto [prefix, dst] : {std::pair{"exp_avg.", &s.exp_avg}, std::pair{"exp_avg_sq.", &s.exp_avg_sq}}) {
      const Tensor& src = find(prefix + s.name);
      TFM_CHECK(src.shape() == dst->shape(), "optimizer state '" << prefix << s.name << "' has shape " << shape_str(src.shape())
                                                                   << ", expected " << shape_str(dst->shape()));
      dst->copy_from(src);
    }
  }
  step_ = step;
}

float noam_lr(int64_t step, int64_t d_model, float factor, int64_t warmup) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  return static_cast<float>(factor * std::pow(static_cast<double>(d_model), -0.5) *
                            std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup), -1.5)));
}

Tensor clip_grad_norm(Tensor grads, double max_norm, dist::Communicator* across) {
  Tensor squares = ops::sum_of_squares(grads);
  if (across) {  // the processes' sums added up on the host, in the same two floats
    const std::vector<float> mine = squares.to_vector();
    const double all = dist::sum_over(across, {static_cast<double>(mine[0]) + mine[1]})[0];
    const float high = static_cast<float>(all);
    squares.copy_from(Tensor::from_vector({2}, {high, static_cast<float>(all - high)}));
  }
  if (std::isfinite(max_norm)) ops::clip_to_norm(grads, squares, static_cast<float>(max_norm));
  return squares;
}

}  // namespace tfm::training
