#pragma once
// Where tensors' bytes come from: one allocator per device (`allocator_for`).
//
// The CPU allocator is a cache of tfm's own: freed buffers are kept and handed out again,
// never given back to the system while the process runs (why: allocator.cpp). It serves
// tensor storage only; it neither replaces nor configures the process's malloc, so the
// library can live inside a Python process or a server with an allocator of its own. A
// CUDA allocator will be the same cache over device memory (cuMemAddressReserve/cuMemMap
// reserve and back address ranges as `AddressSpace` does).
#include <cstddef>
#include <mutex>
#include <set>
#include <vector>

#include "tensor/device.h"

namespace tfm {

// Memory handed out: where it is, and the allocator's own record of it (given back to
// deallocate, so that freeing needs no lookup).
struct Allocation {
  void* ptr = nullptr;
  void* handle = nullptr;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // At least `bytes` (a multiple of 64), 64-byte aligned; throws std::bad_alloc.
  virtual Allocation allocate(size_t bytes) = 0;
  virtual void deallocate(const Allocation& allocation) = 0;
  // Gives the memory of the buffers it keeps for reuse back to the system, keeping their
  // addresses (the next use pays a page fault per page); the bytes given back. For the
  // moment a process has just freed what it will not need again (a checkpoint's tensors
  // once the model has its weights), not for every step.
  virtual size_t release_cached() { return 0; }
  // The memory of the whole pages inside `allocation` (in use, of `bytes`) goes back to
  // the system while the allocation keeps its addresses (Storage::release, zero): true
  // where it did, and those pages then read as zeros, taking memory again once written;
  // false where an allocator cannot (the memory stays as it was).
  virtual bool discard(const Allocation& /*allocation*/, size_t /*bytes*/) { return false; }
};

Allocator& allocator_for(Device device);

// How a device's memory is obtained: a range of addresses is reserved first, and backed
// by memory in pieces as it is used.
class AddressSpace {
 public:
  virtual ~AddressSpace() = default;
  virtual void* reserve(size_t bytes) = 0;  // null when refused
  virtual bool commit(void* ptr, size_t bytes) = 0;
  virtual void unreserve(void* ptr, size_t bytes) = 0;
  // The memory behind committed addresses goes back; the addresses stay usable, and
  // read as zeros.
  virtual void discard(void* ptr, size_t bytes) = 0;
};

// The CPU's: mmap'ed addresses, backed with mprotect (the kernel fills pages on first use).
class HostAddressSpace final : public AddressSpace {
 public:
  void* reserve(size_t bytes) override;
  bool commit(void* ptr, size_t bytes) override;
  void unreserve(void* ptr, size_t bytes) override;
  void discard(void* ptr, size_t bytes) override;
};

// Best fit over regions that grow: a request takes the smallest free block that fits
// (split, the rest stays free), a freed block merges with its free neighbours, and when
// nothing fits the newest region grows at its end, its free last block included, so
// buffers whose sizes change from batch to batch keep reusing one stretch of memory.
// Requests up to 1 MiB come from regions of their own, so small buffers never cut the
// large ones' free memory into pieces; blocks up to 64 KiB, freed, wait in a list of
// their exact size for the next request of that size (no search, no merging: a
// decoding step makes hundreds of such tensors, the same sizes step after step).
class CachingAllocator final : public Allocator {
 public:
  // `region_bytes`: the addresses each region reserves (a larger request reserves its size).
  CachingAllocator(AddressSpace& space, size_t region_bytes);
  ~CachingAllocator() override;
  Allocation allocate(size_t bytes) override;
  void deallocate(const Allocation& allocation) override;
  // The free blocks of the large pool, their whole pages (small buffers stay cached).
  size_t release_cached() override;
  bool discard(const Allocation& allocation, size_t bytes) override;

  size_t committed_bytes() const;  // backed by memory: in use or cached
  size_t region_count() const;

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool small;       // which pool
    size_t region;    // index in its pool's regions
    bool free = false;
    Block* prev = nullptr;  // neighbours in the same region, in address order
    Block* next = nullptr;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  struct Region {
    char* base;
    size_t reserved;
    size_t committed = 0;
    Block* last = nullptr;
  };
  struct Pool {
    std::set<Block*, BySize> free;
    std::vector<Region> regions;
  };

  size_t discard_pages(char* ptr, size_t size);  // the whole pages inside; their bytes
  Block* take_free(Pool& pool, size_t size);
  Block* grow(Pool& pool, size_t size, bool small);
  void split(Block* block, size_t size, Pool& pool);
  void merge(Block* block, Block* next, Pool& pool);
  Pool& pool_of(const Block* block) { return block->small ? small_ : large_; }

  AddressSpace& space_;
  size_t region_bytes_;
  mutable std::mutex mutex_;
  Pool small_, large_;
  std::vector<std::vector<Block*>> by_size_;  // freed blocks up to 64 KiB: [size / 64 - 1]
};

}  // namespace tfm
