#include "tensor/storage.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>


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

void Storage::zero() {
  char* p = static_cast<char*>(memory_.ptr);
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t at = reinterpret_cast<uintptr_t>(p), begin = (at + page - 1) / page * page, end = (at + bytes_) / page * page;
  if (end <= begin || !allocator_for(device_).discard(memory_, bytes_)) return (void)std::memset(p, 0, bytes_);
  std::memset(p, 0, begin - at);  // the partial pages at either end
  std::memset(p + (end - at), 0, at + bytes_ - end);
}

Storage::~Storage() {
  allocator_for(device_).deallocate(memory_);
  g_live -= bytes_;
}

}  // namespace tfm
