#pragma once
// A flat, 64-byte aligned float buffer owned by one or more tensors (views share it).
#include <cstddef>

#include "tensor/device.h"

namespace tfm {

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
