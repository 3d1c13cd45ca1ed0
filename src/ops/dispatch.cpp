#include "ops/dispatch.h"

#include <optional>

#include "ops/cpu/kernels.h"
#ifdef TFM_HAVE_CUDA
#include "ops/cuda/kernels.h"
#endif
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

}  // namespace tfm::ops
