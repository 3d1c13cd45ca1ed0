#include "ops/cpu/kernels.h"

#include "ops/cpu/cpu_isa.h"

namespace tfm::ops::cpu {

namespace {

std::string describe() { return "CPU instructions in use (oneDNN): " + cpu_isa().name; }

}  // namespace

const Kernels& kernels() {
  static const Kernels table{
      .device = Device::CPU,
      .claims = complete_claims(/*int8_products=*/true),
      .describe = describe,
      TFM_KERNEL_ENTRIES(TFM_KERNEL_ENTRY)
  };
  return table;
}

}  // namespace tfm::ops::cpu
