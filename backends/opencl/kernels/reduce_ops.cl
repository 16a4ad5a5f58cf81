/* Reductions and the softmax family, instantiated by the plugin's source assembler per dtype:
 *   T       the arithmetic type (float, double; float for f16 and bf16)
 *   S       the stored element type (T; half or ushort for f16 and bf16)
 *   LD(p, i), ST(v, p, i)  element i of p as T, and v stored to it (one rounding for 16 bits)
 *   FN(n)   the kernel name with its dtype suffix; AFN(n) the float_ops.cl helpers of T
 * Sums, maxima and the softmax normaliser accumulate in T, so f16 and bf16 rows sum in f32. */

/* ---- reductions: one work-group per output element. meta = kshape[nk], kstr[nk],
 * rshape[nr], rstr[nr] (input element strides of the kept / reduced coalesced dims).
 * op: 0 sum, 1 mean (times scale), 2 max. R = number of reduced elements. ---- */
__kernel void FN(reduce)(int op, long nout, long R, int nk, int nr, __global const long *meta,
                         __global const S *x, long xo, __global S *y, long yo, T scale,
                         __local T *scratch) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  __global const long *kshape = meta, *kstr = meta + nk, *rshape = meta + 2 * nk,
                      *rstr = meta + 2 * nk + nr;
  const long o = get_group_id(0) + (long)get_group_id(1) * get_num_groups(0);
  const long n = o < nout ? R : 0;  /* a group past the end reduces nothing; barriers stay uniform */
  const long base = o < nout ? xo + bcast_off(o, nk, kshape, kstr) : 0;
  T acc = op == 2 ? (T)(-INFINITY) : (T)0;
  for (long r = lid; r < n; r += ls) {
    T v = LD(x, base + bcast_off(r, nr, rshape, rstr));
    if (op == 2) acc = (v > acc || v != v || acc != acc) ? (acc != acc ? acc : v) : acc;
    else acc += v;
  }
  scratch[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = ls / 2; s > 0; s >>= 1) {
    if (lid < s) {
      T u = scratch[lid], v = scratch[lid + s];
      scratch[lid] = op == 2 ? ((v > u || v != v || u != u) ? (u != u ? u : v) : u) : u + v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0 && o < nout) ST(op == 1 ? scratch[0] * scale : scratch[0], y, yo + o);
}

/* ---- softmax family: one work-group per row, launched by launch_rows; a row is len elements
 * `inner` apart. op: 0 softmax, 1 log_softmax, 2 softmax_grad (x = y), 3 log_softmax_grad (x = y).
 * Every barrier sits at the top level of the kernel, reached by all lanes of every group (a
 * group past the last row just works on an empty row): PoCL 3.1 miscompiled the earlier shape,
 * barriers inside a grid-stride loop and op branches, so that a lane now and then read a stale
 * reduction. ---- */
__kernel void FN(softmax)(int op, long rows, long len, long inner, __global const S *x, long xo,
                          __global const S *dy, long dyo, __global S *y, long yo,
                          __local T *scratch) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  const long r = get_group_id(0) + (long)get_group_id(1) * get_num_groups(0);
  const long n = r < rows ? len : 0;
  const long base = r < rows ? (r / inner) * len * inner + r % inner : 0;
  const long xb = xo + base, db = dyo + base, yb = yo + base;
  const int fwd = op < 2;
  T m = (T)(-INFINITY);
  if (fwd)
    for (long j = lid; j < n; j += ls) m = fmax(m, LD(x, xb + j * inner));
  m = AFN(wg_max)(m, scratch);
  if (m == (T)(-INFINITY)) m = (T)0;
  T s = (T)0;
  for (long j = lid; j < n; j += ls) {
    T v = LD(x, xb + j * inner);
    s += fwd ? exp(v - m) : (op == 2 ? LD(dy, db + j * inner) * v : LD(dy, db + j * inner));
  }
  s = AFN(wg_sum)(s, scratch);
  const T inv = (T)1 / s, lse = m + log(s);
  for (long j = lid; j < n; j += ls) {
    T v = LD(x, xb + j * inner);
    T out;
    if (op == 0) out = exp(v - m) * inv;
    else if (op == 1) out = v - lse;
    else if (op == 2) out = v * (LD(dy, db + j * inner) - s);
    else out = LD(dy, db + j * inner) - exp(v) * s;
    ST(out, y, yb + j * inner);
  }
}

