// The bf16 GEMM's packing and blocking (gemm_bf16.h); the AVX512_BF16 micro-kernel and its
// vector packers are in gemm_bf16_avx512.cpp.
//
// Packed layouts, k taken in pairs (an odd last k gets a zero partner):
//   A block (mc x kc): MR-row panels; element ((p * MR + i) * 2 + h) is A(i, 2p + h).
//   B block (kc x nc): NR-column panels; element ((p * NR + j) * 2 + h) is B(2p + h, j).
// Rows / columns past the edge of the matrix are zero, so edge tiles run the full micro-kernel
// into a scratch tile.
#include "gemm_bf16.h"

#include <chutney/desc.h>

#include <algorithm>
#include <cstring>

#include "gemm_bf16_isa.h"

namespace ctn_cpu {
namespace {

inline uint16_t elem(const Bf16Operand &x, int64_t r, int64_t c) {
  const int64_t o = r * x.rs + c * x.cs;
  return x.f32 ? ctn_desc_f32_to_bf16(static_cast<const float *>(x.p)[o])
               : static_cast<const uint16_t *>(x.p)[o];
}

// The portable micro-kernel: the same pairs, f32 products and sums.
void uk_bf16_generic(int64_t kp, const uint16_t *pa, const uint16_t *pb, float *c, int64_t ldc,
                     int accumulate) {
  constexpr int MR = kBf16GenericMR, NR = kBf16GenericNR;
  float acc[MR][NR] = {};
  for (int64_t p = 0; p < kp; ++p, pa += 2 * MR, pb += 2 * NR)
    for (int i = 0; i < MR; ++i) {
      const float a0 = ctn_desc_bf16_to_f32(pa[2 * i]), a1 = ctn_desc_bf16_to_f32(pa[2 * i + 1]);
      for (int j = 0; j < NR; ++j)
        acc[i][j] += a0 * ctn_desc_bf16_to_f32(pb[2 * j]) + a1 * ctn_desc_bf16_to_f32(pb[2 * j + 1]);
    }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

const Bf16Gemm kGeneric = {"generic", uk_bf16_generic, nullptr, kBf16GenericMR, kBf16GenericNR, 64, 512, 1024};

}  // namespace

// Any operand, any strides: `lines` panel lines of `width` (MR rows of A or NR columns of B)
// starting at line l0, depth kc from d0. `along_rows`: the lines are the operand's rows (A) or
// its columns (B).
void pack_pairs_generic(const Bf16Operand &x, bool along_rows, int64_t l0, int64_t lines, int64_t d0,
                        int64_t kc, int width, uint16_t *dst) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t pl = 0; pl < lines; pl += width, dst += kp * 2 * width) {
    const int64_t live = std::min<int64_t>(width, lines - pl);
    for (int64_t p = 0; p < kp; ++p)
      for (int64_t l = 0; l < width; ++l)
        for (int h = 0; h < 2; ++h) {
          const int64_t d = 2 * p + h;
          uint16_t v = 0;
          if (l < live && d < kc)
            v = along_rows ? elem(x, l0 + pl + l, d0 + d) : elem(x, d0 + d, l0 + pl + l);
          dst[(p * width + l) * 2 + h] = v;
        }
  }
}

namespace {

void pack(const Bf16Gemm &v, const Bf16Operand &x, bool along_rows, int64_t l0, int64_t lines, int64_t d0,
          int64_t kc, uint16_t *dst) {
  const int width = along_rows ? v.mr : v.nr;
  if (v.pack && v.pack(x, along_rows, l0, lines, d0, kc, width, dst)) return;
  pack_pairs_generic(x, along_rows, l0, lines, d0, kc, width, dst);
}

// C[0:rows, 0:cols] (+)= one packed A block * one packed B panel.
void macro_panel(const Bf16Gemm &v, const Bf16Scratch &s, int64_t rows_all, int64_t cols, int64_t kp,
                 const uint16_t *pa, const uint16_t *pbp, float *c, int64_t ldc, int accumulate) {
  for (int64_t ir = 0; ir < rows_all; ir += v.mr) {
    const int64_t rows = std::min<int64_t>(v.mr, rows_all - ir);
    float *cp = c + ir * ldc;
    const uint16_t *pap = pa + ir * kp * 2;
    if (rows == v.mr && cols == v.nr) {
      v.uk(kp, pap, pbp, cp, ldc, accumulate);
      continue;
    }
    v.uk(kp, pap, pbp, s.tile, v.nr, 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const float t = s.tile[i * v.nr + j];
        cp[i * ldc + j] = accumulate ? cp[i * ldc + j] + t : t;
      }
  }
}

}  // namespace

void gemm_bf16_serial(const Bf16Gemm &v, const Bf16Scratch &s, int64_t m, int64_t n, int64_t k,
                      const Bf16Operand &a, const Bf16Operand &b, float *c, int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  for (int64_t jc = 0; jc < n; jc += v.nc) {
    const int64_t nc = std::min<int64_t>(v.nc, n - jc);
    for (int64_t pc = 0; pc < k; pc += v.kc) {
      const int64_t kc = std::min<int64_t>(v.kc, k - pc), kp = (kc + 1) / 2;
      const int acc = pc > 0 || accumulate;
      pack(v, b, false, jc, nc, pc, kc, s.b);
      for (int64_t ic = 0; ic < m; ic += v.mc) {
        const int64_t mc = std::min<int64_t>(v.mc, m - ic);
        pack(v, a, true, ic, mc, pc, kc, s.a);
        for (int64_t jr = 0; jr < nc; jr += v.nr)
          macro_panel(v, s, mc, std::min<int64_t>(v.nr, nc - jr), kp, s.a, s.b + jr * kp * 2,
                      c + ic * ldc + jc + jr, ldc, acc);
      }
    }
  }
}

const Bf16Gemm *gemm_bf16_variant(const char *name) {
  const bool any = !name || !name[0] || !std::strcmp(name, "auto");
  const Bf16Gemm *fast = gemm_bf16_avx512();
  if (any) return fast ? fast : &kGeneric;
  if (!std::strcmp(name, "avx512_bf16")) return fast;
  if (!std::strcmp(name, "generic")) return &kGeneric;
  return nullptr;
}

}  // namespace ctn_cpu
