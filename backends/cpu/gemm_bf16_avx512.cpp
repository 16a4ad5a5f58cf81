// The bf16 GEMM's AVX512_BF16 variant (gemm_bf16.h): an 8 x 32 micro-kernel of VDPBF16PS (two
// bf16 products summed into each f32 lane) and vector packers for the usual layouts. Compiled
// with per-function target attributes, like the f32 GEMM's variants (gemm.cpp); chosen only when
// the CPU reports AVX512F, AVX512BW and AVX512_BF16.
#include "gemm_bf16_isa.h"

#include <cstring>

#include "x86_simd.h"

namespace ctn_cpu {

#if defined(__x86_64__)
namespace {

#define CTN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
constexpr int kMR = 8, kNR = 32;

CTN_BF16_TARGET inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

CTN_BF16_TARGET void uk_bf16_avx512(int64_t kp, const uint16_t *pa, const uint16_t *pb, float *c,
                                    int64_t ldc, int accumulate) {
  __m512 acc[kMR][2];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p, pa += 2 * kMR, pb += 2 * kNR) {
    const __m512bh b0 = as_bh(_mm512_loadu_si512(pb)), b1 = as_bh(_mm512_loadu_si512(pb + kNR));
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      int32_t w;
      std::memcpy(&w, pa + 2 * i, 4);
      const __m512bh av = as_bh(_mm512_set1_epi32(w));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    float *r = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(r));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(r + 16));
    }
    _mm512_storeu_ps(r, acc[i][0]);
    _mm512_storeu_ps(r + 16, acc[i][1]);
  }
}

// Up to 32 consecutive elements from `src` (n of them, the rest zero) as bf16: bf16 copied,
// f32 rounded to nearest even by VCVTNE2PS2BF16 (which also flushes f32 subnormals to zero).
CTN_BF16_TARGET inline __m512i load32(const void *src, bool f32, int64_t n) {
  if (n <= 0) return _mm512_setzero_si512();
  const __mmask32 m32 = n >= 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1;
  if (!f32) return _mm512_maskz_loadu_epi16(m32, src);
  const auto *f = static_cast<const float *>(src);
  const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m32), f);
  const __m512 hi = n > 16 ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(m32 >> 16), f + 16) : _mm512_setzero_ps();
  __m512bh h = _mm512_cvtne2ps_pbh(hi, lo);
  __m512i r;
  std::memcpy(&r, &h, sizeof r);
  return r;
}

inline const void *at(const Bf16Operand &x, int64_t r, int64_t c) {
  const int64_t o = r * x.rs + c * x.cs;
  return x.f32 ? static_cast<const void *>(static_cast<const float *>(x.p) + o)
               : static_cast<const void *>(static_cast<const uint16_t *>(x.p) + o);
}

// Lines contiguous along the depth (rows of a row-major A, columns of a column-major B): a
// line's pairs are 32-bit words in order; 16 of them at a time go to the panel, `width` words
// apart.
CTN_BF16_TARGET void pack_line_contiguous(const Bf16Operand &x, bool along_rows, int64_t l0, int64_t lines,
                                          int64_t d0, int64_t kc, int width, uint16_t *dst) {
  const int64_t kp = (kc + 1) / 2;
  const __m512i step = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(width));
  for (int64_t pl = 0; pl < lines; pl += width, dst += kp * 2 * width) {
    const int64_t live = lines - pl < width ? lines - pl : width;
    auto *d32 = reinterpret_cast<int *>(dst);
    for (int64_t l = 0; l < width; ++l)
      for (int64_t p = 0; p < kp; p += 16) {
        const int64_t left = 2 * (kp - p) < 32 ? 2 * (kp - p) : 32;
        const __mmask16 m = static_cast<__mmask16>(left >= 32 ? 0xffff : (1u << (left / 2)) - 1);
        __m512i v = _mm512_setzero_si512();
        if (l < live) {
          const int64_t line = l0 + pl + l, d = d0 + 2 * p;
          const int64_t n = kc - 2 * p < 32 ? kc - 2 * p : 32;
          v = load32(along_rows ? at(x, line, d) : at(x, d, line), x.f32, n);
        }
        _mm512_mask_i32scatter_epi32(d32 + p * width + l, m, step, v, 4);
      }
  }
}

// B with unit column stride (lines = columns, 32 per panel): rows 2p and 2p + 1 interleaved.
CTN_BF16_TARGET void pack_rows_interleaved(const Bf16Operand &x, int64_t l0, int64_t lines, int64_t d0,
                                           int64_t kc, uint16_t *dst) {
  const int64_t kp = (kc + 1) / 2;
  alignas(64) int16_t i0[32], i1[32];
  for (int j = 0; j < 16; ++j) {
    i0[2 * j] = static_cast<int16_t>(j), i0[2 * j + 1] = static_cast<int16_t>(32 + j);
    i1[2 * j] = static_cast<int16_t>(16 + j), i1[2 * j + 1] = static_cast<int16_t>(48 + j);
  }
  const __m512i idx0 = _mm512_load_si512(i0), idx1 = _mm512_load_si512(i1);
  for (int64_t pl = 0; pl < lines; pl += kNR, dst += kp * 2 * kNR) {
    const int64_t live = lines - pl < kNR ? lines - pl : kNR;
    for (int64_t p = 0; p < kp; ++p) {
      const int64_t d = d0 + 2 * p;
      const __m512i r0 = load32(at(x, d, l0 + pl), x.f32, live);
      const __m512i r1 = 2 * p + 1 < kc ? load32(at(x, d + 1, l0 + pl), x.f32, live) : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + p * 2 * kNR, _mm512_permutex2var_epi16(r0, idx0, r1));
      _mm512_storeu_si512(dst + p * 2 * kNR + kNR, _mm512_permutex2var_epi16(r0, idx1, r1));
    }
  }
}

bool pack_avx512(const Bf16Operand &x, bool along_rows, int64_t l0, int64_t lines, int64_t d0, int64_t kc,
                 int width, uint16_t *dst) {
  const int64_t line_stride = along_rows ? x.rs : x.cs, depth_stride = along_rows ? x.cs : x.rs;
  if (depth_stride == 1) {
    pack_line_contiguous(x, along_rows, l0, lines, d0, kc, width, dst);
    return true;
  }
  if (line_stride == 1 && !along_rows && width == kNR) {
    pack_rows_interleaved(x, l0, lines, d0, kc, dst);
    return true;
  }
  return false;
}

const Bf16Gemm kAvx512Bf16 = {"avx512_bf16", uk_bf16_avx512, pack_avx512, kMR, kNR, 144, 512, 3072};

}  // namespace

const Bf16Gemm *gemm_bf16_avx512() {
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512bf16");
  return ok ? &kAvx512Bf16 : nullptr;
}

#else

const Bf16Gemm *gemm_bf16_avx512() { return nullptr; }

#endif

}  // namespace ctn_cpu
