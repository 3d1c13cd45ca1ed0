// CUDA's allocator and DeviceMemory (tensor/device_memory.h): copies, strided copy and
// add, fill. The strided kernels walk their operands' merged dims (walk.cuh), one
// thread an element; contiguous copies, adds and zero fills take the fast paths.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <thread>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/cuda/runtime.h"
#include "tensor/cuda/walk.cuh"
#include "tensor/device_memory.h"
#include "tensor/environment.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace tfm::cuda {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorString(status));
}

namespace {

// TFM_CUDA_PROFILE=1: each launch is followed by an event on its stream (nothing
// waits for it), and the GPU's time from one launch's event to the next is added to the
// latter's name: the kernel's own time while the GPU had work queued, plus the GPU's
// wait for the host where it had none. A launch that finds the previous kernel already
// finished (nothing queued ahead of it) counts as idle: many such launches mean the
// step is bound by the host, not by its kernels. Printed to standard error at exit,
// largest first.
class Profile {
 public:
  static Profile* get() {
    static Profile* const profile = env_switch("TFM_CUDA_PROFILE", false) ? new Profile : nullptr;
    return profile;
  }
  void restart() {
    const std::lock_guard<std::mutex> lock(mutex_);
    fold();
    entries_.clear();
    host_.clear();
  }
  void host(const char* name, double ms) {
    const std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = host_[name];
    e.ms += ms, ++e.calls;
  }
  void mark(const char* name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    cudaEvent_t& last = last_[std::this_thread::get_id()];
    const bool idle = last && cudaEventQuery(last) == cudaSuccess;
    cudaEvent_t event = fresh_event();
    if (cudaEventRecord(event, stream()) != cudaSuccess) return;
    if (last) pending_.push_back({name, last, event, idle});
    last = event;
    if (pending_.size() >= 8192) fold();  // (bounds the events held: a wait every 8,192 launches)
  }

 private:
  struct Launch {
    std::string name;  // (a copy: a product's name is made for its launch)
    cudaEvent_t before, after;
    bool idle;
  };
  struct Entry {
    double ms = 0;
    int64_t calls = 0, idle = 0;
  };
  Profile() { std::atexit([] { get()->print(); }); }
  cudaEvent_t fresh_event() {
    if (!spare_.empty()) {
      cudaEvent_t e = spare_.back();
      spare_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    (void)cudaEventCreate(&e);
    return e;
  }
  // The pending launches' times into their entries; their events, but each stream's
  // last, back to the spares.
  void fold() {
    for (const Launch& l : pending_) {
      float ms = 0;
      if (cudaEventSynchronize(l.after) != cudaSuccess || cudaEventElapsedTime(&ms, l.before, l.after) != cudaSuccess) continue;
      Entry& e = entries_[l.name];
      e.ms += ms, ++e.calls, e.idle += l.idle;
    }
    for (const Launch& l : pending_) spare_.push_back(l.before);
    pending_.clear();
  }
  void print() {
    const std::lock_guard<std::mutex> lock(mutex_);
    fold();
    std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    Entry all;
    for (const auto& [name, e] : rows) all.ms += e.ms, all.calls += e.calls, all.idle += e.idle;
    std::fprintf(stderr, "TFM_CUDA_PROFILE: %.1f ms of GPU time between %lld launches; %lld of them (%.0f%%) found the GPU idle\n", all.ms,
                 static_cast<long long>(all.calls), static_cast<long long>(all.idle), 100.0 * all.idle / std::max<int64_t>(all.calls, 1));
    std::fprintf(stderr, "%-48s %8s %10s %6s %8s\n", "kernel", "calls", "ms", "%", "idle");
    for (const auto& [name, e] : rows)
      std::fprintf(stderr, "%-48s %8lld %10.2f %6.1f %8lld\n", name.c_str(), static_cast<long long>(e.calls), e.ms,
                   100 * e.ms / std::max(all.ms, 1e-9), static_cast<long long>(e.idle));
    if (host_.empty()) return;
    std::fprintf(stderr, "TFM_CUDA_PROFILE: host work between launches (the GPU idles through it when nothing is queued)\n%-48s %8s %10s\n",
                 "host", "calls", "ms");
    for (const auto& [name, e] : host_) std::fprintf(stderr, "%-48s %8lld %10.2f\n", name.c_str(), static_cast<long long>(e.calls), e.ms);
  }
  std::mutex mutex_;
  std::map<std::thread::id, cudaEvent_t> last_;  // each thread's stream's latest event
  std::vector<Launch> pending_;
  std::vector<cudaEvent_t> spare_;
  std::map<std::string, Entry> entries_, host_;
};

}  // namespace

bool profiling() { return Profile::get() != nullptr; }

void profile_host(const char* what, double ms) {
  if (Profile* p = Profile::get()) p->host(what, ms);
}

void restart_profile() {
  if (Profile* p = Profile::get()) p->restart();
}

void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
  if (Profile* p = Profile::get()) p->mark(kernel);
}

bool available(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return true;
  (void)cudaGetLastError();
  if (!why) return false;
  if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice)
    *why = std::string("no usable GPU: no NVIDIA driver, or one older than CUDA ") + std::to_string(CUDART_VERSION / 1000) +
           " (the CUDA runtime says: " + cudaGetErrorString(status) + ")";
  else
    *why = status != cudaSuccess ? std::string("no usable GPU (") + cudaGetErrorString(status) + ")" : "no GPU is visible";
  return false;
}

std::string describe_device() {
  int device = 0, driver = 0, runtime = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  std::ostringstream os;
  os << p.name << " (sm_" << p.major << p.minor << ", " << p.multiProcessorCount << " SMs, " << (p.totalGlobalMem >> 20)
     << " MiB), driver " << driver / 1000 << "." << driver % 1000 / 10 << ", runtime " << runtime / 1000 << "."
     << runtime % 1000 / 10;
  return os.str();
}

namespace {

class PoolAllocator final : public Allocator {
 public:
  PoolAllocator() {
    std::string why;
    if (!available(&why)) throw Error("cuda: " + why);
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    uint64_t keep_all = UINT64_MAX;  // freed memory stays in the pool for the next step
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all), "cudaMemPoolSetAttribute");
  }
  Allocation allocate(size_t bytes) override {
    void* ptr = nullptr;
    if (cudaMallocAsync(&ptr, bytes == 0 ? 1 : bytes, stream()) != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::bad_alloc();
    }
    return {ptr, ptr};
  }
  void deallocate(const Allocation& allocation) override { (void)cudaFreeAsync(allocation.ptr, stream()); }
};

constexpr int kThreads = 256;

// src's and dst's strides (a and b) over their common shape, merged (walk.cuh).
Walk walk_of(const Tensor& src, const Tensor& dst) {
  Walk w;
  for (int64_t d = 0; d < src.dim(); ++d) append(w, src.shape()[d], src.strides()[d], dst.strides()[d]);
  return w;
}

template <class T, class Index>
__global__ void copy_kernel(const T* src, T* dst, Walk w, Index n) {
  TFM_GRID_STRIDE_AS(Index, i, n) {
    Index os, od;
    walk_offsets(w, i, os, od);
    dst[od] = src[os];
  }
}

template <class Index>
__global__ void add_kernel(const float* src, float* dst, Walk w, Index n) {
  TFM_GRID_STRIDE_AS(Index, i, n) {
    Index os, od;
    walk_offsets(w, i, os, od);
    dst[od] += src[os];
  }
}

// dst[i] += src[i], both contiguous and on 16 bytes: four at a time (16-byte loads and
// stores), the tail one at a time.
__global__ void add_contiguous_kernel(const float* src, float* dst, int64_t n) {
  const int64_t quads = n / 4;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < quads; q += int64_t{gridDim.x} * blockDim.x) {
    const float4 s = reinterpret_cast<const float4*>(src)[q];
    float4 d = reinterpret_cast<float4*>(dst)[q];
    d.x += s.x, d.y += s.y, d.z += s.z, d.w += s.w;
    reinterpret_cast<float4*>(dst)[q] = d;
  }
  const int64_t r = 4 * quads + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r < n) dst[r] += src[r];
}

__global__ void fill_kernel(float* dst, float value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) dst[i] = value;
}

unsigned blocks(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)); }

template <class T>
void copy_as(const Tensor& src, Tensor& dst) {
  const Walk w = walk_of(src, dst);
  const int64_t n = src.numel();
  const T* s = static_cast<const T*>(src.device_ptr());
  T* d = static_cast<T*>(dst.device_ptr());
  if (fits_in_32_bits(w, n)) copy_kernel<T, int32_t><<<blocks(n), kThreads, 0, stream()>>>(s, d, w, static_cast<int32_t>(n));
  else copy_kernel<T, int64_t><<<blocks(n), kThreads, 0, stream()>>>(s, d, w, n);
  check_launch("strided_copy");
}

bool on_16_bytes(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

class CudaMemory final : public DeviceMemory {
 public:
  // No wait for the queued work: from pageable host memory (tfm allocates no pinned
  // memory) cudaMemcpyAsync stages the bytes before it returns, so `src` may go at once,
  // and the copy lands in stream order (CUDA's "API synchronization behavior"). The
  // wait this had made each upload inside a step (a batch's masks, a packing) idle the GPU.
  void from_host(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()), "copy to the GPU");
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()), "copy from the GPU");
    check(cudaStreamSynchronize(stream()), "copy from the GPU");
  }
  void strided_copy(const Tensor& src, Tensor& dst) override {
    if (src.numel() == 0) return;
    if (src.is_contiguous() && dst.is_contiguous()) {
      check(cudaMemcpyAsync(dst.device_ptr(), src.device_ptr(), src.numel() * size_of(src.dtype()), cudaMemcpyDeviceToDevice, stream()),
            "strided_copy");
      return check_launch("strided_copy (memcpy)");
    }
    switch (size_of(src.dtype())) {
      case 1: return copy_as<uint8_t>(src, dst);
      case 2: return copy_as<uint16_t>(src, dst);
      case 4: return copy_as<uint32_t>(src, dst);
      default: return copy_as<uint64_t>(src, dst);
    }
  }
  void strided_add(const Tensor& src, Tensor& dst) override {
    const int64_t n = src.numel();
    if (n == 0) return;
    const float* s = static_cast<const float*>(src.device_ptr());
    float* d = static_cast<float*>(dst.device_ptr());
    const Walk w = walk_of(src, dst);
    if (w.dims == 1 && w.a[0] == 1 && w.b[0] == 1 && on_16_bytes(s) && on_16_bytes(d))
      add_contiguous_kernel<<<blocks((n + 3) / 4), kThreads, 0, stream()>>>(s, d, n);
    else if (fits_in_32_bits(w, n))
      add_kernel<int32_t><<<blocks(n), kThreads, 0, stream()>>>(s, d, w, static_cast<int32_t>(n));
    else
      add_kernel<int64_t><<<blocks(n), kThreads, 0, stream()>>>(s, d, w, n);
    check_launch("strided_add");
  }
  void fill(Tensor& t, float value) override {
    if (t.numel() == 0) return;
    if (value == 0.0f && !std::signbit(value)) {  // (all bits zero: the copy engine's memset)
      check(cudaMemsetAsync(t.device_ptr(), 0, static_cast<size_t>(t.numel()) * sizeof(float), stream()), "fill");
      return check_launch("fill (memset)");  // (named in TFM_CUDA_PROFILE's table)
    }
    fill_kernel<<<blocks(t.numel()), kThreads, 0, stream()>>>(static_cast<float*>(t.device_ptr()), value, t.numel());
    check_launch("fill");
  }
};

}  // namespace

Allocator& allocator() {
  static Allocator* pool = new PoolAllocator;  // never destroyed: tensors may outlive main's statics
  return *pool;
}

DeviceMemory& memory() {
  static CudaMemory memory;
  return memory;
}

}  // namespace tfm::cuda
