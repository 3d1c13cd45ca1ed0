#pragma once
// Which CPU instruction sets the kernels use, decided once, in one place. The build
// targets AVX2; a kernel with a wider twin asks here which one to run. oneDNN's choice
// (its effective ISA, which ONEDNN_MAX_CPU_ISA caps) is the ceiling for tfm's own
// kernels too, so `ONEDNN_MAX_CPU_ISA=AVX2` runs every path an AVX2 machine runs.
#include <string>

namespace tfm::ops::cpu {

struct CpuIsa {
  bool avx512 = false;        // AVX-512 F/DQ/BW/VL: the 16-lane exp, dropout masks 8 at a time
  bool bf16_products = false;  // oneDNN's bf16 matmul kernels (native AVX512-BF16 or AMX; else products widen to f32)
  bool vnni = false;          // int8 products that do not saturate (AVX512-VNNI or AVX-VNNI)
  std::string name;           // for `tfm --version`
};

const CpuIsa& cpu_isa();

}  // namespace tfm::ops::cpu
