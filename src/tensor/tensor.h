#pragma once
// Tensor: an n-d array of one dtype on one device, with shape and strides over shared
// Storage. Models compute in f32 (the default); indices, masks and images have dtypes
// of their own. Views (reshape of a contiguous tensor, transpose, permute, slice) share
// storage.
// A Tensor is a cheap handle; copies of the handle alias the same data.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/storage.h"

namespace tfm {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

namespace autograd {
struct Node;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  DType dtype = DType::f32;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  // Autograd: leaves that require grad accumulate into `grad`; results of
  // differentiable ops point at the node that made them.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  // Where a leaf's gradient is written when it has none yet: a view of its model's flat
  // gradient buffer (nn::Module::flatten_parameters), or null for a fresh buffer.
  std::shared_ptr<TensorImpl> grad_slot;
  std::shared_ptr<autograd::Node> grad_fn;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories (always contiguous; f32 on the CPU unless told).
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::CPU);
  static Tensor zeros(const Shape& shape, Device device = Device::CPU);
  // Zeros on the CPU whose whole pages take no memory until written (Storage::zero): a
  // model's weights, which a checkpoint then replaces. Made with `zeros`, the 2 GB of a
  // Qwen2-0.5B-shaped model's weights were held beside the checkpoint's while it loaded.
  static Tensor untouched_zeros(const Shape& shape);
  static Tensor full(const Shape& shape, float value, Device device = Device::CPU);  // f32
  static Tensor ones(const Shape& shape, Device device = Device::CPU) { return full(shape, 1.0f, device); }
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values);
  // A tensor of T's dtype (int32_t, int64_t, uint8_t, bool, ...) holding `values`.
  template <class T>
  static Tensor from_values(const Shape& shape, const std::vector<T>& values);
  template <class T>
  static Tensor from_values(const std::vector<T>& values) {  // [values.size()]
    return from_values({static_cast<int64_t>(values.size())}, values);
  }

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(impl_->shape); }
  Device device() const { return impl_->storage->device(); }
  DType dtype() const { return impl_->dtype; }
  bool is_contiguous() const;

  // The elements in host memory, as the dtype's C++ type; asking for another type, or
  // for a tensor on another device (whose memory the host cannot read), is an error.
  float* data() { return data_as<float>(); }
  const float* data() const { return data_as<float>(); }
  template <class T>
  T* data_as() const {
    if (dtype_of<T>() != dtype()) dtype_mismatch(dtype_of<T>());
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const {
    if (!host_accessible(device())) not_on_host();
    return device_ptr();
  }
  // Where the elements are on their own device: for that device's kernels only.
  void* device_ptr() const {
    if (impl_->storage->released()) released_read();
    return const_cast<void*>(address());
  }
  // The same as an identity only, never read through (frozen weights' copies are keyed
  // by it): what a released weight still has.
  const void* address() const { return static_cast<const char*>(impl_->storage->data()) + impl_->offset * size_of(dtype()); }
  template <class T>
  T* device_data() const {
    if (dtype_of<T>() != dtype()) dtype_mismatch(dtype_of<T>());
    return static_cast<T*>(device_ptr());
  }
  // Copies to the host, from any device (a transfer, and a wait for the device's queued
  // work): the elements in logical order, for any strides.
  std::vector<float> to_vector() const;
  template <class T>
  std::vector<T> values() const;  // the same for T's dtype
  float item() const;

  // A fresh contiguous copy, detached from the graph.
  Tensor clone() const;
  // Same data, no autograd history.
  Tensor detach() const;
  // Element-wise copy into this tensor (same shape and dtype; from any device).
  void copy_from(const Tensor& src);
  void fill(float value);  // f32, contiguous

  // Autograd.
  bool requires_grad() const { return impl_->requires_grad || impl_->grad_fn != nullptr; }
  Tensor& set_requires_grad(bool on);
  Tensor grad() const { return impl_->grad ? Tensor(impl_->grad) : Tensor(); }
  void zero_grad() { impl_->grad.reset(); }

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  [[noreturn]] void dtype_mismatch(DType wanted) const;
  [[noreturn]] void not_on_host() const;
  [[noreturn]] void released_read() const;
  void copy_to_host(void* dst) const;  // a contiguous tensor's bytes
  void check_count(size_t values) const;
  std::shared_ptr<TensorImpl> impl_;
};

// Wraps existing storage in a new view (no autograd history).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

template <class T>
Tensor Tensor::from_values(const Shape& shape, const std::vector<T>& values) {  // on the CPU
  Tensor t = empty(shape, dtype_of<T>());
  t.check_count(values.size());
  std::copy(values.begin(), values.end(), t.data_as<T>());
  return t;
}

template <class T>
std::vector<T> Tensor::values() const {
  if (dtype_of<T>() != dtype()) dtype_mismatch(dtype_of<T>());
  const Tensor c = is_contiguous() ? *this : clone();
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs its bits
    std::vector<uint8_t> bytes(static_cast<size_t>(c.numel()));
    c.copy_to_host(bytes.data());
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> out(static_cast<size_t>(c.numel()));
    c.copy_to_host(out.data());
    return out;
  }
}

}  // namespace tfm
