// The simulated device's kernels (tensor/device.h): the CPU's, each run with the
// device's memory made reachable for the call, so that its results are the CPU's,
// bitwise, while generic code above the kernels cannot touch its memory.
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/attention_mask.h"
#include "tensor/error.h"

namespace tfm::ops::cpu {

namespace {

// A tensor argument must be in the device's memory (or undefined), as a GPU kernel
// needs it: one left in host memory would be an illegal address there.
void expect_on_device(const char* entry, const Tensor& t) {
  TFM_CHECK(!t.defined() || t.device() == Device::Sim,
            "the simulated device's " << entry << " was given a " << to_string(t.device()) << " tensor " << shape_str(t.shape()));
}
void expect_on_device(const char* entry, Tensor* t) {
  if (t) expect_on_device(entry, *t);
}
void expect_on_device(const char* entry, const AttentionCall& c) {
  for (const Tensor* t : {&c.q, &c.k, &c.v, &c.key_rows}) expect_on_device(entry, *t);
  if (c.mask) expect_on_device(entry, c.mask->key_padding);
}
void expect_on_device(const char* entry, const std::vector<AdamTensors>& params) {
  for (const AdamTensors& p : params)
    for (const Tensor* t : {&p.param, &p.grad, &p.exp_avg, &p.exp_avg_sq}) expect_on_device(entry, *t);
}
template <class T>
void expect_on_device(const char*, const T&) {}  // (holds no tensor)

// names::e: the entry's name, as the errors above give it.
namespace names {
#define TFM_ENTRY_NAME(entry) constexpr char entry[] = #entry;
TFM_KERNEL_ENTRIES(TFM_ENTRY_NAME)
#undef TFM_ENTRY_NAME
}  // namespace names

// Sim<decltype(Kernels::e)>::call<&Kernels::e>: the CPU table's entry e, under a guard,
// once its tensors are found in the device's memory.
template <class Fn>
struct Sim;
template <class R, class... Args>
struct Sim<R (*)(Args...)> {
  template <R (*Kernels::*Entry)(Args...), const char* Name>
  static R call(Args... args) {
    (expect_on_device(Name, args), ...);
    const SimulatedKernel allow;
    return (kernels().*Entry)(args...);
  }
};

#define TFM_SIMULATED(entry) .entry = Sim<decltype(Kernels::entry)>::call<&Kernels::entry, names::entry>,

std::string describe() { return "simulated (the CPU's kernels over memory that only they may touch)"; }

}  // namespace

const Kernels& simulated_kernels() {
  static const Kernels table{
      .device = Device::Sim,
      .claims = kernels().claims,
      .describe = describe,
      TFM_KERNEL_ENTRIES(TFM_SIMULATED)
  };
  return table;
}

}  // namespace tfm::ops::cpu
