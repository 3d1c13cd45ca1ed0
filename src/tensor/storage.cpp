#include "tensor/storage.h"

#include <atomic>


namespace tfm {

namespace {

std::atomic<size_t> g_live{0}, g_peak{0};

}  // namespace

size_t Storage::peak_bytes() { return g_peak.load(); }

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  memory_ = allocator_for(device).allocate(bytes);
  const size_t live = g_live += bytes;
  for (size_t peak = g_peak.load(); live > peak && !g_peak.compare_exchange_weak(peak, live);) {
  }
}

void Storage::release() {
  allocator_for(device_).discard(memory_, bytes_);
  released_ = true;
}

Storage::~Storage() {
  allocator_for(device_).deallocate(memory_);
  g_live -= bytes_;
}

}  // namespace tfm
