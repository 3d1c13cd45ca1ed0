#pragma once
// The Trainer's machinery for data parallelism (several processes, TrainerOptions::comm):
// each step's gradient buckets summed across the processes as the backward pass completes
// them, through host memory where the buffers are on a device.
#include <cstdint>
#include <cstdio>
#include <string>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "dist/communicator.h"
#include "nn/module.h"

namespace tfm::training {

// Gives the parameters in [begin, end) of the flat buffers that have no gradient this
// step a gradient of zeros, so that every process sums the same ranges.
void complete_gradients(const nn::FlatParameters& flat, int64_t begin, int64_t end);

// Floats [begin, end) of a flat buffer as `comm` takes them: the buffer's own where it
// is in the memory the communicator reads (the host's, or a GPU's for NCCL); else a
// host copy, written back by done() (a job on GPUs without NCCL sums through the host).
class CommFloats {
 public:
  CommFloats(const Tensor& buffer, int64_t begin, int64_t end, const dist::Communicator& comm)
      : view_(make_view(buffer, {end - begin}, {1}, begin)),
        own_(view_.device() == (comm.takes_device_memory() ? Device::CUDA : Device::CPU)) {
    if (!own_) copy_ = view_.to_vector();
  }
  float* data() { return own_ ? static_cast<float*>(view_.device_ptr()) : copy_.data(); }
  void done() {
    if (!own_) view_.copy_from(Tensor::from_vector(view_.shape(), copy_));
  }

 private:
  Tensor view_;
  bool own_;
  std::vector<float> copy_;
};

// FNV-1a of `bytes` bytes, continuing from `h`: a fingerprint of data that processes compare.
uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull);
// FNV-1a over the bytes of every weight of `model`, in order (its flat buffer where it has one).
uint64_t weights_checksum(const nn::Module& model);
// "<count> <what>, fnv <hash in hex>": a task's data_fingerprint().
inline std::string fingerprint(size_t count, const std::string& what, uint64_t hash) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::to_string(count) + " " + what + ", fnv " + hex;
}

// A bucket of `mb` MiB in floats; 0: every parameter in one bucket.
int64_t bucket_floats(double mb);

// Starts the sum across processes of each of one step's buckets of the flat gradient
// buffer as soon as the gradients of all its parameters are complete (during the step's
// last backward pass, which reaches the output layers' parameters, first in the buffer,
// first), in buffer order on every process, and the rest once the pass is over.
class BucketReducer {
 public:
  // Null comm: no sums. 0 MiB: one bucket, complete once the backward pass is over.
  BucketReducer(const nn::FlatParameters& flat, dist::Communicator* comm, double bucket_mb)
      : flat_(flat), comm_(comm), buckets_(flat.buckets(bucket_floats(bucket_mb))), waiting_(buckets_.size(), 0) {
    size_t b = 0;
    for (const nn::FlatParameters::Entry& e : flat.entries) {
      while (e.offset >= buckets_[b].second) ++b;
      bucket_of_[e.param.impl()] = b;
      ++waiting_[b];
    }
  }
  // For the step's last backward pass (null alone).
  autograd::LeafDone leaf_done() {
    if (!comm_) return nullptr;
    return [this](TensorImpl* leaf) {
      auto it = bucket_of_.find(leaf);
      if (it != bucket_of_.end() && --waiting_[it->second] == 0) start_ready();
    };
  }
  // Starts the buckets not started yet (whose parameters the pass never reached, or
  // all of them where this process had no share of the step's batches), and waits for
  // every sum to complete.
  void finish() {
    if (!comm_) return;
    std::fill(waiting_.begin(), waiting_.end(), 0);
    start_ready();
    comm_->wait();
    for (CommFloats& sum : sums_) sum.done();
    sums_.clear();
  }

 private:
  // Starts the complete buckets that follow the last one started (the same order on
  // every process, whatever order the pass completed them in).
  void start_ready() {
    for (; started_ < buckets_.size() && waiting_[started_] == 0; ++started_) {
      const auto [begin, end] = buckets_[started_];
      complete_gradients(flat_, begin, end);
      sums_.emplace_back(flat_.grads, begin, end, *comm_);  // the sum is made in the buffer (or its host copy)
      comm_->start_sum(sums_.back().data(), end - begin);
    }
  }

  const nn::FlatParameters& flat_;
  dist::Communicator* comm_;
  std::vector<std::pair<int64_t, int64_t>> buckets_;
  std::unordered_map<const TensorImpl*, size_t> bucket_of_;
  std::vector<int64_t> waiting_;  // parameters of each bucket whose gradient is not complete yet
  size_t started_ = 0;           // buckets [0, started_) are being summed
  std::deque<CommFloats> sums_;  // the started sums' memory, until finish() (a deque: it stays put)
};

}  // namespace tfm::training
