// Internal to the bf16 GEMM (gemm_bf16.cpp, gemm_bf16_avx512.cpp): the variants' pieces.
#ifndef CTN_CPU_GEMM_BF16_ISA_H
#define CTN_CPU_GEMM_BF16_ISA_H

#include "gemm_bf16.h"

namespace ctn_cpu {

// The portable micro-kernel's tile.
constexpr int kBf16GenericMR = 4, kBf16GenericNR = 8;

// The AVX512_BF16 variant, or nullptr where the build or the CPU has none.
const Bf16Gemm *gemm_bf16_avx512();

// Any operand and strides (the PackBf16 contract, always done).
void pack_pairs_generic(const Bf16Operand &x, bool along_rows, int64_t l0, int64_t lines, int64_t d0,
                        int64_t kc, int width, uint16_t *dst);

}  // namespace ctn_cpu

#endif
