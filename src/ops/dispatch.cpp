#include "ops/dispatch.h"

#include <optional>

#include "ops/cpu/kernels.h"
#ifdef TFM_HAVE_CUDA
#include "ops/cuda/kernels.h"
#endif
#include "ops/convert.h"
#include "tensor/error.h"

namespace tfm::ops {

const Kernels& kernels(Device device) {
  switch (device) {
    case Device::CPU: return cpu::kernels();
    case Device::Sim: return cpu::simulated_kernels();
    case Device::CUDA:
#ifdef TFM_HAVE_CUDA
      return cuda::kernels();
#else
      break;
#endif
  }
  throw Error("this build of tfm has no kernels for " + to_string(device) + " tensors (configure with -DTFM_CUDA=ON where the CUDA toolkit is)");
}

Device usable_device(const std::string& name) {
  const std::optional<Device> device = parse_device(name);
  TFM_CHECK(device, "device '" << name << "' is not one of cpu, cuda");
  try {
    (void)kernels(*device);
    (void)Tensor::empty({1}, DType::f32, *device);  // the device's memory answers
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind("cuda: ", 0) == 0) why = why.substr(6);
    throw Error("device " + name + ": " + why);
  }
  return *device;
}

Device device_of(const char* op, Tensors tensors) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!first) first = &t;
    TFM_CHECK(t.device() == first->device(), op << ": tensors on different devices (" << to_string(first->device()) << " and "
                                                 << to_string(t.device()) << "); move them with ops::to(tensor, device)");
  }
  return first ? first->device() : Device::CPU;
}

void fail_unimplemented(const char* op, Device device) {
  throw Error(std::string(op) + ": this build has no " + to_string(device) + " kernel for it");
}

void expect_dtype(const char* op, const char* what, const Tensor& t, DType want) {
  TFM_CHECK(t.dtype() == want, op << ": " << what << " must be " << to_string(want) << ", got " << to_string(t.dtype()) << " "
                                  << shape_str(t.shape()));
}

void expect_dtype(const char* op, const char* what, Tensors tensors, DType want) {
  for (const Tensor& t : tensors)
    if (t.defined()) expect_dtype(op, what, t, want);
}

Tensor dense(const Tensor& x) { return x.is_contiguous() ? x : x.clone(); }

namespace {

template <class T>
void check_below(const T* index, int64_t n, int64_t bound, const std::function<std::string(int64_t)>& outside) {
  for (int64_t i = 0; i < n; ++i)
    if (index[i] < 0 || index[i] >= bound) throw Error(outside(index[i]));
}

template <class T>
void check_below(const Tensor& indices, int64_t bound, const std::function<std::string(int64_t)>& outside) {
  if (indices.device() == Device::CPU) return check_below(indices.data_as<T>(), indices.numel(), bound, outside);
  const std::vector<T> host = indices.values<T>();  // (waits for the device)
  check_below(host.data(), indices.numel(), bound, outside);
}

}  // namespace

Tensor checked_indices(const Tensor& indices, int64_t bound, Device device, const std::function<std::string(int64_t)>& outside) {
  TFM_CHECK(indices.dtype() == DType::i32 || indices.dtype() == DType::i64,
            "indices must be i32 or i64, got " << to_string(indices.dtype()));
  const Tensor index = dense(indices);
  if (index.dtype() == DType::i32) check_below<int32_t>(index, bound, outside);
  else check_below<int64_t>(index, bound, outside);
  return ops::to(index, device);
}

}  // namespace tfm::ops
