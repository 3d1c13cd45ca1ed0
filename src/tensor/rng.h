#pragma once
// Seeded random numbers. Sequential draws (initialisation, data) come from a
// splitmix64 stream; parallel draws (dropout masks) use a counter-based hash of
// (key, element index), so results do not depend on the number of threads.
#include <cstdint>

namespace tfm {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform float in [0, 1) for element `index` of the stream named by `key`.
inline float hash_uniform(uint64_t key, uint64_t index) {
  return static_cast<float>(splitmix64(key ^ (index * 0xD1B54A32D192ED03ull)) >> 40) * (1.0f / 16777216.0f);
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
