#include "tensor/storage.h"

#include <malloc.h>

#include <cstdlib>
#include <new>

#include "tensor/error.h"

namespace tfm {

namespace {

// Training allocates and frees the same large activation buffers every step. By
// default glibc serves them with mmap and returns them on free, so each step pays
// page faults on fresh pages (a fifth of a training step went to the kernel zeroing
// them). Never using mmap keeps freed memory in the heap, where it is reused.
// (An mmap threshold of 1 GiB is refused: glibc's maximum is 32 MiB, and logits are larger.)
// Only a hint: other allocators (the sanitizers') refuse it, and that is fine.
[[maybe_unused]] const bool g_heap_tuned = mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;

}  // namespace

Storage::Storage(size_t numel, Device device) : numel_(numel), device_(device) {
  TFM_CHECK(device == Device::CPU, "device " << to_string(device) << " is not supported by this build");
  // Round up so aligned_alloc's size is a multiple of the alignment; never 0 bytes.
  size_t bytes = ((numel * sizeof(float) + 63) / 64) * 64;
  if (bytes == 0) bytes = 64;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!data_) throw std::bad_alloc();
}

Storage::~Storage() { std::free(data_); }

}  // namespace tfm
