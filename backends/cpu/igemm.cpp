// Integer GEMM micro-kernels (igemm.h): pairs of int16 products summed into i32 lanes, the
// operation of x86's pmaddwd (AVX2, AVX-512BW) and vpdpwssd (AVX-512 VNNI); a portable scalar
// version elsewhere. Each kernel computes one kIgMr x kIgNr tile (the u8 x s8 one kIgQ8Mr x kIgNr)
// over the whole K.
#include "igemm.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ctn_cpu {
namespace {

inline int32_t pair_of(const int16_t *p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Row i of the tile reads A's row m0 + min(i, mb - 1): the rows past mb repeat the last one
// (computed, never stored by the caller).
inline const int16_t *a_row(const IgemmOperands &op, int64_t m0, int64_t mb, int64_t i) {
  return op.a + (m0 + (i < mb ? i : mb - 1)) * op.kp2 * 2;
}

void tile_generic(const IgemmOperands &op, int64_t m0, int64_t mb, int64_t n0, int32_t *acc) {
  for (int64_t i = 0; i < mb; ++i) {
    const int16_t *a = a_row(op, m0, mb, i);
    uint32_t sum[kIgNr] = {};
    for (int64_t kp = 0; kp < op.kp2; ++kp) {
      const int32_t a0 = a[2 * kp], a1 = a[2 * kp + 1];
      const int16_t *b = op.b + (kp * op.ldb + n0) * 2;
      for (int64_t j = 0; j < kIgNr; ++j)
        sum[j] += static_cast<uint32_t>(a0 * b[2 * j]) + static_cast<uint32_t>(a1 * b[2 * j + 1]);
    }
    for (int64_t j = 0; j < kIgNr; ++j) acc[i * kIgNr + j] = static_cast<int32_t>(sum[j]);
  }
}

#if defined(__x86_64__)
// One body for both AVX-512 kernels (a macro: intrinsics inline only into functions of their
// target, so a shared inline function would need the wider target in the narrower kernel);
// ACC(c, a, b) is c + the pair products of a and b. The 16 accumulators are named variables (an
// array form compiled, under gcc 12, to register copies around every product: see the u8 x s8
// tile).
#define CTN_IG_ROW_512(ACC, r)                                                                         \
  {                                                                                                    \
    const __m512i av = _mm512_set1_epi32(pair_of(a##r + 2 * kp));                                      \
    c##r##0 = ACC(c##r##0, av, b0);                                                                    \
    c##r##1 = ACC(c##r##1, av, b1);                                                                    \
    c##r##2 = ACC(c##r##2, av, b2);                                                                    \
    c##r##3 = ACC(c##r##3, av, b3);                                                                    \
  }
#define CTN_IG_STORE_512(r)                                                                            \
  _mm512_storeu_si512(acc + r * kIgNr, c##r##0);                                                       \
  _mm512_storeu_si512(acc + r * kIgNr + 16, c##r##1);                                                  \
  _mm512_storeu_si512(acc + r * kIgNr + 32, c##r##2);                                                  \
  _mm512_storeu_si512(acc + r * kIgNr + 48, c##r##3);
#define CTN_IG_TILE_512(ACC)                                                                            \
  static_assert(kIgMr == 4, "four rows below");                                                        \
  const int16_t *a0 = a_row(op, m0, mb, 0), *a1 = a_row(op, m0, mb, 1);                                 \
  const int16_t *a2 = a_row(op, m0, mb, 2), *a3 = a_row(op, m0, mb, 3);                                 \
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00;          \
  __m512i c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00;       \
  __m512i c32 = c00, c33 = c00;                                                                        \
  for (int64_t kp = 0; kp < op.kp2; ++kp) {                                                            \
    const int16_t *b = op.b + (kp * op.ldb + n0) * 2;                                                  \
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 32);                         \
    const __m512i b2 = _mm512_loadu_si512(b + 64), b3 = _mm512_loadu_si512(b + 96);                    \
    CTN_IG_ROW_512(ACC, 0)                                                                             \
    CTN_IG_ROW_512(ACC, 1)                                                                             \
    CTN_IG_ROW_512(ACC, 2)                                                                             \
    CTN_IG_ROW_512(ACC, 3)                                                                             \
  }                                                                                                    \
  CTN_IG_STORE_512(0)                                                                                  \
  CTN_IG_STORE_512(1)                                                                                  \
  CTN_IG_STORE_512(2)                                                                                  \
  CTN_IG_STORE_512(3)

#define CTN_IG_VNNI(c, a, b) _mm512_dpwssd_epi32(c, a, b)
#define CTN_IG_MADD(c, a, b) _mm512_add_epi32(c, _mm512_madd_epi16(a, b))

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_avx512_vnni(const IgemmOperands &op, int64_t m0,
                                                                             int64_t mb, int64_t n0, int32_t *acc) {
  CTN_IG_TILE_512(CTN_IG_VNNI)
}

__attribute__((target("avx512f,avx512bw"))) void tile_avx512bw(const IgemmOperands &op, int64_t m0, int64_t mb,
                                                              int64_t n0, int32_t *acc) {
  CTN_IG_TILE_512(CTN_IG_MADD)
}

// NV vectors of 16 columns (NV = 4: the whole kIgNr panel), kIgQ8Mr rows, the accumulators as
// named variables (those of columns past NV unused): gcc 12 compiles an array form's loop with
// about two register copies per vpdpbusd (and reloads of B), which this form avoids. Each row's
// quad of weights is broadcast from memory.
#define CTN_Q8_ROW(r, ar)                                                       \
  {                                                                             \
    int32_t quad;                                                               \
    std::memcpy(&quad, (ar) + 4 * kq, sizeof quad);                             \
    const __m512i av = _mm512_set1_epi32(quad);                                 \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, b0, av);                             \
    if constexpr (NV > 1) c##r##1 = _mm512_dpbusd_epi32(c##r##1, b1, av);       \
    if constexpr (NV > 2) c##r##2 = _mm512_dpbusd_epi32(c##r##2, b2, av);       \
    if constexpr (NV > 3) c##r##3 = _mm512_dpbusd_epi32(c##r##3, b3, av);       \
  }
#define CTN_Q8_STORE(r)                                                         \
  _mm512_storeu_si512(acc + r * kIgNr, c##r##0);                                \
  if constexpr (NV > 1) _mm512_storeu_si512(acc + r * kIgNr + 16, c##r##1);     \
  if constexpr (NV > 2) _mm512_storeu_si512(acc + r * kIgNr + 32, c##r##2);     \
  if constexpr (NV > 3) _mm512_storeu_si512(acc + r * kIgNr + 48, c##r##3);

template <int NV>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_q8_vnni_n(const IgemmQ8Operands &op, int64_t m0,
                                                                           int64_t mb, int64_t n0, int32_t *acc) {
  static_assert(kIgQ8Mr == 6, "six rows below");
  const int8_t *a0 = op.a + m0 * op.kq * 4;
  const int8_t *a1 = op.a + (m0 + (mb > 1 ? 1 : mb - 1)) * op.kq * 4;
  const int8_t *a2 = op.a + (m0 + (mb > 2 ? 2 : mb - 1)) * op.kq * 4;
  const int8_t *a3 = op.a + (m0 + (mb > 3 ? 3 : mb - 1)) * op.kq * 4;
  const int8_t *a4 = op.a + (m0 + (mb > 4 ? 4 : mb - 1)) * op.kq * 4;
  const int8_t *a5 = op.a + (m0 + (mb > 5 ? 5 : mb - 1)) * op.kq * 4;
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;
  __m512i c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
  __m512i c40 = c00, c41 = c00, c42 = c00, c43 = c00, c50 = c00, c51 = c00, c52 = c00, c53 = c00;
  // With a row table B may be NULL: no arithmetic on it then (a zero step keeps bs NULL).
  const uint8_t *bs = op.brow ? nullptr : op.b + n0 * 4;
  const int64_t step = op.brow ? 0 : op.ldb * 4;
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t kq = 0; kq < op.kq; ++kq, bs += step) {
    const uint8_t *b = op.brow ? op.brow[kq] + n0 * 4 : bs;
    const __m512i b0 = _mm512_loadu_si512(b);
    const __m512i b1 = NV > 1 ? _mm512_loadu_si512(b + 64) : zero;
    const __m512i b2 = NV > 2 ? _mm512_loadu_si512(b + 128) : zero;
    const __m512i b3 = NV > 3 ? _mm512_loadu_si512(b + 192) : zero;
    CTN_Q8_ROW(0, a0)
    CTN_Q8_ROW(1, a1)
    CTN_Q8_ROW(2, a2)
    CTN_Q8_ROW(3, a3)
    CTN_Q8_ROW(4, a4)
    CTN_Q8_ROW(5, a5)
  }
  CTN_Q8_STORE(0)
  CTN_Q8_STORE(1)
  CTN_Q8_STORE(2)
  CTN_Q8_STORE(3)
  CTN_Q8_STORE(4)
  CTN_Q8_STORE(5)
}
#undef CTN_Q8_ROW
#undef CTN_Q8_STORE

void tile_q8_vnni(const IgemmQ8Operands &op, int64_t m0, int64_t mb, int64_t n0, int32_t *acc) {
  const int64_t left = op.n - n0;
  if (left > 48)
    tile_q8_vnni_n<4>(op, m0, mb, n0, acc);
  else if (left > 32)
    tile_q8_vnni_n<3>(op, m0, mb, n0, acc);
  else if (left > 16)
    tile_q8_vnni_n<2>(op, m0, mb, n0, acc);
  else
    tile_q8_vnni_n<1>(op, m0, mb, n0, acc);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) int32_t rowsum_q8_vnni(const int8_t *w, int64_t k) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i acc = _mm512_setzero_si512();
  for (int64_t j = 0; j < k; j += 64) {
    const __mmask64 m = k - j >= 64 ? ~__mmask64{0} : (__mmask64{1} << (k - j)) - 1;
    acc = _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(m, w + j));
  }
  alignas(64) int32_t lanes[16];  // not _mm512_reduce_add_epi32: gcc 12 warns about its undefined halves
  _mm512_store_si512(lanes, acc);
  int32_t sum = 0;
  for (int32_t v : lanes) sum += v;
  return sum;
}

// AVX2: 16 columns at a time (two ymm per row), so that the 8 accumulators stay in registers.
__attribute__((target("avx2"))) void tile_avx2(const IgemmOperands &op, int64_t m0, int64_t mb, int64_t n0,
                                               int32_t *acc) {
  const int16_t *a[kIgMr];
  for (int64_t i = 0; i < kIgMr; ++i) a[i] = a_row(op, m0, mb, i);
  for (int64_t j = 0; j < kIgNr; j += 16) {
    __m256i c[kIgMr][2];
    for (auto &row : c) row[0] = row[1] = _mm256_setzero_si256();
    for (int64_t kp = 0; kp < op.kp2; ++kp) {
      const int16_t *b = op.b + (kp * op.ldb + n0 + j) * 2;
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + 16));
      for (int64_t i = 0; i < kIgMr; ++i) {
        const __m256i av = _mm256_set1_epi32(pair_of(a[i] + 2 * kp));
        c[i][0] = _mm256_add_epi32(c[i][0], _mm256_madd_epi16(av, b0));
        c[i][1] = _mm256_add_epi32(c[i][1], _mm256_madd_epi16(av, b1));
      }
    }
    for (int64_t i = 0; i < kIgMr; ++i) {
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc + i * kIgNr + j), c[i][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc + i * kIgNr + j + 8), c[i][1]);
    }
  }
}
#endif

}  // namespace

IgemmTileFn igemm_tile_select(const char *cap, const char **name) {
  const char *which = "generic";
  IgemmTileFn fn = tile_generic;
#if defined(__x86_64__)
  const bool any = !cap || !std::strcmp(cap, "avx512"), avx2 = any || !std::strcmp(cap, "avx2");
  if (!any && !avx2) {
    // capped at the portable kernel
  } else if (any && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni")) {
    which = "avx512_vnni";
    fn = tile_avx512_vnni;
  } else if (any && __builtin_cpu_supports("avx512bw")) {
    which = "avx512bw";
    fn = tile_avx512bw;
  } else if (__builtin_cpu_supports("avx2")) {
    which = "avx2";
    fn = tile_avx2;
  }
#else
  (void)cap;
#endif
  if (name) *name = which;
  return fn;
}

int32_t igemm_q8_rowsum(const int8_t *w, int64_t k) {
#if defined(__x86_64__)
  return rowsum_q8_vnni(w, k);
#else
  int32_t s = 0;
  for (int64_t j = 0; j < k; ++j) s += w[j];
  return s;
#endif
}

IgemmQ8TileFn igemm_q8_tile_select(const char *cap) {
#if defined(__x86_64__)
  if ((!cap || !std::strcmp(cap, "avx512")) && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    return tile_q8_vnni;
#else
  (void)cap;
#endif
  return nullptr;
}

}  // namespace ctn_cpu
