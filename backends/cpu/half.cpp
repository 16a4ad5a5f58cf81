// Array conversions between f32 and the 16-bit floats, one variant per instruction set (half.h).
#include "half.h"

#include <cstring>

#include "x86_simd.h"

namespace ctn_cpu {
namespace {

void f16_to_f32_generic(const uint16_t *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ctn_desc_f16_to_f32(x[i]);
}
void bf16_to_f32_generic(const uint16_t *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ctn_desc_bf16_to_f32(x[i]);
}
void f32_to_f16_generic(const float *x, uint16_t *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ctn_desc_f32_to_f16(x[i]);
}
void f32_to_bf16_generic(const float *x, uint16_t *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ctn_desc_f32_to_bf16(x[i]);
}

const HalfIsa kGeneric = {"generic", f16_to_f32_generic, bf16_to_f32_generic, f32_to_f16_generic,
                          f32_to_bf16_generic};

#if defined(__x86_64__)
// The vector loops: full vectors, then the generic code for the tail.
#define CTN_HALF_LOOP(W, generic, body) \
  int64_t i = 0;                        \
  for (; i + (W) <= n; i += (W)) body;  \
  generic(x + i, y + i, n - i);

// ---- AVX-512 (F16C's conversions are part of AVX512F) -------------------------------------------
__attribute__((target("avx512f"))) void f16_to_f32_avx512(const uint16_t *x, float *y, int64_t n) {
  CTN_HALF_LOOP(16, f16_to_f32_generic, {
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i))));
  })
}
__attribute__((target("avx512f"))) void f32_to_f16_avx512(const float *x, uint16_t *y, int64_t n) {
  CTN_HALF_LOOP(16, f32_to_f16_generic, {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  })
}
__attribute__((target("avx512f"))) void bf16_to_f32_avx512(const uint16_t *x, float *y, int64_t n) {
  CTN_HALF_LOOP(16, bf16_to_f32_generic, {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(w, 16));
  })
}
// Integer round-to-nearest-even (x + 0x7fff + lsb) >> 16; NaN -> its top half, made quiet.
__attribute__((target("avx512f"))) void f32_to_bf16_avx512(const float *x, uint16_t *y, int64_t n) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  CTN_HALF_LOOP(16, f32_to_bf16_generic, {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(y + i), _mm512_cvtepi32_epi16(r));
  })
}
// AVX512_BF16's own rounding instruction (round to nearest even, NaN quiet, f32 subnormals
// flushed to zero).
__attribute__((target("avx512f,avx512bf16"))) void f32_to_bf16_avx512bf16(const float *x, uint16_t *y, int64_t n) {
  CTN_HALF_LOOP(16, f32_to_bf16_generic, {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    std::memcpy(y + i, &h, sizeof h);
  })
}

// ---- AVX2 + F16C ---------------------------------------------------------------------------------
__attribute__((target("avx2,fma,f16c"))) void f16_to_f32_avx2(const uint16_t *x, float *y, int64_t n) {
  CTN_HALF_LOOP(8, f16_to_f32_generic, {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x + i))));
  })
}
__attribute__((target("avx2,fma,f16c"))) void f32_to_f16_avx2(const float *x, uint16_t *y, int64_t n) {
  CTN_HALF_LOOP(8, f32_to_f16_generic, {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  })
}
__attribute__((target("avx2,fma,f16c"))) void bf16_to_f32_avx2(const uint16_t *x, float *y, int64_t n) {
  CTN_HALF_LOOP(8, bf16_to_f32_generic, {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(y + i), _mm256_slli_epi32(w, 16));
  })
}
__attribute__((target("avx2,fma,f16c"))) void f32_to_bf16_avx2(const float *x, uint16_t *y, int64_t n) {
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  CTN_HALF_LOOP(8, f32_to_bf16_generic, {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256i u = _mm256_castps_si256(v);
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet), nan);
    // packus works per 128-bit lane: [r0..3 r0..3 r4..7 r4..7]; quadwords 0 and 2 hold r0..7.
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), _mm256_castsi256_si128(p));
  })
}
#undef CTN_HALF_LOOP

const HalfIsa kAvx512 = {"avx512", f16_to_f32_avx512, bf16_to_f32_avx512, f32_to_f16_avx512,
                         f32_to_bf16_avx512};
const HalfIsa kAvx512Bf16 = {"avx512_bf16", f16_to_f32_avx512, bf16_to_f32_avx512,
                             f32_to_f16_avx512, f32_to_bf16_avx512bf16};
const HalfIsa kAvx2 = {"avx2", f16_to_f32_avx2, bf16_to_f32_avx2, f32_to_f16_avx2, f32_to_bf16_avx2};
#endif

}  // namespace

#if defined(__x86_64__)
// CPUID.1:ECX.F16C (clang's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

const HalfIsa *half_variant(const char *name) {
  if (!std::strcmp(name, "generic")) return &kGeneric;
#if defined(__x86_64__)
  if (!std::strcmp(name, "avx512_bf16") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    return &kAvx512Bf16;
  if (!std::strcmp(name, "avx512") && __builtin_cpu_supports("avx512f")) return &kAvx512;
  // Every AVX2 CPU has F16C (Haswell, Zen); checked anyway, the check is cheap.
  if (!std::strcmp(name, "avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
    return &kAvx2;
#endif
  return nullptr;
}

const HalfIsa &half_for(const char *isa_name) {
  const HalfIsa *v = nullptr;
  if (isa_name && !std::strcmp(isa_name, "avx512")) {
    v = half_variant("avx512_bf16");
    if (!v) v = half_variant("avx512");
  } else if (isa_name && !std::strcmp(isa_name, "avx2")) {
    v = half_variant("avx2");
  }
  return v ? *v : kGeneric;
}

}  // namespace ctn_cpu
