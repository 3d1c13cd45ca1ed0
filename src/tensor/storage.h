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

  // Gives the memory back to the system for good, the addresses staying this storage's
  // (no other gets them: frozen weights' copies are keyed by address): a weight whose
  // frozen copy stands in for it (nn::Module::release_product_weights). Its tensors
  // can no longer be read or written (Tensor::device_ptr refuses), only told apart.
  void release();
  bool released() const { return released_; }
  // Host memory only: fills it with zeros, its whole pages by giving them back to the
  // system where the allocator can (they read as zeros and take memory once written).
  void zero();

 private:
  Allocation memory_;
  size_t bytes_ = 0;
  Device device_;
  bool released_ = false;
};

}  // namespace tfm
