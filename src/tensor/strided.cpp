#include "tensor/strided.h"

#include <atomic>
#include <cstring>

#include "tensor/device_memory.h"
#include "tensor/error.h"
#include "threads/parallel.h"
#ifdef TFM_HAVE_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace tfm {

Shape broadcast_strides(const Shape& in_shape, const Shape& in_strides, const Shape& out_shape) {
  const size_t nd = out_shape.size(), ni = in_shape.size();
  TFM_CHECK(ni <= nd, "cannot broadcast " << shape_str(in_shape) << " to " << shape_str(out_shape));
  Shape st(nd, 0);
  for (size_t i = 0; i < ni; ++i) {
    size_t o = nd - ni + i;
    if (in_shape[i] == out_shape[o]) {
      st[o] = in_strides[i];
    } else {
      TFM_CHECK(in_shape[i] == 1, "cannot broadcast " << shape_str(in_shape) << " to " << shape_str(out_shape));
    }
  }
  return st;
}

namespace {

// Element counts above which a strided copy or add splits its rows over the threads
// (as parallel_chunks does for contiguous buffers).
constexpr int64_t kParallelElements = 1 << 16;

// The distance between consecutive rows (last dimension) of t when its rows are evenly
// spaced, as in a slice of a matrix's columns; -1 when they are not.
int64_t row_spacing(const Tensor& t) {
  int64_t spacing = 0, rows = 1;
  for (int64_t k = t.dim() - 2; k >= 0; --k) {
    if (t.shape()[k] == 1) continue;
    if (rows == 1) spacing = t.strides()[k];
    else if (t.strides()[k] != spacing * rows) return -1;
    rows *= t.shape()[k];
  }
  return spacing;
}

// Calls f(dst_row, src_row, n) over two tensors of one shape, any strides, whose
// elements are T's: whole rows where both have a contiguous last dimension (split over
// the threads when the rows are evenly spaced and many), else element by element.
template <class T, class F>
void for_each_row(const Tensor& src, Tensor& dst, F&& f) {
  const T* s = static_cast<const T*>(src.raw_data());
  T* d = static_cast<T*>(dst.raw_data());
  if (src.dim() > 0 && src.strides().back() == 1 && dst.strides().back() == 1) {
    const Shape& shape = src.shape();
    const int64_t width = shape.back(), src_spacing = row_spacing(src), dst_spacing = row_spacing(dst);
    if (src_spacing >= 0 && dst_spacing >= 0 && width > 0) {
      parallel_for(src.numel() / width, src.numel() > kParallelElements,
                   [&](int64_t r) { f(d + r * dst_spacing, s + r * src_spacing, width); });
      return;
    }
    const Shape outer(shape.begin(), shape.end() - 1), src_outer(src.strides().begin(), src.strides().end() - 1),
        dst_outer(dst.strides().begin(), dst.strides().end() - 1);
    for_each_index<2>(outer, {src_outer, dst_outer}, [&](const std::array<int64_t, 2>& o) { f(d + o[1], s + o[0], width); });
    return;
  }
  for_each_index<2>(src.shape(), {src.strides(), dst.strides()}, [&](const std::array<int64_t, 2>& o) { f(d + o[1], s + o[0], 1); });
}

void host_strided_add(const Tensor& src, Tensor& dst) {
  if (src.is_contiguous() && dst.is_contiguous()) {
    float* d = dst.data();
    const float* s = src.data();
    parallel_chunks(src.numel(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) d[i] += s[i];
    });
    return;
  }
  for_each_row<float>(src, dst, [](float* d, const float* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
}

}  // namespace

Tensor strided_sum(const Tensor& a, const Tensor& b) {
  TFM_CHECK(a.shape() == b.shape(), "strided_sum: shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  if (!a.is_contiguous() || !b.is_contiguous() || a.device() != Device::CPU) {
    Tensor out = a.clone();
    strided_add(b, out);
    return out;
  }
  Tensor out = Tensor::empty(a.shape());
  const float *pa = a.data(), *pb = b.data();
  float* o = out.data();
  parallel_chunks(a.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = pa[i] + pb[i];
  });
  return out;
}

namespace {

// strided_copy for elements of T's size (any dtype of that size: bits are copied).
template <class T>
void copy_elements(const Tensor& src, Tensor& dst) {
  if (src.is_contiguous() && dst.is_contiguous()) {
    T* d = static_cast<T*>(dst.raw_data());
    const T* s = static_cast<const T*>(src.raw_data());
    parallel_chunks(src.numel(), [&](int64_t begin, int64_t end) { std::memcpy(d + begin, s + begin, sizeof(T) * (end - begin)); });
    return;
  }
  for_each_row<T>(src, dst, [](T* d, const T* s, int64_t n) { std::memcpy(d, s, sizeof(T) * n); });
}

// The CPU's DeviceMemory: host memory, walked by the loops above.
class HostMemory final : public DeviceMemory {
 public:
  // (An empty tensor's pointers may be null, which memcpy may not be given even for 0 bytes.)
  void from_host(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void strided_copy(const Tensor& src, Tensor& dst) override {
    switch (size_of(src.dtype())) {
      case 1: return copy_elements<uint8_t>(src, dst);
      case 2: return copy_elements<uint16_t>(src, dst);
      case 4: return copy_elements<uint32_t>(src, dst);
      default: return copy_elements<uint64_t>(src, dst);
    }
  }
  void strided_add(const Tensor& src, Tensor& dst) override { host_strided_add(src, dst); }
  void fill(Tensor& t, float value) override { t.fill(value); }
};

// The device both tensors are on; a clear error naming `op` otherwise.
Device common_device(const char* op, const Tensor& src, const Tensor& dst) {
  TFM_CHECK(src.device() == dst.device(), op << ": tensors on " << to_string(src.device()) << " and " << to_string(dst.device()));
  return src.device();
}

}  // namespace

namespace {
std::atomic<size_t> copies_to_host{0};  // (the simulated device's)
}  // namespace

// The simulated device's: the same, its memory reachable while each call runs, and its
// copies to the host counted.
class SimulatedMemory final : public DeviceMemory {
 public:
  // (An empty tensor's pointers may be null, which memcpy may not be given even for 0 bytes.)
  void from_host(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    ++copies_to_host;
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void strided_copy(const Tensor& src, Tensor& dst) override {
    const SimulatedKernel allow;
    host_.strided_copy(src, dst);
  }
  void strided_add(const Tensor& src, Tensor& dst) override {
    const SimulatedKernel allow;
    host_.strided_add(src, dst);
  }
  void fill(Tensor& t, float value) override {
    const SimulatedKernel allow;
    t.fill(value);
  }

 private:
  HostMemory host_;
};

size_t simulated_copies_to_host() { return copies_to_host.load(); }

DeviceMemory& device_memory(Device device) {
  static HostMemory host;
  static SimulatedMemory simulated;
  switch (device) {
    case Device::CPU: return host;
    case Device::Sim: return simulated;
    case Device::CUDA:
#ifdef TFM_HAVE_CUDA
      return cuda::memory();
#else
      break;
#endif
  }
  throw Error("this build of tfm has no " + to_string(device) + " support (configure with -DTFM_CUDA=ON where the CUDA toolkit is)");
}

void strided_copy(const Tensor& src, Tensor& dst) {
  TFM_CHECK(src.dtype() == dst.dtype(), "strided_copy: dtype " << to_string(src.dtype()) << " into " << to_string(dst.dtype()));
  device_memory(common_device("strided_copy", src, dst)).strided_copy(src, dst);
}

void strided_add(const Tensor& src, Tensor& dst) {
  TFM_CHECK(src.dtype() == DType::f32 && dst.dtype() == DType::f32, "strided_add: f32 tensors only");
  device_memory(common_device("strided_add", src, dst)).strided_add(src, dst);
}

}  // namespace tfm
