// Shared by the quantization kernels (k_quant.cpp, k_qlinear.cpp): 8-bit rounding and the
// integer product makers.
#ifndef CTN_CPU_K_QUANT_H
#define CTN_CPU_K_QUANT_H

#include <algorithm>
#include <type_traits>

#include "cpu_backend.h"

namespace ctn_cpu {

template <class Q>
constexpr int32_t qmin() {
  return std::is_same_v<Q, uint8_t> ? 0 : -128;
}
template <class Q>
constexpr int32_t qmax() {
  return std::is_same_v<Q, uint8_t> ? 255 : 127;
}

// saturate(round_half_even(v) + zp) for the 8-bit Q: v is clamped first (to the bounds less zp,
// integers, so the order does not matter), then rounded by the 1.5 * 2^mantissa trick, which
// rounds to nearest even in the default rounding mode. NaN gives the upper bound.
// Round half to even of a value already clamped to |v| < 2^22.
template <class F>
inline int32_t round_clamped(F v) {
  constexpr F magic = sizeof(F) == 4 ? F(12582912.0) : F(6755399441055744.0);
  return static_cast<int32_t>((v + magic) - magic);
}

template <class Q, class F>
inline Q saturate_round(F v, int32_t zp) {
  const F lo = static_cast<F>(qmin<Q>() - zp), hi = static_cast<F>(qmax<Q>() - zp);
  return static_cast<Q>(round_clamped(std::max(lo, std::min(hi, v))) + zp);
}

// Reads element k of an integer tensor of dtype dt (u8, i8, i32) as i32.
inline int32_t int_at(const ctn_tensor_desc &d, int64_t k) {
  switch (d.dtype) {
    case CTN_U8: return desc_ptr<const uint8_t>(d)[k];
    case CTN_I8: return desc_ptr<const int8_t>(d)[k];
    default: return desc_ptr<const int32_t>(d)[k];
  }
}

// matmul_integer / qlinear_matmul (qlinear: the 8-input form) and conv2d_integer /
// qlinear_conv2d (k_qlinear.cpp); the signature is checked by the core's inference.
ctn_status make_int_matmul(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool qlinear);
ctn_status make_int_conv(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool qlinear);

}  // namespace ctn_cpu

#endif
