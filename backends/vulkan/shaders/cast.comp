#version 450
// cast between any two dtypes, as the CPU backend does: float -> integer truncates toward zero
// and saturates (NaN -> 0), to bool is x != 0, integer -> integer wraps (two's complement). Data
// is read and written as 32-bit words: bytes are unpacked by shifts, i64 is a (lo, hi) pair, so
// no 8-bit or 64-bit integer shader feature is needed. One invocation writes one output word.
// The intermediate for floating values is double when USE_F64, float otherwise. With -DHALF16
// (devices with storageBuffer16BitAccess) f16 and bf16 operands are bound as 16-bit elements at
// bindings 2 (source) and 3 (destination) instead of 0 and 1; a 16-bit destination gets one
// rounding (through f32 rounded to odd from double).
#include "common.glsl"

layout(constant_id = 2) const int SRC = 0;  // ctn_dtype
layout(constant_id = 3) const int DST = 0;

layout(std430, binding = 0) readonly buffer B0 { uint src[]; };
layout(std430, binding = 1) buffer B1 { uint dst[]; };

#ifdef USE_F64
#define F double
#else
#define F float
#endif

const int F32 = 0, F64 = 1, I32 = 2, I64 = 3, U8 = 4, BOOL = 5, F16 = 6, BF16 = 7;

#ifdef HALF16
#include "half.glsl"
layout(std430, binding = 2) readonly buffer B2 { uint16_t src16[]; };
layout(std430, binding = 3) writeonly buffer B3 { uint16_t dst16[]; };

// x rounded once to DST (f16 or bf16), as bits.
uint to16(F x) {
#ifdef USE_F64
  // f64 -> f32 rounded to odd: the second rounding, to 16 bits, is then the correct one.
  float f = float(x);
  if (double(f) != x && !isnan(x)) {
    uint u = floatBitsToUint(f);
    if (abs(double(f)) > abs(x)) u -= 1u;
    f = uintBitsToFloat(u | 1u);
  }
#else
  float f = x;
#endif
  return DST == F16 ? f16_bits(f) : bf16_bits(f);
}
#endif

uint src_byte(uint e) {
  uint b = pc.off[0] * 4u + e;
  return (src[b >> 2] >> (8u * (b & 3u))) & 0xffu;
}

bool src_is_float() { return SRC == F32 || SRC == F64 || SRC == F16 || SRC == BF16; }

F src_float(uint e) {
#ifdef HALF16
  if (SRC == F16) return F(f16_load(uint(src16[pc.off[2] + e])));
  if (SRC == BF16) return F(bf16_load(uint(src16[pc.off[2] + e])));
#endif
#ifdef USE_F64
  if (SRC == F64) return packDouble2x32(uvec2(src[pc.off[0] + 2u * e], src[pc.off[0] + 2u * e + 1u]));
#endif
  return F(uintBitsToFloat(src[pc.off[0] + e]));
}

// Integer sources as 64-bit two's complement (lo, hi).
uvec2 src_int(uint e) {
  if (SRC == I64) return uvec2(src[pc.off[0] + 2u * e], src[pc.off[0] + 2u * e + 1u]);
  if (SRC == I32) {
    uint v = src[pc.off[0] + e];
    return uvec2(v, int(v) < 0 ? 0xffffffffu : 0u);
  }
  return uvec2(src_byte(e), 0u);
}

#ifdef HALF16
// A 64-bit two's complement integer as f32 rounded to odd (the 24 leading bits, the last one set
// when any bit below is): narrowing that to 16 bits rounds the integer once (through double,
// i64 past 2^53 would round twice).
float int_to_float_odd(uvec2 v) {
  const bool neg = int(v.y) < 0;
  if (neg) v = uvec2(~v.x + 1u, ~v.y + (v.x == 0u ? 1u : 0u));  // the magnitude (2^63 stays)
  const int top = v.y != 0u ? 32 + findMSB(v.y) : findMSB(v.x);
  if (top < 24) return neg ? -float(v.x) : float(v.x);  // exact (0 included: findMSB(0) = -1)
  const uint s = uint(top - 23);
  uint mant, rest;
  if (s >= 32u) {
    const uint t = s - 32u;
    mant = v.y >> t;
    rest = v.x | (t > 0u ? v.y & ((1u << t) - 1u) : 0u);
  } else {
    mant = (v.x >> s) | (v.y << (32u - s));
    rest = v.x & ((1u << s) - 1u);
  }
  const float f = float(mant | (rest != 0u ? 1u : 0u)) * exp2(float(s));
  return neg ? -f : f;
}
#endif

F int_to_float(uvec2 v) {
  // Values that fit 32 bits convert in one rounding step.
  if (v.y == 0u) return F(v.x);
  if (v.y == 0xffffffffu && int(v.x) < 0) return F(int(v.x));
  return F(int(v.y)) * F(4294967296.0) + F(v.x);
}

// Float -> 64-bit integer words, saturating to [lo, hi] (given as floats exactly representable).
uvec2 float_to_int(F x, F lo, F hi) {
  if (isnan(x)) return uvec2(0u);
  if (x <= lo) x = lo;
  if (x >= hi) x = hi;
  F t = trunc(x);
  // Within the int range convert directly: in float, t - h * 2^32 for a small negative t rounds
  // to 2^32 (this broke f32 -> i32/i64 of negative values on devices without shaderFloat64).
  // Beyond it a float is a multiple of 256, so the split below is exact.
  if (abs(t) < F(2147483648.0)) {
    int i = int(t);
    return uvec2(uint(i), i < 0 ? 0xffffffffu : 0u);
  }
  F h = floor(t / F(4294967296.0));
  F l = t - h * F(4294967296.0);
  return uvec2(uint(l), uint(int(h)));
}

void main() {
  uint w = invocation_linear();
  const int osize = DST == F64 || DST == I64 ? 8 : DST == U8 || DST == BOOL ? 1 : DST == F16 || DST == BF16 ? 2 : 4;
  uint per = osize == 1 ? 4u : 1u;
  uint first = w * per;
  if (first >= pc.count) return;
  uint word = 0u, mask = 0u;
  for (uint t = 0u; t < per && first + t < pc.count; ++t) {
    uint e = first + t;
    uint out_lo = 0u, out_hi = 0u;
    if (src_is_float()) {
      F x = src_float(e);
#ifdef HALF16
      if (osize == 2) {
        dst16[pc.off[3] + e] = uint16_t(to16(x));
        continue;
      }
#endif
      if (DST == F32) out_lo = floatBitsToUint(float(x));
#ifdef USE_F64
      else if (DST == F64) {
        uvec2 u = unpackDouble2x32(double(x));
        out_lo = u.x;
        out_hi = u.y;
      }
#endif
      else if (DST == BOOL) out_lo = x != F(0) ? 1u : 0u;
      else if (DST == I32) out_lo = float_to_int(x, F(-2147483648.0), F(2147483647.0)).x;
      else if (DST == U8) out_lo = float_to_int(x, F(0.0), F(255.0)).x;
      else {
        // i64: saturate at +-2^63 (the largest float below 2^63 for the upper bound).
        if (isnan(x)) {
        } else if (x >= F(9223372036854775807.0)) {
          out_lo = 0xffffffffu;
          out_hi = 0x7fffffffu;
        } else if (x <= F(-9223372036854775808.0)) {
          out_hi = 0x80000000u;
        } else {
          uvec2 v = float_to_int(x, F(-9223372036854775808.0), F(9223372036854775807.0));
          out_lo = v.x;
          out_hi = v.y;
        }
      }
    } else {
      uvec2 v = src_int(e);
#ifdef HALF16
      if (osize == 2) {
        dst16[pc.off[3] + e] = uint16_t(to16(F(int_to_float_odd(v))));
        continue;
      }
#endif
      if (DST == F32) out_lo = floatBitsToUint(float(int_to_float(v)));
#ifdef USE_F64
      else if (DST == F64) {
        uvec2 u = unpackDouble2x32(double(int_to_float(v)));
        out_lo = u.x;
        out_hi = u.y;
      }
#endif
      else if (DST == BOOL) out_lo = (v.x | v.y) != 0u ? 1u : 0u;
      else if (DST == U8) out_lo = v.x & 0xffu;
      else {
        out_lo = v.x;
        out_hi = v.y;
      }
    }
    if (osize == 1) {
      word |= (out_lo & 0xffu) << (8u * t);
      mask |= 0xffu << (8u * t);
    } else if (osize == 8) {
      dst[pc.off[1] + 2u * e] = out_lo;
      dst[pc.off[1] + 2u * e + 1u] = out_hi;
    } else {
      dst[pc.off[1] + e] = out_lo;
    }
  }
  if (osize == 1) {
    uint di = pc.off[1] + w;
    dst[di] = mask == 0xffffffffu ? word : ((dst[di] & ~mask) | word);
  }
}
