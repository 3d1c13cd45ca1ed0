#pragma once
// A flat, 64-byte aligned buffer of bytes on one device, owned by one or more tensors
// (views share it); the tensors say what type its elements are.
#include <cstddef>

#include "tensor/allocator.h"
#include "tensor/device.h"

namespace tfm {

class Storage {
 public:
  // The most bytes all tensors' storage ever held at once in this process (benchmarks
  // report it beside the resident set, which also counts the allocator's free but
  // unreturned memory).
  static size_t peak_bytes();

  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return memory_.ptr; }
  const void* data() const { return memory_.ptr; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Allocation memory_;
  size_t bytes_ = 0;
  Device device_;
};

}  // namespace tfm
