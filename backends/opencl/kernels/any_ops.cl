/* Kernels that only move bits or convert between dtypes, compiled once. Element types by size:
 * u8 (uchar), u16 (ushort), u32 (uint), u64 (ulong). CTN_HAVE_FP64 is defined when the device has cl_khr_fp64. */

/* bcast_off (float_ops.cl, which the program holds before this file): the element offset of
 * flat index i of a strided walk. */

/* gather: dst[i] = src[base + walk(i)] (permute, slice, broadcast_to); scatter: the reverse
 * (slice_grad, after the host clears the destination). meta = shape[nd], stride[nd]. */
#define CTN_WALK(E, S)                                                                          \
  __kernel void gather_##S(long n, int nd, __global const long *meta, long base,               \
                           __global const E *src, long so, __global E *dst, long dso) {        \
    for (long i = get_global_id(0); i < n; i += get_global_size(0))                            \
      dst[dso + i] = src[so + base + bcast_off(i, nd, meta, meta + nd)];                       \
  }                                                                                             \
  __kernel void scatter_##S(long n, int nd, __global const long *meta, long base,              \
                            __global const E *src, long so, __global E *dst, long dso) {       \
    for (long i = get_global_id(0); i < n; i += get_global_size(0))                            \
      dst[dso + base + bcast_off(i, nd, meta, meta + nd)] = src[so + i];                       \
  }                                                                                             \
  __kernel void where_##S(long n, int nd, __global const long *meta, int mc, int ma, int mb,   \
                          __global const uchar *c, long co, __global const E *a, long ao,      \
                          __global const E *b, long bo, __global E *y, long yo) {              \
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {                          \
      long ic = mc == 0 ? i : mc == 1 ? 0 : bcast_off(i, nd, meta, meta + nd);                 \
      long ia = ma == 0 ? i : ma == 1 ? 0 : bcast_off(i, nd, meta, meta + 2 * nd);             \
      long ib = mb == 0 ? i : mb == 1 ? 0 : bcast_off(i, nd, meta, meta + 3 * nd);             \
      y[yo + i] = c[co + ic] ? a[ao + ia] : b[bo + ib];                                        \
    }                                                                                           \
  }
CTN_WALK(uchar, u8)
CTN_WALK(ushort, u16)
CTN_WALK(uint, u32)
CTN_WALK(ulong, u64)
#undef CTN_WALK

/* comparisons of integer dtypes (f32/f64 live in the float template): elements of E loaded as C
 * by LD(p, i). CTN_CMP stays defined: half_ops.cl instantiates it for f16 and bf16. */
#define CTN_LD_ELEM(p, i) (p)[i]
#define CTN_CMP(E, S, C, LD)                                                                    \
  __kernel void compare_##S(int op, long n, int nd, __global const long *meta, int ma, int mb, \
                            __global const E *a, long ao, __global const E *b, long bo,        \
                            __global uchar *y, long yo) {                                      \
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {                          \
      long ia = ma == 0 ? i : ma == 1 ? 0 : bcast_off(i, nd, meta, meta + nd);                 \
      long ib = mb == 0 ? i : mb == 1 ? 0 : bcast_off(i, nd, meta, meta + 2 * nd);             \
      C u = LD(a, ao + ia), v = LD(b, bo + ib);                                                 \
      int r = 0;                                                                                \
      switch (op) {                                                                             \
        case CTN_EW_EQ: r = u == v; break;                                                              \
        case CTN_EW_NE: r = u != v; break;                                                              \
        case CTN_EW_LT: r = u < v; break;                                                               \
        case CTN_EW_LE: r = u <= v; break;                                                              \
        case CTN_EW_GT: r = u > v; break;                                                               \
        case CTN_EW_GE: r = u >= v; break;                                                      \
      }                                                                                         \
      y[yo + i] = (uchar)r;                                                                     \
    }                                                                                           \
  }
CTN_CMP(int, i32, int, CTN_LD_ELEM)
CTN_CMP(long, i64, long, CTN_LD_ELEM)
CTN_CMP(uchar, u8, uchar, CTN_LD_ELEM)

/* casts: float -> integer saturates toward zero with NaN -> 0 (the CPU backend's rule);
 * anything -> bool is x != 0. CONV is the conversion expression of `v`. */
#define CTN_CAST(FROM, FS, TO, TS, CONV)                                                        \
  __kernel void cast_##FS##_##TS(long n, __global const FROM *x, long xo, __global TO *y,      \
                                 long yo) {                                                     \
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) {                          \
      FROM v = x[xo + i];                                                                       \
      y[yo + i] = CONV;                                                                         \
    }                                                                                           \
  }
#define CTN_CAST_TO_ALL_INT(FROM, FS, SAT)                                                      \
  CTN_CAST(FROM, FS, int, i32, convert_int##SAT(v))                                             \
  CTN_CAST(FROM, FS, long, i64, convert_long##SAT(v))                                           \
  CTN_CAST(FROM, FS, uchar, u8, convert_uchar##SAT(v))                                          \
  CTN_CAST(FROM, FS, uchar, bool, (uchar)(v != (FROM)0))

CTN_CAST_TO_ALL_INT(float, f32, _sat_rtz)
CTN_CAST_TO_ALL_INT(int, i32, )
CTN_CAST_TO_ALL_INT(long, i64, )
CTN_CAST_TO_ALL_INT(uchar, u8, )
CTN_CAST_TO_ALL_INT(uchar, bool, )
CTN_CAST(int, i32, float, f32, convert_float(v))
CTN_CAST(long, i64, float, f32, convert_float(v))
CTN_CAST(uchar, u8, float, f32, convert_float(v))
CTN_CAST(uchar, bool, float, f32, convert_float(v != 0))
#ifdef CTN_HAVE_FP64
CTN_CAST_TO_ALL_INT(double, f64, _sat_rtz)
CTN_CAST(float, f32, double, f64, convert_double(v))
CTN_CAST(double, f64, float, f32, convert_float(v))
CTN_CAST(int, i32, double, f64, convert_double(v))
CTN_CAST(long, i64, double, f64, convert_double(v))
CTN_CAST(uchar, u8, double, f64, convert_double(v))
CTN_CAST(uchar, bool, double, f64, convert_double(v != 0))
#endif
#undef CTN_CAST_TO_ALL_INT
#undef CTN_CAST
