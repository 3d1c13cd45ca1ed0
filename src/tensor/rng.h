#pragma once
// Seeded random numbers. Sequential draws (initialisation, data) come from a
// splitmix64 stream; parallel draws (dropout masks) use a counter-based hash of
// (key, element index), so results do not depend on the number of threads.
#include <cstdint>

#include "tensor/host_device.h"  // the counter hashes: both devices draw the same dropout masks

namespace tfm {

TFM_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform float in [0, 1) for element `index` of the stream named by `key`.
TFM_HOST_DEVICE inline float hash_uniform(uint64_t key, uint64_t index) {
  return static_cast<float>(splitmix64(key ^ (index * 0xD1B54A32D192ED03ull)) >> 40) * (1.0f / 16777216.0f);
}

// The random stream of a dropout mask. An element is dropped when
// hash_uniform(key, dropout_index(row, place)) < p, where `row` is its sample in the
// batch, counted from `first_row`, and `place` its place in the sample (its flat offset
// in the sample's rows: position x features; attention_dropout_place for attention's
// probabilities). So a sample's mask depends on where it is in the batch, not on how
// the batch is laid out (padded to any length, or packed without padding), nor on the
// process computing it: one that computes rows [r, r + n) of a batch split across
// processes draws the whole batch's masks for them (first_row = r,
// nn::Module::set_batch_rows), as one process would.
struct DropoutKey {
  uint64_t key = 0;
  int64_t first_row = 0;
  DropoutKey(uint64_t key = 0, int64_t first_row = 0) : key(key), first_row(first_row) {}  // NOLINT: a bare key is the common case
};

// A sample's places are 2^40 apart: up to 10^12 elements a sample, 2^24 samples a batch.
TFM_HOST_DEVICE inline uint64_t dropout_index(int64_t row, int64_t place) { return (static_cast<uint64_t>(row) << 40) + static_cast<uint64_t>(place); }

// The place of probability (head h, query i, key j) in its sample: lengths up to
// kAttentionDropoutLength, whatever the batch's padded length.
constexpr int64_t kAttentionDropoutLength = int64_t{1} << 14;
TFM_HOST_DEVICE inline int64_t attention_dropout_place(int64_t h, int64_t i, int64_t j) {
  return (h * kAttentionDropoutLength + i) * kAttentionDropoutLength + j;
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t next_u64() { return splitmix64(state_++); }
  // Uniform double in [0, 1).
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [lo, hi).
  int64_t randint(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next_u64() % static_cast<uint64_t>(hi - lo)); }
  double normal();

  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

// An independent stream named by (seed, a, b), e.g. the batch (epoch, index) of a
// run: data drawn from it is the same whether the run was resumed or not.
inline Rng substream(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return Rng(splitmix64(splitmix64(splitmix64(seed) ^ a) ^ (b * 0x9E3779B97F4A7C15ull)));
}

}  // namespace tfm
