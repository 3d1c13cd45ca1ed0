#include "train/step.h"

#include <cmath>
#include <unordered_map>

#include "autograd/autograd.h"
#include "ops/elementwise.h"
#include "train/data_parallel.h"

namespace tfm::training {

namespace {

// The values of small f32 tensors on `device`, one after another, brought to the host in one copy.
std::vector<float> read_together(const std::vector<Tensor>& tensors, Device device) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  Tensor all = Tensor::empty({total}, DType::f32, device);
  int64_t at = 0;
  for (const Tensor& t : tensors) make_view(all, t.shape(), contiguous_strides(t.shape()), at).copy_from(t), at += t.numel();
  return all.to_vector();
}

}  // namespace

bool StepGradients::finite() const { return std::isfinite(loss) && std::isfinite(grad_norm); }

OptimizationStep::OptimizationStep(nn::Module& model, StepOptions options, std::ostream& notes)
    : model_(model), flat_(model.flatten_parameters()), o_(std::move(options)) {
  optimizer_ = std::make_unique<Adam>(optimized_parameters(notes), o_.adam);
}

StepGradients OptimizationStep::gradients(const std::function<BatchLoss(int64_t)>& batch_loss, int64_t first, int64_t end,
                                          const Flags& flags) {
  for (Tensor& p : model_.parameters()) p.zero_grad();  // a sharded optimiser holds only some of them
  // The step's loss is the mean over every token (image...) of its batches, on every
  // process: each batch's summed loss goes backward, the gradients are summed across
  // the processes and divided by the count. (One batch of one process goes backward as
  // it is: the same mean, without the two roundings.)
  const bool one_batch = end - first == 1 && !o_.comm;
  std::vector<Tensor> to_read;  // each batch's loss, then the gradients' sum of squares: on the device until the step's one read
  std::vector<double> weights;
  int64_t items = 0, count = 0;
  BucketReducer reducer(flat_, shard_ ? nullptr : o_.comm, o_.bucket_mb);  // a sharded optimiser's sum comes after
  for (int64_t i = first; i < end; ++i) {
    BatchLoss b = batch_loss(i);
    const int64_t n = b.averaged_over > 0 ? b.averaged_over : b.items;
    items += b.items, count += n;
    if (!b.loss.defined()) continue;  // this process's share of the batch is empty
    autograd::backward(one_batch ? b.loss : ops::scale(b.loss, static_cast<float>(n)), i + 1 == end ? reducer.leaf_done() : nullptr);
    to_read.push_back(b.loss.detach()), weights.push_back(static_cast<double>(n));
  }
  reducer.finish();
  std::vector<double> counts{static_cast<double>(count), static_cast<double>(items)};
  if (flags) {
    const std::vector<double> f = flags();
    counts.insert(counts.end(), f.begin(), f.end());
  }
  counts = dist::sum_over(o_.comm, counts);
  StepGradients g;
  g.count = counts[0], g.items = static_cast<int64_t>(counts[1]), g.flags.assign(counts.begin() + 2, counts.end());
  to_read.push_back(finish_gradients(g.count, !one_batch && g.count > 0));
  const std::vector<float> read = read_together(to_read, model_.device());  // the step's one wait for the device
  double loss_sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) loss_sum += read[i] * weights[i];
  loss_sum = dist::sum_over(o_.comm, {loss_sum})[0];
  g.loss = g.count > 0 ? loss_sum / g.count : 0.0;
  g.grad_norm = std::sqrt(static_cast<double>(read[read.size() - 2]) + read.back());  // (the two floats of a sum of squares)
  return g;
}

Tensor OptimizationStep::finish_gradients(double count, bool divide) {
  Tensor grads = flat_.grads;  // a handle: the buffer itself is changed
  const double max_norm = o_.clip_norm > 0 ? o_.clip_norm : INFINITY;
  if (!shard_) {
    if (divide) ops::scale_(grads, static_cast<float>(1.0 / count));
    flat_.zero_stale_gradients();
    return clip_grad_norm(grads, max_norm);
  }
  complete_gradients(flat_, 0, grads.numel());
  CommFloats all(grads, 0, grads.numel(), *o_.comm);
  o_.comm->reduce_scatter_sum(all.data(), shard_->counts);  // this process's share summed
  all.done();
  Tensor mine = make_view(grads, {shard_->end - shard_->begin}, {1}, shard_->begin);
  if (divide) ops::scale_(mine, static_cast<float>(1.0 / count));
  return clip_grad_norm(mine, max_norm, o_.comm);
}

void OptimizationStep::update(float lr) {
  optimizer_->set_lr(lr);
  optimizer_->step();
  if (!shard_) return;
  CommFloats values(flat_.values, 0, flat_.values.numel(), *o_.comm);
  o_.comm->all_gather_parts(values.data(), shard_->counts);
  values.done();
}

std::vector<std::pair<std::string, Tensor>> OptimizationStep::optimized_parameters(std::ostream& notes) {
  if (!o_.shard_optimizer || !o_.comm || o_.comm->size() == 1) {
    if (o_.shard_optimizer)
      notes << "note: --shard-optimizer shares the optimiser among the processes of an mpirun job; alone, it changes nothing" << std::endl;
    return model_.named_parameters();
  }
  const std::vector<int64_t> cuts = flat_.cuts(o_.comm->size());
  Shard s;
  for (size_t r = 0; r + 1 < cuts.size(); ++r) s.counts.push_back(cuts[r + 1] - cuts[r]);
  s.begin = cuts[static_cast<size_t>(o_.comm->rank())], s.end = cuts[static_cast<size_t>(o_.comm->rank()) + 1];
  std::vector<std::pair<std::string, Tensor>> mine;
  for (const nn::FlatParameters::Entry& e : flat_.entries)
    if (e.offset >= s.begin && e.offset < s.end) mine.emplace_back(e.name, e.param);
  shard_ = std::move(s);
  return mine;
}

std::vector<std::pair<std::string, Tensor>> OptimizationStep::optimizer_state() const {
  if (!shard_) return optimizer_->state();
  // Each process's moments in the flat buffers' layout, then every share gathered.
  const int64_t total = flat_.values.numel();
  Tensor exp_avg = Tensor::zeros({total}), exp_avg_sq = Tensor::zeros({total});
  std::unordered_map<std::string, Tensor> mine;
  for (const auto& [name, t] : optimizer_->state()) mine.emplace(name, t);
  std::vector<std::pair<std::string, Tensor>> all;
  for (const nn::FlatParameters::Entry& e : flat_.entries)
    for (auto [prefix, buffer] : {std::pair{"exp_avg.", &exp_avg}, std::pair{"exp_avg_sq.", &exp_avg_sq}}) {
      Tensor view = make_view(*buffer, e.param.shape(), contiguous_strides(e.param.shape()), e.offset);
      if (auto it = mine.find(prefix + e.name); it != mine.end()) view.copy_from(it->second);
      all.emplace_back(prefix + e.name, view);
    }
  o_.comm->all_gather_parts(exp_avg.data(), shard_->counts);
  o_.comm->all_gather_parts(exp_avg_sq.data(), shard_->counts);
  return all;
}

}  // namespace tfm::training
