/* Floating-point kernels, instantiated once per float type by the plugin's source assembler:
 *   T      the element type (float, double)
 *   FN(n)  the kernel name with its type suffix (n##_f32, n##_f64)
 * OpenCL C 1.2, no subgroups, no fp16; local memory: one ACC per work-item (<= 256 items).
 * Every kernel walks its range with a grid-stride loop, so any global size the host picks is
 * correct. Offsets are in elements. */

/* ---- elementwise unary. Op codes and the switch bodies: CTN_EW_* and CTN_EW_CASES_* from the
 * formulas of backends/common/ew_ops.py (prepended by the host). The switches have no default:
 * the build checks that every code the host table holds has its case, and the host only passes
 * codes from that table. ---- */
inline T FN(ew_unary)(int op, T x, T f0, T f1) {
  switch (op) {
    CTN_EW_CASES_UNARY_INT(x, f0, f1)
    CTN_EW_CASES_UNARY_FLOAT(x, f0, f1)
  }
  return (T)NAN;
}

__kernel void FN(unary)(int op, long n, __global const T *x, long xo, __global T *y, long yo,
                        T f0, T f1) {
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) y[yo + i] = FN(ew_unary)(op, x[xo + i], f0, f1);
}

#ifndef CTN_BCAST_OFF
#define CTN_BCAST_OFF
/* Element offset of flat index i of a shape[nd] walk with per-axis strides str[nd] (any_ops.cl,
 * which the program holds after this file, uses it too). */
inline long bcast_off(long i, int nd, __global const long *shape, __global const long *str) {
  long off = 0;
  for (int k = nd - 1; k >= 0; --k) {
    long s = shape[k], q = i / s;
    off += (i - q * s) * str[k];
    i = q;
  }
  return off;
}
#endif

/* ---- elementwise binary with broadcasting; also the elementwise backward helpers (a: the
 * forward value, b: the upstream gradient) ----
 * ma/mb: 0 same index as the output, 1 one element, 2 strided through meta
 * (meta = shape[nd], stride_a[nd], stride_b[nd]). */
inline T FN(ew_binary)(int op, T a, T b, T f0, T f1) {
  switch (op) {
    CTN_EW_CASES_BINARY_INT(a, b, f0, f1)
    CTN_EW_CASES_BINARY_FLOAT(a, b, f0, f1)
    CTN_EW_CASES_GRAD_FLOAT(a, b, f0, f1)
  }
  return (T)NAN;
}

__kernel void FN(binary)(int op, long n, int nd, __global const long *meta, int ma, int mb,
                         __global const T *a, long ao, __global const T *b, long bo,
                         __global T *y, long yo, T f0, T f1) {
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    long ia = ma == 0 ? i : ma == 1 ? 0 : bcast_off(i, nd, meta, meta + nd);
    long ib = mb == 0 ? i : mb == 1 ? 0 : bcast_off(i, nd, meta, meta + 2 * nd);
    y[yo + i] = FN(ew_binary)(op, a[ao + ia], b[bo + ib], f0, f1);
  }
}

/* ---- comparisons: output bool (uchar) ---- */
__kernel void FN(compare)(int op, long n, int nd, __global const long *meta, int ma, int mb,
                          __global const T *a, long ao, __global const T *b, long bo,
                          __global uchar *y, long yo) {
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    long ia = ma == 0 ? i : ma == 1 ? 0 : bcast_off(i, nd, meta, meta + nd);
    long ib = mb == 0 ? i : mb == 1 ? 0 : bcast_off(i, nd, meta, meta + 2 * nd);
    T u = a[ao + ia], v = b[bo + ib];
    int r = 0;
    switch (op) {
      case CTN_EW_EQ: r = u == v; break;
      case CTN_EW_NE: r = u != v; break;
      case CTN_EW_LT: r = u < v; break;
      case CTN_EW_LE: r = u <= v; break;
      case CTN_EW_GT: r = u > v; break;
      case CTN_EW_GE: r = u >= v; break;
    }
    y[yo + i] = (uchar)r;
  }
}

/* Work-group tree reduction helpers (ls a power of two): NAME(v, s) combines every lane's v of
 * type TYPE with COMBINE(a, b) through local scratch s; every lane gets the result. nn_ops.cl
 * makes its ACC sum with it too. */
#ifndef CTN_WG_REDUCE
#define CTN_WG_REDUCE(NAME, TYPE, COMBINE)                                                       \
  inline TYPE NAME(TYPE v, __local TYPE *s) {                                                    \
    const int lid = get_local_id(0), ls = get_local_size(0);                                     \
    s[lid] = v;                                                                                  \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    for (int k = ls / 2; k > 0; k >>= 1) {                                                       \
      if (lid < k) s[lid] = COMBINE(s[lid], s[lid + k]);                                         \
      barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    }                                                                                            \
    TYPE r = s[0];                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    return r;                                                                                    \
  }
#define CTN_WG_ADD(a, b) ((a) + (b))
#endif
CTN_WG_REDUCE(FN(wg_sum), T, CTN_WG_ADD)
CTN_WG_REDUCE(FN(wg_max), T, fmax)

/* Reductions and the softmax family: reduce_ops.cl (also instantiated for the 16-bit floats). */

/* ---- cross-entropy (labels as long after the host widens i32 with a cast? no: LT below) ----
 * One work-group: each item takes rows lid, lid+ls...; err records a bad label:
 * err[0] = 1, err[1] = row, err[2] = label. */
#define CTN_CE(LT, LS)                                                                          \
  __kernel void FN(ce_##LS)(long N, long C, __global const T *x, long xo,                      \
                            __global const LT *lab, long lo, __global T *y, long yo,           \
                            __global long *err, __local T *scratch) {                          \
    const int lid = get_local_id(0), ls = get_local_size(0);                                    \
    T total = (T)0;                                                                             \
    for (long r = lid; r < N; r += ls) {                                                        \
      long l = (long)lab[lo + r];                                                               \
      if (l < 0 || l >= C) { err[1] = r; err[2] = l; err[0] = 1; continue; }                    \
      __global const T *xr = x + xo + r * C;                                                    \
      T m = (T)(-INFINITY);                                                                     \
      for (long j = 0; j < C; ++j) m = fmax(m, xr[j]);                                          \
      T s = (T)0;                                                                               \
      for (long j = 0; j < C; ++j) s += exp(xr[j] - m);                                         \
      total += m + log(s) - xr[l];                                                              \
    }                                                                                           \
    total = FN(wg_sum)(total, scratch);                                                         \
    if (lid == 0) y[yo] = N ? total / (T)N : (T)NAN;                                            \
  }                                                                                             \
  __kernel void FN(ce_grad_##LS)(long N, long C, __global const T *x, long xo,                 \
                                 __global const LT *lab, long lo, __global const T *dy,        \
                                 long dyo, __global T *y, long yo, __global long *err) {       \
    for (long r = get_global_id(0); r < N; r += get_global_size(0)) {                          \
      long l = (long)lab[lo + r];                                                               \
      if (l < 0 || l >= C) { err[1] = r; err[2] = l; err[0] = 2; continue; }                    \
      T sc = dy[dyo] / (T)N;                                                                    \
      __global const T *xr = x + xo + r * C;                                                    \
      __global T *yr = y + yo + r * C;                                                          \
      T m = (T)(-INFINITY);                                                                     \
      for (long j = 0; j < C; ++j) m = fmax(m, xr[j]);                                          \
      T s = (T)0;                                                                               \
      for (long j = 0; j < C; ++j) s += exp(xr[j] - m);                                         \
      T inv = (T)1 / s;                                                                         \
      for (long j = 0; j < C; ++j) yr[j] = exp(xr[j] - m) * inv * sc;                           \
      yr[l] -= sc;                                                                              \
    }                                                                                           \
  }
CTN_CE(int, i32)
CTN_CE(long, i64)
#undef CTN_CE

/* ---- matmul_bias_act epilogue: y[r, j] = act(y[r, j] + bias[j]) ---- */
__kernel void FN(bias_act)(long total, long ncol, int act, __global T *y, long yo,
                           __global const T *bias, long bo) {
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    T v = y[yo + i] + bias[bo + i % ncol];
    if (act == 1) v = v > (T)0 ? v : (T)0;
    else if (act == 2) v = (T)0.5 * v * ((T)1 + erf(v * (T)0.70710678118654752440));
    y[yo + i] = v;
  }
}

/* ---- optimizer updates (elementwise; lr and step are 0-d device values) ----
 * op 0 sgd_velocity(v, g, w), 1 sgd_apply(w, v', g, lr), 2 adam_moment1(m, g),
 * 3 adam_moment2(v, g), 4 adam_apply(w, m', v', lr, step). */
__kernel void FN(optim)(int op, long n, __global const T *a, long ao, __global const T *b,
                        long bo, __global const T *c, long co, __global const T *lr, long lro,
                        __global const long *step, long so, __global T *y, long yo, T f0, T f1,
                        T f2, T f3, int flag) {
  T lrv = op == 1 || op == 4 ? lr[lro] : (T)0;
  T bc1 = (T)1, bc2 = (T)1;
  if (op == 4) {
    T st = (T)step[so];
    bc1 = (T)1 - pow(f0, st);
    bc2 = (T)1 - pow(f1, st);
  }
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    T r;
    switch (op) {
      case 0: r = f0 * a[ao + i] + (b[bo + i] + f1 * c[co + i]); break;
      case 1: {
        T w = a[ao + i], v = b[bo + i], g = c[co + i];
        T d = flag ? (g + f1 * w) + f0 * v : v;
        r = w - lrv * d;
        break;
      }
      case 2: r = f0 * a[ao + i] + ((T)1 - f0) * b[bo + i]; break;
      case 3: { T g = b[bo + i]; r = f0 * a[ao + i] + ((T)1 - f0) * g * g; break; }
      default: {
        T w = a[ao + i];
        T mh = b[bo + i] / bc1, vh = c[co + i] / bc2;
        r = w - lrv * (mh / (sqrt(vh) + f2) + (flag ? f3 * w : (T)0));
        break;
      }
    }
    y[yo + i] = r;
  }
}

/* ---- dropout: the counter-based mask documented in ops.h (splitmix64 finaliser) ---- */
#ifndef CTN_MIX64
#define CTN_MIX64
inline ulong ctn_mix64(ulong z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
  return z ^ (z >> 31);
}
#endif
__kernel void FN(dropout)(long n, __global const T *x, long xo, __global const long *step,
                          long so, __global T *y, long yo, ulong seed, uint thr, T scale) {
  const ulong golden = 0x9E3779B97F4A7C15UL;
  const ulong key = ctn_mix64(seed + ctn_mix64((ulong)step[so] + golden));
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    uint u = (uint)(ctn_mix64(key + ((ulong)i + 1) * golden) >> 40);
    y[yo + i] = u >= thr ? x[xo + i] * scale : (T)0;
  }
}
