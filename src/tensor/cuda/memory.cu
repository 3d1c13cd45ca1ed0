// CUDA's allocator and DeviceMemory (tensor/device_memory.h): copies, strided copy and
// add, fill. The strided kernels walk up to kMaxDims dimensions, one thread an element.
#include <algorithm>
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
#include "tensor/device_memory.h"
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
    static Profile* const profile = std::getenv("TFM_CUDA_PROFILE") ? new Profile : nullptr;
    return profile;
  }
  void restart() {
    const std::lock_guard<std::mutex> lock(mutex_);
    fold();
    entries_.clear();
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
  }
  std::mutex mutex_;
  std::map<std::thread::id, cudaEvent_t> last_;  // each thread's stream's latest event
  std::vector<Launch> pending_;
  std::vector<cudaEvent_t> spare_;
  std::map<std::string, Entry> entries_;
};

}  // namespace

bool profiling() { return Profile::get() != nullptr; }

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

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;

// A tensor's layout as a kernel takes it: shape and element strides, right-aligned.
struct Layout {
  int dims;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
};

Layout layout_of(const Tensor& t) {
  TFM_CHECK(t.dim() <= kMaxDims, "cuda: tensors of more than " << kMaxDims << " dimensions are not supported, got " << shape_str(t.shape()));
  Layout l{static_cast<int>(t.dim()), {}, {}};
  for (int d = 0; d < l.dims; ++d) l.shape[d] = t.shape()[d], l.strides[d] = t.strides()[d];
  return l;
}

// The offset of flat (row-major) index i in a tensor of layout l.
__device__ int64_t offset_of(const Layout& l, int64_t i) {
  int64_t offset = 0;
  for (int d = l.dims - 1; d >= 0; --d) {
    offset += (i % l.shape[d]) * l.strides[d];
    i /= l.shape[d];
  }
  return offset;
}

template <class T>
__global__ void copy_kernel(const T* src, Layout sl, T* dst, Layout dl, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[offset_of(dl, i)] = src[offset_of(sl, i)];
}

__global__ void add_kernel(const float* src, Layout sl, float* dst, Layout dl, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[offset_of(dl, i)] += src[offset_of(sl, i)];
}

__global__ void fill_kernel(float* dst, float value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) dst[i] = value;
}

unsigned blocks(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)); }

template <class T>
void copy_as(const Tensor& src, Tensor& dst) {
  copy_kernel<T><<<blocks(src.numel()), kThreads, 0, stream()>>>(static_cast<const T*>(src.device_ptr()), layout_of(src),
                                                                 static_cast<T*>(dst.device_ptr()), layout_of(dst), src.numel());
  check_launch("strided_copy");
}

class CudaMemory final : public DeviceMemory {
 public:
  void from_host(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()), "copy to the GPU");
    check(cudaStreamSynchronize(stream()), "copy to the GPU");
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
      return;
    }
    switch (size_of(src.dtype())) {
      case 1: return copy_as<uint8_t>(src, dst);
      case 2: return copy_as<uint16_t>(src, dst);
      case 4: return copy_as<uint32_t>(src, dst);
      default: return copy_as<uint64_t>(src, dst);
    }
  }
  void strided_add(const Tensor& src, Tensor& dst) override {
    if (src.numel() == 0) return;
    add_kernel<<<blocks(src.numel()), kThreads, 0, stream()>>>(static_cast<const float*>(src.device_ptr()), layout_of(src),
                                                               static_cast<float*>(dst.device_ptr()), layout_of(dst), src.numel());
    check_launch("strided_add");
  }
  void fill(Tensor& t, float value) override {
    if (t.numel() == 0) return;
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
