/* Neural-network kernels (conv2d and its gradients, pooling, batch/layer norm, embedding),
 * instantiated per float type like float_ops.cl (T, FN). Semantics: abi/chutney/ops.h and the
 * CPU backend (backends/cpu/k_conv.cpp, k_pool.cpp, k_norm.cpp, k_nn_misc.cpp).
 *
 * Every kernel that accumulates is a gather: one work-item per output element reads everything
 * that contributes to it, in a fixed order, so results are deterministic and race free (no
 * atomics). Only the normalisation kernels use local memory; they run one work-group per channel
 * or row (launch_rows) with every barrier at the kernel's top level, reached by all lanes (PoCL
 * 3.1 miscompiles barriers inside loops over data or inside branches). Statistics accumulate in
 * ACC: double when the device has fp64 (like the CPU backend), else T. */
#ifdef CTN_HAVE_FP64
#define ACC double
#else
#define ACC T
#endif

/* ---- convolution. g = meta: N, C, H, W, O, KH, KW, HO, WO, SH, SW, PH, PW, DH, DW, G, CG, OG
 * (C/G input channels and O/G output channels per group). conv_transpose2d is conv2d_grad_input
 * with the transpose's input as dy. ---- */
/* The meta every convolution kernel reads (all but N), as constants named as above. */
#define CONV_META(g)                                                                              \
  const long C = g[1], H = g[2], W = g[3], O = g[4], KH = g[5], KW = g[6], HO = g[7], WO = g[8]; \
  const long SH = g[9], SW = g[10], PH = g[11], PW = g[12], DH = g[13], DW = g[14], CG = g[16],  \
             OG = g[17]
__kernel void FN(conv2d)(long total, __global const long *g, __global const T *x, long xo,
                         __global const T *w, long wo, __global T *y, long yo) {
  CONV_META(g);
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    long t = i / WO;
    const long ow = i - t * WO;
    const long oh = t % HO;
    t /= HO;
    const long o = t % O, n = t / O, gi = o / OG;
    T acc = (T)0;
    for (long c = 0; c < CG; ++c) {
      __global const T *xc = x + xo + ((n * C + gi * CG + c) * H) * W;
      __global const T *wc = w + wo + ((o * CG + c) * KH) * KW;
      for (long ki = 0; ki < KH; ++ki) {
        const long ih = oh * SH - PH + ki * DH;
        if (ih < 0 || ih >= H) continue;
        for (long kj = 0; kj < KW; ++kj) {
          const long iw = ow * SW - PW + kj * DW;
          if (iw >= 0 && iw < W) acc += xc[ih * W + iw] * wc[ki * KW + kj];
        }
      }
    }
    y[yo + i] = acc;
  }
}

/* dx[n, c, ih, iw] = sum over the (o, ki, kj) whose tap lands on (ih, iw). */
__kernel void FN(conv2d_grad_input)(long total, __global const long *g, __global const T *dy,
                                    long dyo, __global const T *w, long wo, __global T *dx,
                                    long dxo) {
  CONV_META(g);
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    long t = i / W;
    const long iw = i - t * W;
    const long ih = t % H;
    t /= H;
    const long c = t % C, n = t / C, gi = c / CG, cl = c - gi * CG;
    T acc = (T)0;
    for (long ol = 0; ol < OG; ++ol) {
      const long o = gi * OG + ol;
      __global const T *dyc = dy + dyo + ((n * O + o) * HO) * WO;
      __global const T *wc = w + wo + ((o * CG + cl) * KH) * KW;
      for (long ki = 0; ki < KH; ++ki) {
        const long th = ih + PH - ki * DH;
        if (th < 0 || th % SH) continue;
        const long oh = th / SH;
        if (oh >= HO) continue;
        for (long kj = 0; kj < KW; ++kj) {
          const long tw = iw + PW - kj * DW;
          if (tw < 0 || tw % SW) continue;
          const long ow = tw / SW;
          if (ow < WO) acc += dyc[oh * WO + ow] * wc[ki * KW + kj];
        }
      }
    }
    dx[dxo + i] = acc;
  }
}

/* dw[o, cl, ki, kj] = sum over n, oh, ow of dy[n, o, oh, ow] * x[n, c, ih, iw]. */
__kernel void FN(conv2d_grad_weight)(long total, __global const long *g, __global const T *x,
                                     long xo, __global const T *dy, long dyo, __global T *dw,
                                     long dwo) {
  const long N = g[0];
  CONV_META(g);
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    long t = i / KW;
    const long kj = i - t * KW;
    const long ki = t % KH;
    t /= KH;
    const long cl = t % CG, o = t / CG, c = (o / OG) * CG + cl;
    /* Output columns whose tap lies inside the input: ow in [lo, hi). */
    const long offw = kj * DW - PW;
    long lo = offw >= 0 ? 0 : (-offw + SW - 1) / SW;
    long hi = W - offw <= 0 ? 0 : (W - offw + SW - 1) / SW;
    lo = min(lo, WO);
    hi = min(max(hi, lo), WO);
    T acc = (T)0;
    for (long n = 0; n < N; ++n) {
      __global const T *xc = x + xo + ((n * C + c) * H) * W;
      __global const T *dyc = dy + dyo + ((n * O + o) * HO) * WO;
      for (long oh = 0; oh < HO; ++oh) {
        const long ih = oh * SH - PH + ki * DH;
        if (ih < 0 || ih >= H) continue;
        __global const T *xr = xc + ih * W + offw;
        __global const T *dr = dyc + oh * WO;
        for (long ow = lo; ow < hi; ++ow) acc += dr[ow] * xr[ow * SW];
      }
    }
    dw[dwo + i] = acc;
  }
}

/* ---- pooling. g = meta: planes, H, W, HO, WO, KH, KW, SH, SW, PH, PW, count_include_pad.
 * Windows are clipped to the input; max padding is -inf. ---- */
/* The meta every pooling kernel reads (all but planes and count_include_pad). */
#define POOL_META(g)                                                                               \
  const long H = g[1], W = g[2], HO = g[3], WO = g[4], KH = g[5], KW = g[6], SH = g[7], SW = g[8], \
             PH = g[9], PW = g[10]
inline T FN(pool_div)(long inc, long KH, long KW, long h0, long h1, long w0, long w1) {
  return inc ? (T)(KH * KW) : (T)((h1 - h0) * (w1 - w0));
}

/* y[p, oh, ow] over the window clipped to the input: its maximum (avg == 0) or its sum over
 * pool_div (avg != 0, count_include_pad = g[11]). */
inline void FN(pool2d)(long total, __global const long *g, __global const T *x, long xo,
                       __global T *y, long yo, int avg) {
  POOL_META(g);
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    long t = i / WO;
    const long ow = i - t * WO;
    const long oh = t % HO, p = t / HO;
    const long h0 = max(oh * SH - PH, 0L), h1 = min(oh * SH - PH + KH, H);
    const long w0 = max(ow * SW - PW, 0L), w1 = min(ow * SW - PW + KW, W);
    __global const T *xp = x + xo + p * H * W;
    if (avg) {
      T acc = (T)0;
      for (long ih = h0; ih < h1; ++ih)
        for (long iw = w0; iw < w1; ++iw) acc += xp[ih * W + iw];
      y[yo + i] = acc / FN(pool_div)(g[11], KH, KW, h0, h1, w0, w1);
      continue;
    }
    T m = (T)(-INFINITY);
    for (long ih = h0; ih < h1; ++ih)
      for (long iw = w0; iw < w1; ++iw) {
        const T v = xp[ih * W + iw];
        if (v > m || v != v) m = v;
      }
    y[yo + i] = m;
  }
}

__kernel void FN(max_pool2d)(long total, __global const long *g, __global const T *x, long xo,
                             __global const T *unused, long uo, __global T *y, long yo) {
  FN(pool2d)(total, g, x, xo, y, yo, 0);
}

__kernel void FN(avg_pool2d)(long total, __global const long *g, __global const T *x, long xo,
                             __global const T *unused, long uo, __global T *y, long yo) {
  FN(pool2d)(total, g, x, xo, y, yo, 1);
}

/* The gradient of a pooling, dx[p, ih, iw]: a gather over every window whose span
 * [o*S - P, o*S - P + K) contains (ih, iw). Max pooling (x != NULL) takes the dy of each window
 * whose first maximum, in row-major order, is (ih, iw): the argmax is recomputed per window
 * exactly as the CPU backend does. Average pooling (x == NULL) takes each window's dy over its
 * divisor (pool_div, count_include_pad = g[11]). */
inline void FN(pool2d_grad)(long total, __global const long *g, __global const T *x, long xo,
                            __global const T *dy, long dyo, __global T *dx, long dxo) {
  POOL_META(g);
  const long INC = g[11];
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    long t = i / W;
    const long iw = i - t * W;
    const long ih = t % H, p = t / H;
    const long me = ih * W + iw;
    __global const T *dyp = dy + dyo + p * HO * WO;
    const long ah = ih + PH - KH + 1, aw = iw + PW - KW + 1;
    const long oh0 = ah <= 0 ? 0 : (ah + SH - 1) / SH, oh1 = min((ih + PH) / SH, HO - 1);
    const long ow0 = aw <= 0 ? 0 : (aw + SW - 1) / SW, ow1 = min((iw + PW) / SW, WO - 1);
    T acc = (T)0;
    for (long oh = oh0; oh <= oh1; ++oh) {
      const long h0 = max(oh * SH - PH, 0L), h1 = min(oh * SH - PH + KH, H);
      for (long ow = ow0; ow <= ow1; ++ow) {
        const long w0 = max(ow * SW - PW, 0L), w1 = min(ow * SW - PW + KW, W);
        if (!x) {
          acc += dyp[oh * WO + ow] / FN(pool_div)(INC, KH, KW, h0, h1, w0, w1);
          continue;
        }
        __global const T *xp = x + xo + p * H * W;
        T m = (T)(-INFINITY);
        long arg = h0 * W + w0;
        for (long hh = h0; hh < h1; ++hh)
          for (long ww = w0; ww < w1; ++ww) {
            const T v = xp[hh * W + ww];
            if (v > m || (v != v && m == m)) {
              m = v;
              arg = hh * W + ww;
            }
          }
        if (arg == me) acc += dyp[oh * WO + ow];
      }
    }
    dx[dxo + i] = acc;
  }
}

__kernel void FN(max_pool2d_grad)(long total, __global const long *g, __global const T *x,
                                  long xo, __global const T *dy, long dyo, __global T *dx,
                                  long dxo) {
  FN(pool2d_grad)(total, g, x, xo, dy, dyo, dx, dxo);
}

__kernel void FN(avg_pool2d_grad)(long total, __global const long *g, __global const T *dy,
                                  long dyo, __global const T *unused, long uo, __global T *dx,
                                  long dxo) {
  FN(pool2d_grad)(total, g, 0, 0, dy, dyo, dx, dxo);
}

/* ---- normalisation: work-group reductions in ACC (ls a power of two). ---- */
CTN_WG_REDUCE(FN(wg_sum_acc), ACC, CTN_WG_ADD)  /* float_ops.cl */

/* Batch norm, one work-group per channel (launch_rows). x viewed as [outer, ch, inner].
 * op 0 batch_norm (a = gamma, b = beta) -> y; 1 grad_input (a = gamma, d = dy) -> dx;
 * 2 grad_gamma (d = dy) -> out[c]; 3 inference (a = gamma, b = beta, rm, rv) -> y.
 * Every group runs the same four reductions (bounds 0 where an op does not need one), so the
 * barriers stay unconditional. */
__kernel void FN(batch_norm)(int op, long outer, long ch, long inner, __global const T *x,
                             long xo, __global const T *a, long ao, __global const T *b, long bo,
                             __global const T *d, long dof, __global const T *rm, long rmo,
                             __global const T *rv, long rvo, __global T *y, long yo, ACC eps,
                             __local ACC *scratch) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  const long c = get_group_id(0) + (long)get_group_id(1) * get_num_groups(0);
  const long count = outer * inner;
  const long n = c < ch ? count : 0;
  const long ns = op == 3 ? 0 : n;     /* batch statistics */
  const long ng = op == 1 || op == 2 ? n : 0;  /* gradient sums */
  const long cs = ch * inner, cb = c * inner;
  __global const T *xp = x + xo;
  __global const T *dp = d + dof;
  ACC s = (ACC)0;
  for (long k = lid; k < ns; k += ls) s += xp[(k / inner) * cs + cb + k % inner];
  s = FN(wg_sum_acc)(s, scratch);
  const ACC mean_b = count ? s / (ACC)count : (ACC)0;
  ACC v = (ACC)0;
  for (long k = lid; k < ns; k += ls) {
    const ACC dd = xp[(k / inner) * cs + cb + k % inner] - mean_b;
    v += dd * dd;
  }
  v = FN(wg_sum_acc)(v, scratch);
  ACC sdy = (ACC)0, sdyx = (ACC)0;
  for (long k = lid; k < ng; k += ls) {
    const long e = (k / inner) * cs + cb + k % inner;
    sdy += dp[e];
    sdyx += dp[e] * ((ACC)xp[e] - mean_b);
  }
  sdy = FN(wg_sum_acc)(sdy, scratch);
  sdyx = FN(wg_sum_acc)(sdyx, scratch);
  if (c < ch) {
    ACC mean, rstd;
    if (op == 3) {
      mean = rm[rmo + c];
      rstd = (ACC)1 / sqrt((ACC)rv[rvo + c] + eps);
    } else {
      mean = mean_b;
      rstd = (ACC)1 / sqrt(v / (ACC)count + eps);
    }
    if (op == 0 || op == 3) {
      const ACC gm = a[ao + c], bt = b[bo + c];
      const T scale = (T)(gm * rstd), shift = (T)(bt - mean * gm * rstd);
      for (long k = lid; k < n; k += ls) {
        const long e = (k / inner) * cs + cb + k % inner;
        y[yo + e] = xp[e] * scale + shift;
      }
    } else if (op == 1) {
      const ACC kk = (ACC)a[ao + c] * rstd;
      const ACC mdy = sdy / (ACC)count, mdyx = sdyx * rstd * rstd / (ACC)count;
      for (long k = lid; k < n; k += ls) {
        const long e = (k / inner) * cs + cb + k % inner;
        y[yo + e] = (T)(kk * ((ACC)dp[e] - mdy - ((ACC)xp[e] - mean) * mdyx));
      }
    } else if (lid == 0) {
      y[yo + c] = (T)(sdyx * rstd);
    }
  }
}

/* Layer norm, one work-group per row of len elements (launch_rows).
 * op 0 layer_norm (a = gamma, b = beta) -> y; 1 grad_input (a = gamma, d = dy) -> dx;
 * 2 row statistics for grad_gamma -> st[2 r] = mean, st[2 r + 1] = rstd. */
__kernel void FN(layer_norm)(int op, long rows, long len, __global const T *x, long xo,
                             __global const T *a, long ao, __global const T *b, long bo,
                             __global const T *d, long dof, __global T *y, long yo,
                             __global ACC *st, ACC eps, __local ACC *scratch) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  const long r = get_group_id(0) + (long)get_group_id(1) * get_num_groups(0);
  const long n = r < rows ? len : 0;
  const long ng = op == 1 ? n : 0;
  __global const T *xr = x + xo + r * len;
  __global const T *dr = d + dof + r * len;
  __global const T *gm = a + ao;
  ACC s = (ACC)0;
  for (long j = lid; j < n; j += ls) s += xr[j];
  s = FN(wg_sum_acc)(s, scratch);
  const ACC mean = len ? s / (ACC)len : (ACC)0;
  ACC v = (ACC)0;
  for (long j = lid; j < n; j += ls) {
    const ACC dd = xr[j] - mean;
    v += dd * dd;
  }
  v = FN(wg_sum_acc)(v, scratch);
  const ACC rstd = (ACC)1 / sqrt(v / (ACC)len + eps);
  ACC sg = (ACC)0, sgx = (ACC)0;
  for (long j = lid; j < ng; j += ls) {
    const ACC gg = (ACC)dr[j] * gm[j];
    sg += gg;
    sgx += gg * ((ACC)xr[j] - mean);
  }
  sg = FN(wg_sum_acc)(sg, scratch);
  sgx = FN(wg_sum_acc)(sgx, scratch);
  if (r < rows) {
    if (op == 0) {
      __global T *yr = y + yo + r * len;
      const T m = (T)mean, rs = (T)rstd;
      for (long j = lid; j < n; j += ls) yr[j] = (xr[j] - m) * rs * gm[j] + b[bo + j];
    } else if (op == 1) {
      __global T *yr = y + yo + r * len;
      const ACC mg = sg / (ACC)len, mgx = sgx * rstd * rstd / (ACC)len;
      for (long j = lid; j < n; j += ls)
        yr[j] = (T)(rstd * ((ACC)dr[j] * gm[j] - mg - ((ACC)xr[j] - mean) * mgx));
    } else if (lid == 0) {
      st[2 * r] = mean;
      st[2 * r + 1] = rstd;
    }
  }
}

/* layer_norm_grad_gamma, second phase: one work-item per column, rows in order. */
__kernel void FN(layer_norm_gamma_cols)(long rows, long len, __global const T *x, long xo,
                                        __global const T *dy, long dyo, __global const ACC *st,
                                        __global T *out, long oo) {
  for (long j = get_global_id(0); j < len; j += get_global_size(0)) {
    ACC acc = (ACC)0;
    for (long r = 0; r < rows; ++r)
      acc += (ACC)dy[dyo + r * len + j] * (((ACC)x[xo + r * len + j] - st[2 * r]) * st[2 * r + 1]);
    out[oo + j] = (T)acc;
  }
}

/* ---- embedding. err (shared with cross-entropy): [code, position, id, V]; code 3 embedding,
 * 4 embedding_grad. A bad id's row is written as zeros. ---- */
#define CTN_EMB(IT, IS)                                                                         \
  __kernel void FN(embedding_##IS)(long nids, long V, long D, __global const T *table,         \
                                   long to, __global const IT *ids, long io, __global T *y,    \
                                   long yo, __global long *err) {                              \
    const long total = nids * D;                                                                \
    for (long i = get_global_id(0); i < total; i += get_global_size(0)) {                      \
      const long k = i / D, j = i - k * D;                                                      \
      const long id = (long)ids[io + k];                                                        \
      if (id < 0 || id >= V) {                                                                  \
        if (j == 0) { err[1] = k; err[2] = id; err[3] = V; err[0] = 3; }                        \
        y[yo + i] = (T)0;                                                                       \
      } else {                                                                                  \
        y[yo + i] = table[to + id * D + j];                                                     \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  /* dtable[v, j] = sum of dy[k, j] over the positions k with ids[k] == v, in order. */        \
  __kernel void FN(embedding_grad_##IS)(long nids, long V, long D, __global const IT *ids,     \
                                        long io, __global const T *dy, long dyo,               \
                                        __global T *out, long oo, __global long *err) {        \
    for (long k = get_global_id(0); k < nids; k += get_global_size(0)) {                       \
      const long id = (long)ids[io + k];                                                        \
      if (id < 0 || id >= V) { err[1] = k; err[2] = id; err[3] = V; err[0] = 4; }               \
    }                                                                                           \
    const long total = V * D;                                                                   \
    for (long i = get_global_id(0); i < total; i += get_global_size(0)) {                      \
      const long v = i / D, j = i - v * D;                                                      \
      T acc = (T)0;                                                                             \
      for (long k = 0; k < nids; ++k)                                                           \
        if ((long)ids[io + k] == v) acc += dy[dyo + k * D + j];                                 \
      out[oo + i] = acc;                                                                        \
    }                                                                                           \
  }
CTN_EMB(int, i32)
CTN_EMB(long, i64)
#undef CTN_EMB

#undef ACC

/* ---- small GEMM: C[b] = op(A[b]) op(B[b]), one work-item per output element, k in order.
 * Used instead of CLBlast below a size threshold (k_matmul.cpp): CLBlast compiles its kernels
 * once per process (~0.1-0.2 s on PoCL) while this one comes with our cached program.
 * boff = per batch [a offset, b offset] (elements, relative to ao / bo); C batches contiguous. */
__kernel void FN(gemm_small)(long total, long M, long N, long K, int ta, int tb,
                             __global const long *boff, __global const T *a, long ao,
                             __global const T *b, long bo, __global T *c, long co) {
  const long MN = M * N;
  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {
    const long bi = i / MN, r = i - bi * MN;
    const long row = r / N, col = r - row * N;
    __global const T *ap = a + ao + boff[2 * bi];
    __global const T *bp = b + bo + boff[2 * bi + 1];
    const long as = ta ? M : 1, ar = ta ? row : row * K;  /* A(row, k) = ap[ar + k * as] */
    const long bs = tb ? 1 : N, bc = tb ? col * K : col;  /* B(k, col) = bp[bc + k * bs] */
    T acc = (T)0;
    for (long k = 0; k < K; ++k) acc += ap[ar + k * as] * bp[bc + k * bs];
    c[co + i] = acc;
  }
}
