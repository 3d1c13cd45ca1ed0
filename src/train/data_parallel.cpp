#include "train/data_parallel.h"

#include <algorithm>
#include <sstream>

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

uint64_t weights_checksum(const nn::Module& model) {
  if (const nn::FlatParameters* flat = model.flat_parameters()) {  // (one copy of the one buffer)
    const std::vector<float> values = flat->values.to_vector();
    return fnv1a(values.data(), values.size() * sizeof(float));
  }
  uint64_t h = fnv1a(nullptr, 0);
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<float> values = p.to_vector();
    h = fnv1a(values.data(), values.size() * sizeof(float), h);
  }
  return h;
}

namespace {

// The flags every process must share (not paths: hosts may mount the data elsewhere).
std::string training_flags(const TrainerOptions& o) {
  const Schedule& s = o.schedule;
  const AdamOptions& a = o.adam;
  std::ostringstream f;
  f << "--seed " << o.seed << " --steps " << o.max_steps << " --epochs " << o.epochs << " --accumulate " << o.accumulate << " --lr " << s.lr
    << " --min-lr " << s.min_lr << " --warmup " << s.warmup << " (schedule " << static_cast<int>(s.kind) << ") --beta2 " << a.beta2
    << " --weight-decay " << a.weight_decay << " --clip-norm " << o.clip_norm << " --precision " << o.precision << " --device " << o.device
    << " --validate-every " << o.validate_every << " --save-every " << o.save_every << " --patience " << o.patience
    << (o.skip_nonfinite ? " --skip-nonfinite" : "") << (o.shard_optimizer ? " --shard-optimizer" : "") << " --bucket-mb " << o.bucket_mb;
  return f.str();
}

}  // namespace

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void Trainer::check_same_job(TrainingTask& task) const {
  if (!o_.comm || o_.comm->size() == 1) return;
  const uint64_t weights = weights_checksum(task.model());
  const std::pair<const char*, std::string> parts[] = {
      {"model settings", task.describe().config_json},
      {"training flags", training_flags(o_)},
      {"training data", data_},
      {"starting weights (--resume or --init-from)", std::to_string(weights)}};
  for (const auto& [what, mine] : parts) {
    const std::vector<std::string> all = o_.comm->all_gather(mine);
    for (size_t r = 1; r < all.size(); ++r)
      TFM_CHECK(all[r] == all[0], "the processes of this job were given different " << what << ": rank " << r << "'s are " << all[r]
                                      << ", rank 0's " << all[0] << " (every process must be given the same)");
  }
}

void Trainer::check_replicas(const nn::Module& model) const {
  if (!o_.comm || o_.comm->size() == 1) return;
  const uint64_t mine = weights_checksum(model);
  const std::vector<std::string> all = o_.comm->all_gather(std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
  for (size_t r = 1; r < all.size(); ++r)
    TFM_CHECK(all[r] == all[0], "after step " << state_.step << ", the weights of rank " << r << " differ from rank 0's: the processes' "
                                              "sums disagreed, and the run cannot go on (please report it)");
}

}  // namespace tfm::training
