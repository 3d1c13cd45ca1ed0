#include "tensor/storage.h"

#include <atomic>

#include "tensor/allocator.h"

namespace tfm {

namespace {

std::atomic<size_t> g_live{0}, g_peak{0};

size_t bytes_of(size_t numel) { return numel * sizeof(float); }

}  // namespace

size_t Storage::peak_bytes() { return g_peak.load(); }

Storage::Storage(size_t numel, Device device) : numel_(numel), device_(device) {
  data_ = static_cast<float*>(allocator_for(device).allocate(bytes_of(numel)));
  const size_t live = g_live += bytes_of(numel);
  for (size_t peak = g_peak.load(); live > peak && !g_peak.compare_exchange_weak(peak, live);) {
  }
}

Storage::~Storage() {
  allocator_for(device_).deallocate(data_);
  g_live -= bytes_of(numel_);
}

}  // namespace tfm
