#pragma once
// A flat, 64-byte aligned float buffer owned by one or more tensors (views share it).
#include <cstddef>

#include "tensor/device.h"

namespace tfm {

// Makes the calling thread allocate from the main thread's allocator arena, for
// threads that take turns at the same kind of work (translation workers): each then
// reuses the buffers the other freed instead of faulting in pages of its own arena.
// With a batch per thread, greedy Multi30k translation at batch 32: 12,100 -> 14,000
// tokens/s and 256 -> 162 MiB; beam 4: 4,740 -> 5,030 tokens/s, 379 -> 276 MiB. (All
// threads on one arena slows training by ~8%: its OpenMP threads' scratch buffers
// then contend.) A no-op without jemalloc, and where the arena cannot be changed.
void share_main_thread_arena();

class Storage {
 public:
  // The most bytes all tensors' storage ever held at once in this process (benchmarks
  // report it beside the resident set, which also counts the allocator's free but
  // unreturned memory).
  static size_t peak_bytes();

  Storage(size_t numel, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t numel() const { return numel_; }
  Device device() const { return device_; }

 private:
  float* data_ = nullptr;
  size_t numel_ = 0;
  Device device_;
};

}  // namespace tfm
