#include "tensor/storage.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "tensor/error.h"

#ifdef TFM_JEMALLOC
// Training allocates and frees the same large activation buffers every step, in
// sizes that change with each batch. glibc's heap left the resident set 55% above
// the bytes tensors actually held (fragmentation), and whenever it returned memory
// to the system each step paid page faults for fresh pages (a fifth of a step).
// jemalloc packs the buffers tighter; told never to give freed pages back (no
// decay), it reuses them instead: `small` training 3,980 -> 4,410 tokens/s and
// 908 -> 691 MiB, `base` 3,459 -> 2,948 MiB. Large buffers all come from one arena
// (oversize_threshold 0) rather than from each thread's own, so that what one thread
// frees another reuses: `base` 2,948 -> 2,556 MiB, the language-model recipe 196 ->
// 163 MiB, at the same speed. (MALLOC_CONF can still override this.)
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,oversize_threshold:0";
}
#include <jemalloc/jemalloc.h>
#endif

namespace tfm {

namespace {

std::atomic<size_t> g_live{0}, g_peak{0};

size_t bytes_of(size_t numel) { return numel * sizeof(float); }

}  // namespace

void share_main_thread_arena() {
#ifdef TFM_JEMALLOC
  unsigned main_arena = 0;  // the first thread's
  mallctl("thread.arena", nullptr, nullptr, &main_arena, sizeof main_arena);
#endif
}

size_t Storage::peak_bytes() { return g_peak.load(); }

Storage::Storage(size_t numel, Device device) : numel_(numel), device_(device) {
  TFM_CHECK(device == Device::CPU, "device " << to_string(device) << " is not supported by this build");
  // Round up so aligned_alloc's size is a multiple of the alignment; never 0 bytes.
  size_t bytes = ((numel * sizeof(float) + 63) / 64) * 64;
  if (bytes == 0) bytes = 64;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!data_) throw std::bad_alloc();
  const size_t live = g_live += bytes_of(numel);
  for (size_t peak = g_peak.load(); live > peak && !g_peak.compare_exchange_weak(peak, live);) {
  }
}

Storage::~Storage() {
  std::free(data_);
  g_live -= bytes_of(numel_);
}

}  // namespace tfm
