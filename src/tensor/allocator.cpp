#include "tensor/allocator.h"
#ifdef TFM_HAVE_CUDA
#include "tensor/cuda/runtime.h"
#endif

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include "tensor/error.h"

// Why a cache: training allocates and frees the same large activation buffers every
// step, in sizes that change with each batch. glibc's heap left the resident set 55%
// above the bytes tensors actually held, and whenever it returned memory to the system
// each step paid page faults for fresh pages (a fifth of a step). Until 2026-11-24 tfm
// linked jemalloc as the whole process's malloc, told never to return freed pages; a
// library cannot do that to its host. This cache keeps the same property for tensors
// alone. Its regions grow at their end rather than adding separate segments: with
// separate 2 MiB-rounded segments (PyTorch's CUDA cache), `small` training's resident
// set grew from 679 MiB after 8 steps to 715 MiB after 20, as blocks split for small
// batches could not serve large ones (jemalloc: 675 MiB). Small blocks wait by exact
// size and are freed through their handle (no lookup): a small model's greedy decoding,
// hundreds of small tensors a step, went from 7.74 to 7.42 ms per batch (jemalloc 7.57).

namespace tfm {

namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kSmallRequest = size_t{1} << 20;  // up to this, from the small pool
constexpr size_t kGrain = size_t{2} << 20;         // regions grow by multiples of this
constexpr size_t kExactSize = size_t{64} << 10; // freed blocks up to this wait by size

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void* HostAddressSpace::reserve(size_t bytes) {
  void* ptr = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

bool HostAddressSpace::commit(void* ptr, size_t bytes) { return mprotect(ptr, bytes, PROT_READ | PROT_WRITE) == 0; }

void HostAddressSpace::unreserve(void* ptr, size_t bytes) { munmap(ptr, bytes); }

// (MADV_DONTNEED on private anonymous memory: the pages go now; reading them again gives zeros.)
void HostAddressSpace::discard(void* ptr, size_t bytes) { madvise(ptr, bytes, MADV_DONTNEED); }

CachingAllocator::CachingAllocator(AddressSpace& space, size_t region_bytes)
    : space_(space), region_bytes_(round_up(region_bytes, kGrain)), by_size_(kExactSize / kAlignment) {}

// Only for allocators whose memory is all freed (tests): blocks still in use lose theirs.
CachingAllocator::~CachingAllocator() {
  for (Pool* pool : {&small_, &large_})
    for (Region& region : pool->regions) {
      for (Block* block = region.last; block;) delete std::exchange(block, block->prev);
      space_.unreserve(region.base, region.reserved);
    }
}

Allocation CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_up(bytes == 0 ? 1 : bytes, kAlignment);
  const bool small = size <= kSmallRequest;
  Pool& pool = small ? small_ : large_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (size <= kExactSize) {
    std::vector<Block*>& same = by_size_[size / kAlignment - 1];
    if (!same.empty()) {
      Block* block = same.back();
      same.pop_back();
      return {block->ptr, block};
    }
  }
  Block* block = take_free(pool, size);
  if (!block) block = grow(pool, size, small);
  split(block, size, pool);
  return {block->ptr, block};
}

void CachingAllocator::deallocate(const Allocation& allocation) {
  if (!allocation.handle) return;
  Block* block = static_cast<Block*>(allocation.handle);
  std::lock_guard<std::mutex> lock(mutex_);
  if (block->size <= kExactSize) {  // (a block's size is its request's, rounded: split makes it so)
    by_size_[block->size / kAlignment - 1].push_back(block);
    return;
  }
  Pool& pool = pool_of(block);
  if (Block* prev = block->prev; prev && prev->free) {
    pool.free.erase(prev);
    merge(prev, block, pool);
    block = prev;
  }
  if (Block* next = block->next; next && next->free) {
    pool.free.erase(next);
    merge(block, next, pool);
  }
  block->free = true;
  pool.free.insert(block);
}

size_t CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t released = 0;
  for (const Block* block : large_.free) released += discard_pages(block->ptr, block->size);
  return released;
}

bool CachingAllocator::discard(const Allocation& allocation, size_t bytes) {
  if (allocation.handle) discard_pages(static_cast<char*>(allocation.ptr), bytes);
  return allocation.handle != nullptr;
}

size_t CachingAllocator::discard_pages(char* ptr, size_t size) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = round_up(reinterpret_cast<uintptr_t>(ptr), page), end = (reinterpret_cast<uintptr_t>(ptr) + size) / page * page;
  if (end <= begin) return 0;
  space_.discard(reinterpret_cast<void*>(begin), end - begin);
  return end - begin;
}

size_t CachingAllocator::committed_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const Pool* pool : {&small_, &large_})
    for (const Region& region : pool->regions) total += region.committed;
  return total;
}

size_t CachingAllocator::region_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return small_.regions.size() + large_.regions.size();
}

// The smallest free block of at least `size` bytes, out of the pool, or null.
CachingAllocator::Block* CachingAllocator::take_free(Pool& pool, size_t size) {
  Block key{nullptr, size, false, 0};
  auto it = pool.free.lower_bound(&key);
  if (it == pool.free.end()) return nullptr;
  Block* block = *it;
  pool.free.erase(it);
  block->free = false;
  return block;
}

// Backs more of the newest region (a new one when it is full) and returns a block of at
// least `size` bytes at its end, the region's free last block included.
CachingAllocator::Block* CachingAllocator::grow(Pool& pool, size_t size, bool small) {
  Region* region = pool.regions.empty() ? nullptr : &pool.regions.back();
  Block* last = region && region->last && region->last->free ? region->last : nullptr;
  size_t more = round_up(size - (last ? last->size : 0), kGrain);
  if (!region || region->reserved - region->committed < more) {
    more = round_up(size, kGrain);
    size_t reserve = std::max(region_bytes_, more);
    void* base = space_.reserve(reserve);
    if (!base && reserve > more) base = space_.reserve(reserve = more);  // a limit on address space
    if (!base) throw std::bad_alloc();
    pool.regions.push_back({static_cast<char*>(base), reserve});
    region = &pool.regions.back();
    last = nullptr;
  }
  char* end = region->base + region->committed;
  if (!space_.commit(end, more)) throw std::bad_alloc();
  region->committed += more;
  if (last) {
    pool.free.erase(last);
    last->size += more;
    last->free = false;
    return last;
  }
  Block* block = new Block{end, more, small, pool.regions.size() - 1, false, region->last};
  if (region->last) region->last->next = block;
  region->last = block;
  return block;
}

// Cuts `block` to `size` bytes; the rest becomes a free block right after it.
void CachingAllocator::split(Block* block, size_t size, Pool& pool) {
  if (block->size == size) return;
  Block* rest = new Block{block->ptr + size, block->size - size, block->small, block->region, true, block, block->next};
  if (block->next) block->next->prev = rest;
  else pool.regions[block->region].last = rest;
  block->next = rest;
  block->size = size;
  pool.free.insert(rest);
}

// `block` takes over `next`, the block right after it.
void CachingAllocator::merge(Block* block, Block* next, Pool& pool) {
  block->size += next->size;
  block->next = next->next;
  if (next->next) next->next->prev = block;
  else pool.regions[block->region].last = block;
  delete next;
}

#ifdef TFM_SANITIZED
// The sanitizers check a buffer only when it comes from malloc itself (a use after free
// inside a cached region goes unseen), so sanitized builds allocate each one directly;
// tests exercise CachingAllocator on instances of their own.
class SystemAllocator final : public Allocator {
 public:
  Allocation allocate(size_t bytes) override {
    void* ptr = std::aligned_alloc(kAlignment, round_up(bytes == 0 ? 1 : bytes, kAlignment));
    if (!ptr) throw std::bad_alloc();
    return {ptr, ptr};
  }
  void deallocate(const Allocation& allocation) override { std::free(allocation.ptr); }
};
#endif

Allocator& allocator_for(Device device) {
#ifdef TFM_HAVE_CUDA
  if (device == Device::CUDA) return cuda::allocator();
#endif
  TFM_CHECK(device == Device::CPU || device == Device::Sim, "this build of tfm has no " << to_string(device)
                                       << " support (configure with -DTFM_CUDA=ON where the CUDA toolkit is)");
  // Never destroyed: tensors held by other statics may be freed after main returns.
#ifdef TFM_SANITIZED
  static Allocator* cpu = new SystemAllocator;
#else
  // 64 GiB of addresses per region (a reservation costs no memory; a machine's memory
  // fills before a second region is needed).
  static Allocator* cpu = new CachingAllocator(*new HostAddressSpace, size_t{64} << 30);
#endif
  return *cpu;
}

}  // namespace tfm
