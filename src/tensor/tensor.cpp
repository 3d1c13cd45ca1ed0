#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "tensor/device_memory.h"
#include "tensor/error.h"
#include "tensor/strided.h"
#include "threads/parallel.h"

namespace tfm {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

namespace {

// a * b, refusing a product past int64: sizes come from files and configurations, and
// an overflowed element count or stride would be undefined behaviour, then a wild access.
int64_t checked_product(int64_t a, int64_t b, const Shape& s) {
  int64_t out = 0;
  TFM_CHECK(!__builtin_mul_overflow(a, b, &out), "shape " << shape_str(s) << " has more elements than a tensor can index");
  return out;
}

}  // namespace

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n = checked_product(n, d, s);
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc = checked_product(acc, s[i], s);
  }
  return st;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) TFM_CHECK(d >= 0, "negative dimension in shape " << shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  const int64_t bytes = checked_product(shape_numel(shape), static_cast<int64_t>(size_of(dtype)), shape);
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(bytes), device);
  impl->dtype = dtype;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, Device device) { return full(shape, 0.0f, device); }

Tensor Tensor::untouched_zeros(const Shape& shape) {
  Tensor t = empty(shape);
  t.impl()->storage->zero();
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = empty(shape, DType::f32, device);
  t.fill(value);
  return t;
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values) { return from_values(shape, values); }

void Tensor::check_count(size_t values) const {
  TFM_CHECK(static_cast<int64_t>(values) == numel(), values << " values do not fill shape " << shape_str(shape()));
}

void Tensor::not_on_host() const {
  throw Error("a tensor on " + to_string(device()) + " (shape " + shape_str(shape()) +
              ") was read or written as host memory; move it with ops::to(tensor, Device::CPU) first");
}

void Tensor::released_read() const {
  throw Error("a weight " + shape_str(shape()) + " released for inference was read: its frozen copy stands in for it in the products, "
              "nothing else may read it (nn::Module::release_product_weights)");
}

void Tensor::copy_to_host(void* dst) const {
  const size_t bytes = static_cast<size_t>(numel()) * size_of(dtype());
  device_memory(device()).to_host(dst, device_ptr(), bytes);
}

void Tensor::dtype_mismatch(DType wanted) const {
  std::ostringstream os;
  os << "a tensor of dtype " << to_string(dtype()) << " (shape " << shape_str(shape()) << ") was given where " << to_string(wanted)
     << " is needed";
  throw Error(os.str());
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  if (d < 0) d += n;
  TFM_CHECK(d >= 0 && d < n, "dimension " << d << " out of range for shape " << shape_str(shape()));
  return impl_->shape[d];
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = impl_->shape.size(); i-- > 0;) {
    if (impl_->shape[i] != 1 && impl_->strides[i] != expected) return false;
    expected *= impl_->shape[i];
  }
  return true;
}

std::vector<float> Tensor::to_vector() const { return values<float>(); }

float Tensor::item() const {
  TFM_CHECK(numel() == 1, "item() needs a one-element tensor, got shape " << shape_str(shape()));
  return values<float>()[0];
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_from(*this);
  return out;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->dtype = impl_->dtype;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  return Tensor(std::move(impl));
}

void Tensor::copy_from(const Tensor& src) {
  TFM_CHECK(src.shape() == shape(), "copy_from: shape " << shape_str(src.shape()) << " into " << shape_str(shape()));
  TFM_CHECK(src.dtype() == dtype(), "copy_from: dtype " << to_string(src.dtype()) << " into " << to_string(dtype())
                                                        << " (a conversion is ops::to)");
  if (src.device() == device()) return strided_copy(src, *this);
  // Between devices: contiguous bytes cross, strided walks stay on the side that has them.
  const Tensor from = src.is_contiguous() ? src : src.clone();
  Tensor to = is_contiguous() ? *this : empty(shape(), dtype(), device());
  const size_t bytes = static_cast<size_t>(numel()) * size_of(dtype());
  if (device() == Device::CPU) from.copy_to_host(to.device_ptr());
  else if (from.device() == Device::CPU) device_memory(device()).from_host(to.device_ptr(), from.device_ptr(), bytes);
  else {  // between two devices: through the host
    Tensor host = empty(shape(), dtype(), Device::CPU);
    host.copy_from(from);
    device_memory(device()).from_host(to.device_ptr(), host.device_ptr(), bytes);
  }
  if (!to.same(*this)) strided_copy(to, *this);
}

void Tensor::fill(float value) {
  TFM_CHECK(is_contiguous(), "fill needs a contiguous tensor");
  if (!host_accessible(device())) return device_memory(device()).fill(*this, value);
  float* d = data();
  parallel_chunks(numel(), [&](int64_t begin, int64_t end) { std::fill(d + begin, d + end, value); });
}

Tensor& Tensor::set_requires_grad(bool on) {
  TFM_CHECK(!impl_->grad_fn, "set_requires_grad is for leaf tensors only");
  impl_->requires_grad = on;
  return *this;
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->dtype = base.dtype();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  return Tensor(std::move(impl));
}

}  // namespace tfm
