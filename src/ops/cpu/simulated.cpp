// The simulated device's kernels (tensor/device.h): the CPU's, each run with the
// device's memory made reachable for the call, so that its results are the CPU's,
// bitwise, while generic code above the kernels cannot touch its memory.
#include "ops/cpu/kernels.h"

namespace tfm::ops::cpu {

namespace {

// Sim<decltype(Kernels::e)>::call<&Kernels::e>: the CPU table's entry e, under a guard.
template <class Fn>
struct Sim;
template <class R, class... Args>
struct Sim<R (*)(Args...)> {
  template <R (*Kernels::*Entry)(Args...)>
  static R call(Args... args) {
    const SimulatedKernel allow;
    return (kernels().*Entry)(args...);
  }
};

#define TFM_SIMULATED(entry) .entry = Sim<decltype(Kernels::entry)>::call<&Kernels::entry>,

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
