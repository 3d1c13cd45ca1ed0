#include "train/data_parallel.h"

#include <algorithm>
#include <unordered_map>

#include "tensor/error.h"
#include "train/trainer.h"

namespace tfm::training {

void complete_gradients(const nn::FlatParameters& flat, int64_t begin, int64_t end) {
  for (const nn::FlatParameters::Entry& e : flat.entries) {
    TensorImpl* p = e.param.impl();
    if (e.offset < begin || e.offset >= end || p->grad) continue;
    Tensor(p->grad_slot).fill(0.0f);
    p->grad = p->grad_slot;
  }
}

int64_t bucket_floats(double mb) {
  return mb > 0 ? std::max<int64_t>(1, static_cast<int64_t>(std::min(mb * (1 << 20) / 4, 1e18))) : INT64_MAX;
}

namespace {

// FNV-1a over the bytes of every weight.
uint64_t weights_checksum(const nn::FlatParameters& flat) {
  const std::vector<float> values = flat.values.to_vector();
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

}  // namespace

void Trainer::check_replicas(const nn::Module& model) const {
  if (!o_.comm || o_.comm->size() == 1) return;
  const uint64_t mine = weights_checksum(*model.flat_parameters());
  const std::vector<std::string> all = o_.comm->all_gather(std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
  for (size_t r = 1; r < all.size(); ++r)
    TFM_CHECK(all[r] == all[0], "after step " << state_.step << ", the weights of rank " << r << " differ from rank 0's: the processes' "
                                              "sums disagreed, and the run cannot go on (please report it)");
}

std::vector<std::pair<std::string, Tensor>> Trainer::optimized_parameters(const nn::Module& model) {
  if (!o_.shard_optimizer || !o_.comm || o_.comm->size() == 1) {
    if (o_.shard_optimizer)
      out_ << "note: --shard-optimizer shares the optimiser among the processes of an mpirun job; alone, it changes nothing" << std::endl;
    return model.named_parameters();
  }
  const nn::FlatParameters& flat = *model.flat_parameters();
  const std::vector<int64_t> cuts = flat.cuts(o_.comm->size());
  Shard s;
  for (size_t r = 0; r + 1 < cuts.size(); ++r) s.counts.push_back(cuts[r + 1] - cuts[r]);
  s.begin = cuts[static_cast<size_t>(o_.comm->rank())], s.end = cuts[static_cast<size_t>(o_.comm->rank()) + 1];
  std::vector<std::pair<std::string, Tensor>> mine;
  for (const nn::FlatParameters::Entry& e : flat.entries)
    if (e.offset >= s.begin && e.offset < s.end) mine.emplace_back(e.name, e.param), s.params.push_back(e.param);
  shard_ = std::move(s);
  return mine;
}

std::vector<std::pair<std::string, Tensor>> Trainer::optimizer_state(const nn::Module& model) const {
  if (!shard_) return optimizer_->state();
  // Each process's moments in the flat buffers' layout, then every share gathered.
  const nn::FlatParameters& flat = *model.flat_parameters();
  const int64_t total = flat.values.numel();
  Tensor exp_avg = Tensor::zeros({total}), exp_avg_sq = Tensor::zeros({total});
  std::unordered_map<std::string, Tensor> mine;
  for (const auto& [name, t] : optimizer_->state()) mine.emplace(name, t);
  std::vector<std::pair<std::string, Tensor>> all;
  for (const nn::FlatParameters::Entry& e : flat.entries)
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
