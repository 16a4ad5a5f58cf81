// The 16-bit floats on the CPU: storage types for the scalar paths and array conversions to and
// from f32 per instruction set (F16C / AVX-512 / AVX512_BF16 where the CPU has them, the scalar
// conversions of desc.h elsewhere), chosen at run time like the GEMM and vmath variants. Every
// variant rounds to nearest even, keeps NaN a NaN and overflows f16 to inf; the AVX512_BF16 one
// (VCVTNEPS2BF16) also flushes f32 subnormal inputs to zero, as oneDNN and PyTorch do.
#ifndef CTN_CPU_HALF_H
#define CTN_CPU_HALF_H

#include <chutney/desc.h>

#include <cstdint>

namespace ctn_cpu {

// One stored f16 / bf16: reads as a float, is made from a float (rounded to nearest even), so a
// loop written for float elements runs on it unchanged (k_elementwise.cpp's strided walk).
template <uint16_t (*FromF32)(float), uint16_t (*FromF64)(double), float (*ToF32)(uint16_t)>
struct Half16 {
  uint16_t bits;
  Half16() = default;
  Half16(float f) : bits(FromF32(f)) {}
  Half16(double d) : bits(FromF64(d)) {}
  operator float() const { return ToF32(bits); }
};
using F16 = Half16<ctn_desc_f32_to_f16, ctn_desc_f64_to_f16, ctn_desc_f16_to_f32>;
using BF16 = Half16<ctn_desc_f32_to_bf16, ctn_desc_f64_to_bf16, ctn_desc_bf16_to_f32>;
static_assert(sizeof(F16) == 2 && sizeof(BF16) == 2, "16-bit storage");

using HalfToF32 = void (*)(const uint16_t *x, float *y, int64_t n);
using F32ToHalf = void (*)(const float *x, uint16_t *y, int64_t n);

struct HalfIsa {
  const char *name;  // "avx512", "avx512_bf16", "avx2", "generic"
  HalfToF32 f16_to_f32, bf16_to_f32;
  F32ToHalf f32_to_f16, f32_to_bf16;
  // The pair for one dtype (CTN_F16 or CTN_BF16).
  HalfToF32 widen(int32_t dt) const { return dt == CTN_F16 ? f16_to_f32 : bf16_to_f32; }
  F32ToHalf narrow(int32_t dt) const { return dt == CTN_F16 ? f32_to_f16 : f32_to_bf16; }
};

// The variant for a GEMM ISA name ("avx512": with AVX512_BF16 when the CPU has it; "avx2";
// anything else: the scalar one). The caller has checked that the CPU runs the ISA.
const HalfIsa &half_for(const char *isa_name);
// The variant named "avx512_bf16", "avx512", "avx2" or "generic" when this build has it and the
// CPU runs it, else nullptr (tests/unit/half_isa_test.cpp compares each with the generic one).
const HalfIsa *half_variant(const char *name);

}  // namespace ctn_cpu

#endif
