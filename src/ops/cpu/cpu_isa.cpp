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
  // oneDNN's bf16 matmul kernels only where the CPU multiplies bf16 itself. On an AVX2
  // CPU making the primitive fails; on AVX-512 without bf16 (Skylake to Ice Lake) oneDNN
  // emulates it, 2.9x slower than widening bf16 to f32 for the f32 kernels (Xeon Ice
  // Lake, 2 threads: `small` training step 2,723 ms emulated, 942 widened, 775 in f32;
  // opus-mt-base-shaped beam 4, 121 against 266 tokens/s), so products widen there too.
  isa.bf16_products = isa_has(dnnl_cpu_isa_avx512_core_bf16);
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
