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
  for (Slot& s : slots_) {
    const Tensor g = s.param.grad();
    if (!g.defined()) continue;  // as torch.optim: a parameter without a gradient is left alone
    u.shrink = options_.decoupled && s.param.dim() >= 2 ? 1.0f - options_.lr * wd : 1.0f;
    ops::adam_update(s.param, g, s.exp_avg, s.exp_avg_sq, u);
  }
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

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, dist::Communicator* across) {
  double squares = 0.0;
  for (const Tensor& p : params)
    if (p.grad().defined()) squares += ops::sum_of_squares(p.grad());
  const double total = std::sqrt(dist::sum_over(across, {squares})[0]);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (g.defined()) ops::scale_(g, static_cast<float>(coef));
    }
  }
  return total;
}

}  // namespace tfm::training
