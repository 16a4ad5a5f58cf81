// The backend's own bf16 GEMM (issue 27): C (f32) = A * B with both operands rounded to bf16
// while they are packed (bf16 operands are copied as they are, f32 ones rounded to nearest
// even), sums in f32. The packed panels hold k in pairs, as AVX512_BF16's VDPBF16PS reads them
// (two bf16 products added into each f32 lane), so a micro-kernel does twice the multiply-adds
// per instruction of the f32 GEMM's FMA. Chosen at run time: the AVX512_BF16 variant where the
// CPU has the instructions; elsewhere the backend keeps its convert-to-f32 path (k_widen.cpp) and
// only the tests run the portable variant (same packing, scalar f32 arithmetic).
#ifndef CTN_CPU_GEMM_BF16_H
#define CTN_CPU_GEMM_BF16_H

#include <cstddef>
#include <cstdint>

namespace ctn_cpu {

// One operand: element (r, c) at p[r * rs + c * cs], bf16 bits (uint16_t) or f32.
struct Bf16Operand {
  const void *p;
  bool f32;
  int64_t rs, cs;
};

// C tile MR x NR (+)= packed A (kp pairs of MR rows) * packed B (kp pairs of NR columns).
using MicroKernelBf16 = void (*)(int64_t kp, const uint16_t *pa, const uint16_t *pb, float *c,
                                 int64_t ldc, int accumulate);
// Packs `lines` lines of an operand (rows of A: along_rows; columns of B) from line l0, depth
// [d0, d0 + kc), into panels of `width` lines (layout: gemm_bf16.cpp). False when the variant
// has no fast path for the operand's strides (the portable packer runs instead).
using PackBf16 = bool (*)(const Bf16Operand &x, bool along_rows, int64_t l0, int64_t lines, int64_t d0,
                          int64_t kc, int width, uint16_t *dst);

struct Bf16Gemm {
  const char *name;  // "avx512_bf16", "generic"
  MicroKernelBf16 uk;
  PackBf16 pack;  // nullptr: the portable packer only
  int mr, nr, mc, kc, nc;  // kc even: a pair never straddles two K blocks
  // Scratch bytes a serial call needs: packed A (mc x kc), packed B (kc x nc), one f32 tile.
  static constexpr size_t kBytesA = 160 * 1024, kBytesB = size_t{3} << 20, kBytesTile = 2048;
};

// "avx512_bf16" when the CPU has AVX512F + AVX512BW + AVX512_BF16 (and this build targets
// x86-64), "generic" always; nullptr otherwise. nullptr/"" /"auto": the best.
const Bf16Gemm *gemm_bf16_variant(const char *name);

// The packing buffers of the calling thread (at least Bf16Gemm::kBytes* each, 64-aligned).
struct Bf16Scratch {
  uint16_t *a, *b;
  float *tile;
};

// C[m, n] (row stride ldc) = A[m, k] * B[k, n] (accumulate: C +=), on the calling thread.
void gemm_bf16_serial(const Bf16Gemm &v, const Bf16Scratch &s, int64_t m, int64_t n, int64_t k,
                      const Bf16Operand &a, const Bf16Operand &b, float *c, int64_t ldc,
                      bool accumulate);

}  // namespace ctn_cpu

#endif
