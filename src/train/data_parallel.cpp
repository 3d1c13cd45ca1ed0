#include "train/data_parallel.h"

#include <algorithm>

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

}  // namespace tfm::training
