// 32-bit ARM (armhf): run-time choice of the GEMM micro-kernel. Debian's armhf baseline (ARMv7-A,
// VFPv3-D16) does not include NEON, so the plugin is compiled without it and runs on every ARMv7
// core; the NEON kernel carries its own target attribute and is used only when the kernel says
// the CPU has NEON (getauxval(AT_HWCAP) & HWCAP_NEON).
#ifndef CTN_CPU_GEMM_ARM32_H
#define CTN_CPU_GEMM_ARM32_H

#include "gemm.h"

namespace ctn_cpu {

// The "neon" variant: `generic`'s blocking with a NEON f32 micro-kernel (f64 stays on the
// generic kernel: ARMv7 NEON has no double arithmetic). NULL when the CPU has no NEON.
const GemmIsa *gemm_isa_arm32_neon(const GemmIsa &generic);

}  // namespace ctn_cpu

#endif
