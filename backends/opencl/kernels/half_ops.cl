/* The 16-bit floats (since 1.5): f16 and bf16 tensors of the elementwise ops, comparisons and
 * casts. The program holds this file after float_ops.cl (the f32 instance: ew_unary_f32,
 * ew_binary_f32) and any_ops.cl (CTN_CMP).
 *
 * Storage: f16 through vload_half / vstore_half_rte (core OpenCL 1.2: every device), bf16 as
 * ushort, widened by a shift and narrowed to nearest even in ctn_bf16_bits (desc.h's rule).
 * Arithmetic: the formulas of backends/common/ew_ops.py in f32, one rounding to the 16-bit type
 * at the store. With cl_khr_fp16 (CTN_HAVE_FP16) the ops whose formula is exact arithmetic
 * (the CTN_EW_CASES_*_INT groups: neg, abs, sign, relu, add, sub, mul, maximum, minimum) run in
 * native half on f16 data; the transcendental ones stay in f32, which keeps them within the f16
 * rounding of the exact result. */

inline float ctn_bf16_load(ushort h) { return as_float((uint)h << 16); }
inline ushort ctn_bf16_bits(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u); /* quiet NaN */
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
/* Integers to f32 rounded to odd (exact values stay, others get their last bit set): the
 * narrowing to 16 bits that follows then rounds the integer once, not twice. */
inline float ctn_float_odd(long v) {
  float f = convert_float_rtz(v);
  return (long)f == v ? f : as_float(as_uint(f) | 1u);
}

#define CTN_LD_f16(p, i) vload_half((i), (p))
#define CTN_ST_f16(v, p, i) vstore_half_rte((v), (i), (p))
#define CTN_LD_bf16(p, i) ctn_bf16_load((p)[i])
#define CTN_ST_bf16(v, p, i) ((p)[i] = ctn_bf16_bits(v))

/* The f16 ops: exact ones in native half where the device has it, the rest in f32. */
inline float ew_unary_f16(int op, float xf, float f0, float f1) {
#ifdef CTN_HAVE_FP16
#define T half
  const half x = (half)xf;
  switch (op) { CTN_EW_CASES_UNARY_INT(x, (half)f0, (half)f1) }
#undef T
#endif
  return ew_unary_f32(op, xf, f0, f1);
}
inline float ew_binary_f16(int op, float af, float bf, float f0, float f1) {
#ifdef CTN_HAVE_FP16
#define T half
  const half a = (half)af, b = (half)bf;
  switch (op) { CTN_EW_CASES_BINARY_INT(a, b, (half)f0, (half)f1) }
#undef T
#endif
  return ew_binary_f32(op, af, bf, f0, f1);
}
#define ew_unary_bf16 ew_unary_f32
#define ew_binary_bf16 ew_binary_f32

/* unary_<S> and binary_<S> with the arguments of float_ops.cl's (f0, f1 as float). */
#define CTN_HALF_EW(S, E)                                                                        \
  __kernel void unary_##S(int op, long n, __global const E *x, long xo, __global E *y, long yo, \
                          float f0, float f1) {                                                  \
    for (long i = get_global_id(0); i < n; i += get_global_size(0))                             \
      CTN_ST_##S(ew_unary_##S(op, CTN_LD_##S(x, xo + i), f0, f1), y, yo + i);                    \
  }                                                                                              \
  __kernel void binary_##S(int op, long n, int nd, __global const long *meta, int ma, int mb,   \
                           __global const E *a, long ao, __global const E *b, long bo,          \
                           __global E *y, long yo, float f0, float f1) {                        \
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {                           \
      long ia = ma == 0 ? i : ma == 1 ? 0 : bcast_off(i, nd, meta, meta + nd);                  \
      long ib = mb == 0 ? i : mb == 1 ? 0 : bcast_off(i, nd, meta, meta + 2 * nd);              \
      float r = ew_binary_##S(op, CTN_LD_##S(a, ao + ia), CTN_LD_##S(b, bo + ib), f0, f1);      \
      CTN_ST_##S(r, y, yo + i);                                                                  \
    }                                                                                            \
  }
CTN_HALF_EW(f16, half)
CTN_HALF_EW(bf16, ushort)
#undef CTN_HALF_EW
/* compare_f16, compare_bf16: any_ops.cl's comparison kernel on the widened values. */
CTN_CMP(half, f16, float, CTN_LD_f16)
CTN_CMP(ushort, bf16, float, CTN_LD_bf16)
#undef CTN_CMP

/* Casts from and to the 16-bit floats, by the rules of any_ops.cl (float -> integer saturates
 * toward zero, NaN -> 0; -> bool is x != 0): a 16-bit source widens exactly to f32 first; a
 * wider source rounds once to the 16-bit type (f64 through f32 rounded to odd, integers through
 * ctn_float_odd). */
#define CTN_CAST16(FROM, FS, TO, TS, CONV)                                                       \
  __kernel void cast_##FS##_##TS(long n, __global const FROM *x, long xo, __global TO *y,       \
                                 long yo) {                                                      \
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) CONV;                       \
  }
#define CTN_CAST_FROM16(S, E)                                                                    \
  CTN_CAST16(E, S, float, f32, y[yo + i] = CTN_LD_##S(x, xo + i))                                \
  CTN_CAST16(E, S, int, i32, y[yo + i] = convert_int_sat_rtz(CTN_LD_##S(x, xo + i)))             \
  CTN_CAST16(E, S, long, i64, y[yo + i] = convert_long_sat_rtz(CTN_LD_##S(x, xo + i)))           \
  CTN_CAST16(E, S, uchar, u8, y[yo + i] = convert_uchar_sat_rtz(CTN_LD_##S(x, xo + i)))          \
  CTN_CAST16(E, S, uchar, bool, y[yo + i] = (uchar)(CTN_LD_##S(x, xo + i) != 0.0f))              \
  CTN_CAST16(float, f32, E, S, CTN_ST_##S(x[xo + i], y, yo + i))                                 \
  CTN_CAST16(int, i32, E, S, CTN_ST_##S(ctn_float_odd(x[xo + i]), y, yo + i))                    \
  CTN_CAST16(long, i64, E, S, CTN_ST_##S(ctn_float_odd(x[xo + i]), y, yo + i))                   \
  CTN_CAST16(uchar, u8, E, S, CTN_ST_##S((float)x[xo + i], y, yo + i))                           \
  CTN_CAST16(uchar, bool, E, S, CTN_ST_##S(x[xo + i] != 0 ? 1.0f : 0.0f, y, yo + i))
CTN_CAST_FROM16(f16, half)
CTN_CAST_FROM16(bf16, ushort)
CTN_CAST16(half, f16, ushort, bf16, CTN_ST_bf16(CTN_LD_f16(x, xo + i), y, yo + i))
CTN_CAST16(ushort, bf16, half, f16, CTN_ST_f16(CTN_LD_bf16(x, xo + i), y, yo + i))
#ifdef CTN_HAVE_FP64
inline float ctn_f32_odd(double d) {
  float f = (float)d;
  if ((double)f == d || isnan(d)) return f;
  uint u = as_uint(f);
  if (fabs((double)f) > fabs(d)) u -= 1u; /* rounded away from zero: the float below */
  return as_float(u | 1u);
}
CTN_CAST16(half, f16, double, f64, y[yo + i] = (double)CTN_LD_f16(x, xo + i))
CTN_CAST16(ushort, bf16, double, f64, y[yo + i] = (double)CTN_LD_bf16(x, xo + i))
CTN_CAST16(double, f64, half, f16, CTN_ST_f16(ctn_f32_odd(x[xo + i]), y, yo + i))
CTN_CAST16(double, f64, ushort, bf16, CTN_ST_bf16(ctn_f32_odd(x[xo + i]), y, yo + i))
#endif
#undef CTN_CAST_FROM16
#undef CTN_CAST16
