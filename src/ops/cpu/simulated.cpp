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

#define TFM_SIMULATED(entry) .entry = Sim<decltype(Kernels::entry)>::call<&Kernels::entry>

std::string describe() { return "simulated (the CPU's kernels over memory that only they may touch)"; }

}  // namespace

const Kernels& simulated_kernels() {
  static const Kernels table{
      .device = Device::Sim,
      .claims = kernels().claims,
      .describe = describe,
      TFM_SIMULATED(binary),
      TFM_SIMULATED(unary),
      TFM_SIMULATED(dropout),
      TFM_SIMULATED(sum_to),
      TFM_SIMULATED(scale_in_place),
      TFM_SIMULATED(softmax),
      TFM_SIMULATED(softmax_backward),
      TFM_SIMULATED(top_log_probs),
      TFM_SIMULATED(layer_norm),
      TFM_SIMULATED(layer_norm_backward),
      TFM_SIMULATED(attention),
      TFM_SIMULATED(attention_backward),
      TFM_SIMULATED(smoothed_loss),
      TFM_SIMULATED(matmul),
      TFM_SIMULATED(linear),
      TFM_SIMULATED(linear_backward),
      TFM_SIMULATED(embedding),
      TFM_SIMULATED(embedding_backward),
      TFM_SIMULATED(arange),
      TFM_SIMULATED(gather_rows),
      TFM_SIMULATED(gather_rows_backward),
      TFM_SIMULATED(patchify),
      TFM_SIMULATED(equal),
      TFM_SIMULATED(sum),
      TFM_SIMULATED(adam),
      TFM_SIMULATED(random_fill),
      TFM_SIMULATED(sample),
      TFM_SIMULATED(sinusoids),
      TFM_SIMULATED(convert),
      TFM_SIMULATED(from_pixels),
  };
  return table;
}

}  // namespace tfm::ops::cpu
