// The GPU's kernel table: every entry of ops/kernels.h; it claims what the CPU does
// but int8 products (ops::complete_claims), and attention goes by flash_attention
// wherever nobody asks for the probabilities.
#include "ops/cuda/kernels.h"

#include "tensor/cuda/runtime.h"

namespace tfm::ops::cuda {

namespace {

std::string describe() { return "CUDA: " + tfm::cuda::describe_device(); }

}  // namespace

const Kernels& kernels() {
  static const Kernels table{
      .device = Device::CUDA,
      .claims = complete_claims(/*int8_products=*/false),
      .describe = describe,
      .flash_attention_by_default = true,
      TFM_KERNEL_ENTRIES(TFM_KERNEL_ENTRY)
  };
  return table;
}

}  // namespace tfm::ops::cuda
