// Kernels compiled once per instruction set with per-function target attributes, and the
// choice among them by the GEMM ISA's name at run time (gemm.h: gemm_isa_select).
#ifndef CTN_CPU_ISA_VARIANT_H
#define CTN_CPU_ISA_VARIANT_H

#include <cstring>

namespace ctn_cpu {

// A kernel's variant for a GEMM ISA name (the CPU runs it: gemm_isa_select checked): `prefix`
// names functions compiled per instruction set, prefix_avx512 / prefix_avx2 (x86-64 only) and
// prefix_generic; Fn picks the overload.
template <class Fn>
Fn isa_variant(const char *isa, Fn avx512, Fn avx2, Fn generic) {
  if (avx512 && isa && !std::strcmp(isa, "avx512")) return avx512;
  if (avx2 && isa && !std::strcmp(isa, "avx2")) return avx2;
  return generic;
}
// CTN_ISA_VARIANTS(MACRO, "avx2,..."): MACRO(suffix, target attribute) once per variant that
// CTN_ISA_VARIANT picks from: avx512 (AVX-512F) and avx2 (the features given; the GEMM's "avx2"
// ISA implies FMA) on x86-64, and generic everywhere.
#if defined(__x86_64__)
#define CTN_ISA_VARIANT(Fn, isa, prefix) ::ctn_cpu::isa_variant<Fn>(isa, prefix##_avx512, prefix##_avx2, prefix##_generic)
#define CTN_ISA_VARIANTS(MACRO, avx2_features)             \
  MACRO(avx512, __attribute__((target("avx512f"))))        \
  MACRO(avx2, __attribute__((target(avx2_features))))      \
  MACRO(generic, )
#else
#define CTN_ISA_VARIANT(Fn, isa, prefix) ::ctn_cpu::isa_variant<Fn>(isa, nullptr, nullptr, prefix##_generic)
#define CTN_ISA_VARIANTS(MACRO, avx2_features) MACRO(generic, )
#endif

}  // namespace ctn_cpu

#endif
