// Vectorised f32 exp, log, tanh, sigmoid (vmath.h). One always-inline body per function over a
// GCC vector of W floats; each ISA's array loop is a target-attributed wrapper that instantiates
// the bodies for its own vector width, so there are no intrinsics to guard: the same source
// builds on x86-64, aarch64 and 32-bit ARM.
//
// Methods (classic ones, coefficients are Taylor series unless noted):
//  exp:  n = round(x / ln 2), r = x - n ln 2 (Cody-Waite, ln 2 split in two), e^r by its degree-7
//        Taylor polynomial (|r| <= 0.347: truncation < 6e-9 relative), times 2^n built in the
//        exponent bits as two factors 2^(n/2) so that subnormal results round once.
//  log:  x = m 2^e, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
//        log(1 + f) = 2s + 2s (s^2/3 + s^4/5 + ...) arranged as in fdlibm's logf to keep the
//        leading term exact; + e ln 2 (split).
//  tanh: |x| < 0.625: x + x^3 P(x^2), a degree-4 minimax polynomial (Cephes tanhf's
//        coefficients); above: 1 - 2 / (e^(2|x|) + 1) with the sign of x.
//  sigmoid: 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (no overflow, accurate tails).
#include "isa_variant.h"
#include "vmath.h"

#include <cstring>

// The bodies pass vectors by value: every one is always-inline and file-local, so the warning that
// a 256/512-bit vector argument's ABI depends on the ISA does not concern them.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ctn_cpu {
namespace {

#define CTN_VM_INLINE inline __attribute__((always_inline))

template <int W>
struct Vec {
  typedef float F __attribute__((vector_size(W * sizeof(float))));
  typedef int32_t I __attribute__((vector_size(W * sizeof(float))));
};

template <int W>
CTN_VM_INLINE typename Vec<W>::F splat(float v) {
  typename Vec<W>::F r = {};
  return r + v;
}

template <int W>
CTN_VM_INLINE typename Vec<W>::F vexp(typename Vec<W>::F x) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  const F lo = splat<W>(-104.0f), hi = splat<W>(89.0f);
  F xc = x < lo ? lo : x;  // NaN compares false both times and stays NaN
  xc = xc > hi ? hi : xc;
  const F magic = splat<W>(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  F t = xc * 1.44269504088896341f + magic;
  const F nf = t - magic;
  F r = xc - nf * 0.693359375f;  // ln 2 = 0.693359375 - 2.12194440e-4 (the first part exact in n * it)
  r = r + nf * 2.12194440e-4f;
  F p = splat<W>(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  I n = __builtin_convertvector(nf == nf ? nf : splat<W>(0.0f), I);  // n in [-150, 128]
  I n1 = n >> 1, n2 = n - n1;                                       // each in [-75, 64]
  F s1 = (F)((n1 + 127) << 23), s2 = (F)((n2 + 127) << 23);
  F y = p * s1 * s2;
  return x == x ? y : x;
}

template <int W>
CTN_VM_INLINE typename Vec<W>::F vlog(typename Vec<W>::F x) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  const F zero = splat<W>(0.0f);
  // Subnormals: scale into the normal range first.
  const I sub = x < 1.17549435e-38f;
  F xs = sub ? x * 8388608.0f : x;
  I bits = (I)xs;
  I e = ((bits >> 23) & 0xff) - 127;
  e = sub ? e - 23 : e;
  F m = (F)((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const I big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1 : e;
  const F f = m - 1.0f;  // exact
  const F s = f / (f + 2.0f);
  const F z = s * s;
  F R = splat<W>(2.0f / 9.0f);
  R = R * z + 2.0f / 7.0f;
  R = R * z + 2.0f / 5.0f;
  R = R * z + 2.0f / 3.0f;
  R = R * z;
  const F hfsq = 0.5f * f * f;
  const F dk = __builtin_convertvector(e, F);
  // fdlibm: dk*ln2_hi - ((hfsq - (s*(hfsq+R) + dk*ln2_lo)) - f)
  F y = dk * 6.9313812256e-01f - ((hfsq - (s * (hfsq + R) + dk * 9.0580006145e-06f)) - f);
  const F inf = splat<W>(__builtin_inff()), nan = splat<W>(__builtin_nanf(""));
  y = x == zero ? -inf : y;
  y = x < zero ? nan : y;
  y = x == inf ? inf : y;
  return x == x ? y : x;
}

template <int W>
CTN_VM_INLINE typename Vec<W>::F vtanh(typename Vec<W>::F x) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  const I sign = (I)x & (int32_t)0x80000000;
  const F a = (F)((I)x & 0x7fffffff);
  // |x| < 0.625
  const F z = x * x;
  F P = splat<W>(-5.70498872745e-3f);
  P = P * z + 2.06390887954e-2f;
  P = P * z - 5.37397155531e-2f;
  P = P * z + 1.33314422036e-1f;
  P = P * z - 3.33332819422e-1f;
  const F small = (F)((I)(a + a * (z * P)) | sign);  // on |x|, then the sign: tanh(-0) = -0
  // |x| >= 0.625 (and NaN: exp(NaN) is NaN)
  const F e = vexp<W>(a + a);
  const F large = (F)((I)(1.0f - 2.0f / (e + 1.0f)) | sign);
  return a < 0.625f ? small : large;
}

template <int W>
CTN_VM_INLINE typename Vec<W>::F vsigmoid(typename Vec<W>::F x) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  const F a = (F)((I)x & 0x7fffffff);
  const F e = vexp<W>(-a);  // in (0, 1]
  const F one = splat<W>(1.0f);
  return (x >= 0.0f ? one : e) / (one + e);
}

// The array loop: whole vectors, then the tail through a padded vector (padding 1.0f).
template <int W, class Body>
CTN_VM_INLINE void run_array(const float *x, float *y, int64_t n, Body body) {
  using F = typename Vec<W>::F;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    F v;
    std::memcpy(&v, x + i, sizeof v);
    v = body(v);
    std::memcpy(y + i, &v, sizeof v);
  }
  if (i < n) {
    float buf[W];
    for (int k = 0; k < W; ++k) buf[k] = i + k < n ? x[i + k] : 1.0f;
    F v;
    std::memcpy(&v, buf, sizeof v);
    v = body(v);
    std::memcpy(buf, &v, sizeof v);
    for (int64_t k = 0; i + k < n; ++k) y[i + k] = buf[k];
  }
}

// Lanes of each variant's vectors (32-bit floats per register).
constexpr int kLanes_avx512 = 16, kLanes_avx2 = 8, kLanes_generic = 4;

#define CTN_VM_VARIANT(SUFFIX, TARGET)                                                               \
  static constexpr int W_##SUFFIX = kLanes_##SUFFIX;                                                 \
  TARGET void exp_##SUFFIX(const float *x, float *y, int64_t n) {                                   \
    run_array<W_##SUFFIX>(x, y, n, [](Vec<W_##SUFFIX>::F v) __attribute__((always_inline)) { return vexp<W_##SUFFIX>(v); });\
  }                                                                                                  \
  TARGET void log_##SUFFIX(const float *x, float *y, int64_t n) {                                   \
    run_array<W_##SUFFIX>(x, y, n, [](Vec<W_##SUFFIX>::F v) __attribute__((always_inline)) { return vlog<W_##SUFFIX>(v); });\
  }                                                                                                  \
  TARGET void tanh_##SUFFIX(const float *x, float *y, int64_t n) {                                  \
    run_array<W_##SUFFIX>(x, y, n, [](Vec<W_##SUFFIX>::F v) __attribute__((always_inline)) { return vtanh<W_##SUFFIX>(v); });\
  }                                                                                                  \
  TARGET void sigmoid_##SUFFIX(const float *x, float *y, int64_t n) {                               \
    run_array<W_##SUFFIX>(x, y, n, [](Vec<W_##SUFFIX>::F v) __attribute__((always_inline)) { return vsigmoid<W_##SUFFIX>(v); });\
  }

CTN_ISA_VARIANTS(CTN_VM_VARIANT, "avx2,fma")

#if defined(__x86_64__)
const VmathIsa kAvx512 = {"avx512", exp_avx512, log_avx512, tanh_avx512, sigmoid_avx512};
const VmathIsa kAvx2 = {"avx2", exp_avx2, log_avx2, tanh_avx2, sigmoid_avx2};
#endif
const VmathIsa kGeneric = {"generic", exp_generic, log_generic, tanh_generic, sigmoid_generic};

}  // namespace

const VmathIsa &vmath_for(const char *isa_name) {
#if defined(__x86_64__)
  if (isa_name && std::strcmp(isa_name, "avx512") == 0) return kAvx512;
  if (isa_name && std::strcmp(isa_name, "avx2") == 0) return kAvx2;
#endif
  (void)isa_name;
  return kGeneric;
}

}  // namespace ctn_cpu
