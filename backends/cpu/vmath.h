// Vectorised f32 exp, log, tanh and sigmoid over arrays, one variant per instruction set
// (AVX-512, AVX2 + FMA, and a generic 128-bit one: SSE2 on x86-64, NEON on aarch64, whatever
// the compiler makes of 4-lane vectors on 32-bit ARM), written once with GCC vector extensions.
//
// Accuracy (checked against glibc's float functions over dense sweeps by the conformance suite,
// tests/conformance/vmath_tests.cpp, on every ISA variant): exp, log and tanh within 2 ulp of
// the correctly rounded result, sigmoid within 3 (measured over ~1.2 M inputs: 1, 1, 1 and 2 ulp,
// as glibc's own float functions: 1, 1, 2 and 2), on every input; special values as in C: exp(-inf) = 0,
// exp(+inf) = inf, exp overflows to inf above ~88.72 and flushes gradually through the
// subnormals to 0 below ~-103.97; log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, subnormal
// inputs handled; tanh(+-inf) = +-1, tanh(-0) = -0; NaN in, NaN out everywhere.
#ifndef CTN_CPU_VMATH_H
#define CTN_CPU_VMATH_H

#include <cstdint>

namespace ctn_cpu {

using VmathFn = void (*)(const float *x, float *y, int64_t n);  // y may alias x

struct VmathIsa {
  const char *name;  // "avx512", "avx2", "generic"
  VmathFn exp, log, tanh, sigmoid;
};

// The variant for a GEMM ISA name ("avx512", "avx2", anything else: generic). The caller has
// already checked that the CPU runs it (gemm_isa_select).
const VmathIsa &vmath_for(const char *isa_name);

}  // namespace ctn_cpu

#endif
