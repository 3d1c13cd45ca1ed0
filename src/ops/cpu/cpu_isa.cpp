#include "ops/cpu/cpu_isa.h"

#include <oneapi/dnnl/dnnl.h>

namespace tfm::ops::cpu {

namespace {

bool isa_has(dnnl_cpu_isa_t want) {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & want) == static_cast<unsigned>(want);
}

const char* isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx (AVX-512 with bf16, VNNI and AMX)";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16 (AVX-512 with bf16 and VNNI)";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni (AVX-512 with VNNI)";
    case dnnl_cpu_isa_avx512_core: return "avx512_core (AVX-512)";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni (AVX2 with VNNI)";
    case dnnl_cpu_isa_avx2: return "avx2";
    default: return "older than AVX2";
  }
}

CpuIsa detect() {
  CpuIsa isa;
  isa.avx512 = isa_has(dnnl_cpu_isa_avx512_core);
  // oneDNN 2.6 has bf16 matmul kernels only from AVX-512 on; on an AVX2 CPU making
  // the primitive fails, and products widen bf16 to f32 instead.
  isa.bf16_products = isa.avx512;
  // Without VNNI, oneDNN's int8 kernels add pairs of products in 16 bits, which
  // saturates for full-range inputs: the results would be silently wrong.
  isa.vnni = isa_has(dnnl_cpu_isa_avx512_core_vnni) || isa_has(dnnl_cpu_isa_avx2_vnni);
  isa.name = isa_name();
  return isa;
}

}  // namespace

const CpuIsa& cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

}  // namespace tfm::ops::cpu
