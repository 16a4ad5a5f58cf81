// max_pool2d, max_pool2d_grad, avg_pool2d, avg_pool2d_grad for every window, stride and padding.
// Each (image, channel) plane is independent, so the planes are split over the pool, one
// contiguous range and one scratch slot of the workspace per part.
//
// A window is separable: for each output row, the rows under it are combined first (max or
// sum, element by element over the whole input width: contiguous, vectorised), then the
// columns. The combined row is split into `sw` phases (phase r holds columns r, r + sw, ...),
// so that tap k of every output column reads one phase at consecutive indices. The phases are
// padded with the operation's neutral value (-inf, 0) on both sides, so every output column
// takes every tap: one pass over the output row (windows of 1..5 columns unrolled, the taps
// combined in registers), with no clipped edge columns. The loops are plain C++ compiled once per instruction set
// (target attributes on the callers, like vmath.cpp): the compiler vectorises them with
// AVX-512, AVX2, SSE2 or NEON, and the scalar build is the same code.
//
// Results: max equals the reference loop's value (of a +0 and a -0 either may win; NaN
// propagates: the rows pass takes the plain vector max and checks for NaN on the way, and an
// output row whose input rows hold one is redone with the NaN-propagating max); max_pool2d_grad gives each window's gradient to its first
// maximum in row-major order (or its first NaN) and adds the windows' gradients in the order of
// the reference loop (output rows, then columns), so it is bit-exact as well; the averages add
// the rows first, then the columns, and multiply by the reciprocal of the count (rounding
// differs from a row-major sum divided by the count).
//
// Layout 1 (NHWC, since 1.7; max_pool2d and avg_pool2d only): the output rows (n, oh) are split
// over the pool; each output pixel combines the C contiguous channels of its window's pixels,
// taps in row-major order, element by element (vectorised over C). Same windows, padding and
// count_include_pad as NCHW; max gives the same values (NaN propagates), the average adds in
// row-major order and multiplies by the reciprocal of the count (within rounding of NCHW's).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

#define CTN_POOL_INLINE inline __attribute__((always_inline))

enum class PoolKind { kMax, kMaxGrad, kAvg, kAvgGrad };

// Tap k of the column pass: output columns [lo, hi) read phase r at index ow + a (the input
// column ow * sw + k - pw = (ow + a) * sw + r); in the padded phases (Scratch::pp) output column
// ow reads element off + ow, for every ow.
struct Tap {
  int64_t r = 0, a = 0, lo = 0, hi = 0, off = 0;
};

struct PoolState;

template <class T>
struct PoolJob {
  const PoolState *st;
  const T *x;   // max, max-grad, avg: x; avg-grad: dy
  const T *dy;  // max-grad only
  T *out;
  char *ws;          // parts slots of st->slot bytes
  int64_t parts;     // the planes split into this many contiguous ranges
};

template <class T>
using PlanesFn = void (*)(const PoolJob<T> &job, int64_t p0, int64_t p1, char *slot);

struct PoolState : KernelBase {
  PoolKind kind = PoolKind::kMax;
  int64_t planes = 0, h = 0, w = 0, ho = 0, wo = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool include_pad = false;
  bool k2 = false;        // 2x2 windows, stride 2, no padding: max_pool2d_grad's own path
  bool global = false;    // one unpadded window over the whole plane
  bool nhwc = false;      // layout 1: planes counts the output rows N * Ho, c the channels
  int64_t c = 1;
  int64_t work = 0;       // elements read, for the threading threshold
  int64_t np = 0;         // the length of one phase, ceil(w / sw)
  std::vector<Tap> taps;  // kw entries, k ascending
  int64_t padl = 0, pitch = 0;  // padded phases: padl elements before each, pitch apart
  int64_t parts_max = 1;  // workspace slots (pool size at get_kernel)
  int64_t slot = 0;       // bytes per slot
  PlanesFn<float> run32 = nullptr;
  PlanesFn<double> run64 = nullptr;
};

// Clipped window [lo, hi) of output index o along one axis.
inline void window(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t a = o * s - p;
  *lo = std::max<int64_t>(a, 0);
  *hi = std::min<int64_t>(a + k, n);
}

template <class T>
struct MaxOp {
  static constexpr T init() { return -std::numeric_limits<T>::infinity(); }
  static CTN_POOL_INLINE T f(T m, T v) { return ((v > m) | (v != v)) ? v : m; }  // NaN propagates
};
// Max for planes without NaN: one vector max instruction.
template <class T>
struct PlainMaxOp {
  static constexpr T init() { return -std::numeric_limits<T>::infinity(); }
  static CTN_POOL_INLINE T f(T m, T v) { return v > m ? v : m; }
};
template <class T>
struct SumOp {
  static constexpr T init() { return T(0); }
  static CTN_POOL_INLINE T f(T m, T v) { return m + v; }
};

// With PlainMaxOp: whether a or b is NaN (the plain max may lose it); 0 for the other ops.
template <class Op, class T>
CTN_POOL_INLINE int nan_check(T a, T b) {
  if constexpr (std::is_same_v<Op, PlainMaxOp<T>>)
    return __builtin_isunordered(a, b);
  else
    return 0;
}

// Op over x[0, n) in 16 lanes (a global window: one output per plane); *bad as combine_rows.
template <class Op, class T>
CTN_POOL_INLINE T reduce_plane(const T *__restrict x, int64_t n, bool *bad) {
  constexpr int kL = 16;
  T acc[kL];
  for (int l = 0; l < kL; ++l) acc[l] = Op::init();
  int b = 0;
  int64_t j = 0;
  for (; j + kL <= n; j += kL)
    for (int l = 0; l < kL; ++l) {
      acc[l] = Op::f(acc[l], x[j + l]);
      b |= nan_check<Op>(x[j + l], x[j + l]);
    }
  T m = Op::init();
  for (; j < n; ++j) {
    m = Op::f(m, x[j]);
    b |= nan_check<Op>(x[j], x[j]);
  }
  for (int l = 0; l < kL; ++l) m = Op::f(m, acc[l]);
  *bad = b != 0;
  return m;
}

// out[j] = Op over the rows [h0, h1) of plane x (width w); h0 < h1. Up to three rows in the
// first pass, two in each further one. With PlainMaxOp, returns whether any of the rows holds a
// NaN (found in the same pass: one unordered compare checks two elements), else false.
template <class Op, class T>
CTN_POOL_INLINE bool combine_rows(const T *x, int64_t w, int64_t h0, int64_t h1, T *__restrict out) {
  const auto unord = nan_check<Op, T>;
  int bad = 0;
  const T *__restrict r0 = x + h0 * w;
  int64_t ih = std::min(h0 + 3, h1);
  if (ih - h0 == 3) {
    const T *__restrict r1 = r0 + w, *__restrict r2 = r1 + w;
    for (int64_t j = 0; j < w; ++j) {
      out[j] = Op::f(Op::f(r0[j], r1[j]), r2[j]);
      bad |= unord(r0[j], r1[j]) | unord(r2[j], r2[j]);
    }
  } else if (ih - h0 == 2) {
    const T *__restrict r1 = r0 + w;
    for (int64_t j = 0; j < w; ++j) {
      out[j] = Op::f(r0[j], r1[j]);
      bad |= unord(r0[j], r1[j]);
    }
  } else {
    for (int64_t j = 0; j < w; ++j) {
      out[j] = r0[j];
      bad |= unord(r0[j], r0[j]);
    }
  }
  for (; ih + 1 < h1; ih += 2) {
    const T *__restrict a = x + ih * w, *__restrict b = a + w;
    for (int64_t j = 0; j < w; ++j) {
      out[j] = Op::f(Op::f(out[j], a[j]), b[j]);
      bad |= unord(a[j], b[j]);
    }
  }
  if (ih < h1) {
    const T *__restrict a = x + ih * w;
    for (int64_t j = 0; j < w; ++j) {
      out[j] = Op::f(out[j], a[j]);
      bad |= unord(a[j], a[j]);
    }
  }
  return bad != 0;
}

// Between a row v of width w and its s phases at ph (phase r at ph + r * np holds v[r],
// v[r + s], ...; np: the distance between phases): kSplit copies v into the phases, else the
// phases back into v.
template <bool kSplit, class T>
CTN_POOL_INLINE void phases(T *__restrict v, int64_t w, int64_t s, int64_t np, T *__restrict ph) {
  const auto mv = [](T &row, T &phase) __attribute__((always_inline)) {
    if constexpr (kSplit)
      phase = row;
    else
      row = phase;
  };
  if (s == 2) {
    T *__restrict p0 = ph, *__restrict p1 = ph + np;
    const int64_t n2 = w / 2;
    for (int64_t j = 0; j < n2; ++j) {
      mv(v[2 * j], p0[j]);
      mv(v[2 * j + 1], p1[j]);
    }
    if (w & 1) mv(v[w - 1], p0[n2]);
    return;
  }
  for (int64_t r = 0; r < s; ++r)
    for (int64_t j = 0; r + j * s < w; ++j) mv(v[j * s + r], ph[r * np + j]);
}

// The phases of row v: v itself for stride 1, else split into ph.
template <class T>
CTN_POOL_INLINE const T *split(const PoolState &s, const T *v, T *ph) {
  if (s.sw == 1) return v;
  phases<true>(const_cast<T *>(v), s.w, s.sw, s.np, ph);  // reads v only
  return ph;
}

// o[ow] = Op over the KW taps of output column ow, for every ow: one pass, the taps combined in
// registers (k ascending).
template <int KW, class Op, class T>
CTN_POOL_INLINE void cols_taps(const PoolState &s, const T *pp, T *__restrict o) {
  const T *b[KW];
  for (int k = 0; k < KW; ++k) b[k] = pp + s.taps[static_cast<size_t>(k)].off;
  for (int64_t i = 0; i < s.wo; ++i) {
    T m = b[0][i];
    for (int k = 1; k < KW; ++k) m = Op::f(m, b[k][i]);
    o[i] = m;
  }
}

// o[ow] = Op over the taps of output column ow, reading the padded phases pp of a combined row
// (the padding holds Op::init(), so that no column needs its taps clipped).
template <class Op, class T>
CTN_POOL_INLINE void combine_cols(const PoolState &s, const T *pp, T *__restrict o) {
  switch (s.kw) {
    case 1: return cols_taps<1, Op>(s, pp, o);
    case 2: return cols_taps<2, Op>(s, pp, o);
    case 3: return cols_taps<3, Op>(s, pp, o);
    case 4: return cols_taps<4, Op>(s, pp, o);
    case 5: return cols_taps<5, Op>(s, pp, o);
    default: break;
  }
  std::fill(o, o + s.wo, Op::init());
  for (const Tap &t : s.taps) {
    const T *__restrict p = pp + t.off;
    for (int64_t i = 0; i < s.wo; ++i) o[i] = Op::f(o[i], p[i]);
  }
}

// Scratch of one part, carved from its workspace slot (each piece on its own cache lines).
template <class T>
struct Scratch {
  T *cnt;   // wo: real columns under each output column's window (avg)
  T *inv;   // wo: 1 / (rows * cnt) for one count of rows (avg)
  T *row;   // w: a combined row
  T *ph;    // sw * np: phases
  T *pp;    // sw * pitch: padded phases (forward), the padding Op::init()
  T *col;   // wo: per-output values (maxima, gradients)
  std::conditional_t<sizeof(T) == 4, int32_t, int64_t> *arg;  // wo: first maxima
  static int64_t piece(int64_t n) { return (n * 8 + 63) / 64 * 64; }  // bytes, for 8-byte lanes
  static int64_t bytes(const PoolState &s) {
    return 4 * piece(s.wo) + piece(s.w) + piece(s.sw * s.np) + piece(s.sw * s.pitch);
  }
  Scratch(char *slot, const PoolState &s) {
    cnt = reinterpret_cast<T *>(slot);
    row = reinterpret_cast<T *>(slot + piece(s.wo));
    ph = reinterpret_cast<T *>(slot + piece(s.wo) + piece(s.w));
    col = reinterpret_cast<T *>(slot + piece(s.wo) + piece(s.w) + piece(s.sw * s.np));
    arg = reinterpret_cast<decltype(arg)>(slot + 2 * piece(s.wo) + piece(s.w) + piece(s.sw * s.np));
    pp = reinterpret_cast<T *>(slot + 3 * piece(s.wo) + piece(s.w) + piece(s.sw * s.np));
    inv = reinterpret_cast<T *>(slot + 3 * piece(s.wo) + piece(s.w) + piece(s.sw * s.np) + piece(s.sw * s.pitch));
  }
};

// The averages' factors 1 / (rows * columns) of one output row whose windows hold `rows` input
// rows, recomputed only when that count changes (the first and last rows clip): few divisions.
template <class T>
CTN_POOL_INLINE const T *reciprocals(const PoolState &s, const Scratch<T> &sc, int64_t rows, T *inv_rows) {
  const T r = T(s.include_pad ? s.kh : rows);
  if (r != *inv_rows)
    for (int64_t ow = 0; ow < s.wo; ++ow) sc.inv[ow] = T(1) / (r * sc.cnt[ow]);
  *inv_rows = r;
  return sc.inv;
}

// Asks for the input rows that output row oh reads and the rows above it do not (planes beyond
// the L2 cache come from L3 or memory; the hardware prefetcher alone leaves the rows pass
// waiting).
template <class T>
CTN_POOL_INLINE void prefetch_rows(const PoolState &s, const T *x, int64_t oh) {
  if (oh >= s.ho) return;
  int64_t h0, h1;
  window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
  h0 = std::max(h0, h1 - s.sh);
  const char *a = reinterpret_cast<const char *>(x + h0 * s.w), *b = reinterpret_cast<const char *>(x + h1 * s.w);
  for (; a < b; a += 64) __builtin_prefetch(a);
}

// One output row of the forward pass into o[0, wo): Op over the window's rows [h0, h1), then
// over the column taps. False, and o untouched, when Op is PlainMaxOp and the rows hold a NaN.
template <class Op, class T>
CTN_POOL_INLINE bool pool_row(const PoolState &s, const Scratch<T> &sc, const T *x, int64_t h0, int64_t h1, T *o) {
  if (combine_rows<Op>(x, s.w, h0, h1, s.sw == 1 ? sc.pp + s.padl : sc.row)) return false;
  if (s.sw != 1) phases<true>(sc.row, s.w, s.sw, s.pitch, sc.pp + s.padl);
  combine_cols<Op>(s, sc.pp, o);
  return true;
}

// max_pool2d (Op PlainMaxOp: output rows whose input rows hold a NaN are redone with MaxOp),
// avg_pool2d (SumOp): one plane.
template <class Op, class T>
CTN_POOL_INLINE void pool_plane(const PoolState &s, const Scratch<T> &sc, const T *x, T *y) {
  const bool avg = std::is_same_v<Op, SumOp<T>>;
  if (s.global) {
    bool bad;
    const T m = reduce_plane<Op>(x, s.h * s.w, &bad);
    y[0] = bad ? reduce_plane<MaxOp<T>>(x, s.h * s.w, &bad) : avg ? m / T(s.h * s.w) : m;
    return;
  }
  T inv_rows = 0;  // the count of rows sc.inv holds the reciprocals for
  for (int64_t oh = 0; oh < s.ho; ++oh) {
    int64_t h0, h1;
    window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
    T *__restrict yr = y + oh * s.wo;
    prefetch_rows(s, x, oh + 2);
    if (!pool_row<Op>(s, sc, x, h0, h1, yr)) {
      pool_row<MaxOp<T>>(s, sc, x, h0, h1, yr);
      continue;
    }
    if (avg) {
      const T *__restrict inv = reciprocals(s, sc, h1 - h0, &inv_rows);
      for (int64_t ow = 0; ow < s.wo; ++ow) yr[ow] *= inv[ow];
    }
  }
}

// max_pool2d_grad, one plane: each window's maximum m as in the forward pass; then, taps in
// row-major order, the first tap equal to m (or NaN: m is NaN exactly when one of the taps is)
// is the window's argument; the gradients are added output row by output row, column by column,
// as the reference loop does.
template <class T>
CTN_POOL_INLINE void max_grad_plane(const PoolState &s, const Scratch<T> &sc, const T *x, const T *dy, T *dx) {
  using Idx = std::remove_pointer_t<decltype(sc.arg)>;
  std::fill(dx, dx + s.h * s.w, T(0));
  const Idx sw = static_cast<Idx>(s.sw);
  for (int64_t oh = 0; oh < s.ho; ++oh) {
    int64_t h0, h1;
    window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
    pool_row<MaxOp<T>>(s, sc, x, h0, h1, sc.col);
    Idx *__restrict arg = sc.arg;
    for (int64_t ow = 0; ow < s.wo; ++ow) arg[ow] = -1;
    for (int64_t ih = h0; ih < h1; ++ih) {
      const T *p = split(s, x + ih * s.w, sc.ph);
      for (const Tap &t : s.taps) {
        const T *__restrict v = p + (t.r * s.np + t.a + t.lo);
        const T *__restrict m = sc.col + t.lo;
        Idx *__restrict ag = arg + t.lo;
        const Idx n = static_cast<Idx>(t.hi - t.lo), i0 = static_cast<Idx>(ih * s.w + (t.a + t.lo) * s.sw + t.r);
        for (Idx i = 0; i < n; ++i) {
          const bool hit = (ag[i] < 0) & ((v[i] == m[i]) | (v[i] != v[i]));
          ag[i] = hit ? i0 + i * sw : ag[i];
        }
      }
    }
    const T *__restrict g = dy + oh * s.wo;
    for (int64_t ow = 0; ow < s.wo; ++ow) dx[arg[ow]] += g[ow];
  }
}

// avg_pool2d_grad, one plane: each output row's gradients (dy / divisor) spread over the
// columns of their windows (into the phases, then merged into one row), and that row added
// to every input row under the windows.
template <class T>
CTN_POOL_INLINE void avg_grad_plane(const PoolState &s, const Scratch<T> &sc, const T *dy, T *dx) {
  std::fill(dx, dx + s.h * s.w, T(0));
  T *__restrict g = sc.col;
  T inv_rows = 0;
  for (int64_t oh = 0; oh < s.ho; ++oh) {
    int64_t h0, h1;
    window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
    const T *__restrict inv = reciprocals(s, sc, h1 - h0, &inv_rows);
    const T *__restrict d = dy + oh * s.wo;
    for (int64_t ow = 0; ow < s.wo; ++ow) g[ow] = d[ow] * inv[ow];
    T *ph = s.sw == 1 ? sc.row : sc.ph;
    std::fill(ph, ph + s.sw * s.np, T(0));
    for (const Tap &t : s.taps) {
      T *__restrict p = ph + (t.r * s.np + t.a + t.lo);
      const T *__restrict gi = g + t.lo;
      const int64_t n = t.hi - t.lo;
      for (int64_t i = 0; i < n; ++i) p[i] += gi[i];
    }
    if (s.sw != 1) phases<false>(sc.row, s.w, s.sw, s.np, sc.ph);
    const T *__restrict r = sc.row;
    for (int64_t ih = h0; ih < h1; ++ih) {
      T *__restrict o = dx + ih * s.w;
      for (int64_t j = 0; j < s.w; ++j) o[j] += r[j];
    }
  }
}

// max_pool2d_grad with 2x2 windows, stride 2, no padding (the common CNN pool): windows never
// overlap, so each input element is written exactly once and no window bounds are needed. Same
// results as the general path, NaN and tie rules included.
template <class T>
struct Grad2x2 {
  const PoolState *st;

  static T max4(T a, T b, T c, T d) {
    T m = a;
    m = (b > m || b != b) ? b : m;
    m = (c > m || c != c) ? c : m;
    return (d > m || d != d) ? d : m;
  }
  // One window of the 2x2 gradient, branch-free: the window's maximum m (NaN if any tap is NaN)
  // as in the forward pass, and the gradient to the first tap that is m (or NaN): the same tap
  // as the general loop's first maximum in row-major order.
  static void max_grad_window(const T *r0, const T *r1, T gv, T *d0, T *d1, int64_t ow) {
    const T v0 = r0[2 * ow], v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];
    const T m = max4(v0, v1, v2, v3);
    const bool h0 = v0 == m || v0 != v0, h1 = v1 == m || v1 != v1, h2 = v2 == m || v2 != v2;
    d0[2 * ow] = h0 ? gv : T(0);
    d0[2 * ow + 1] = (h1 && !h0) ? gv : T(0);
    d1[2 * ow] = (h2 && !h0 && !h1) ? gv : T(0);
    d1[2 * ow + 1] = (h0 || h1 || h2) ? T(0) : gv;
  }

  // f32, four windows at a time in 4-lane vectors (GCC vector extensions: SSE2, NEON, plain
  // code on 32-bit ARM). Each vector holds two windows' taps of one input row; the column
  // maximum, swapped within lane pairs, gives each window's maximum m on its lanes; the taps
  // equal to m are the hits, and the first hit in row-major order (row 0 even, row 0 odd, row 1
  // even, row 1 odd) gets the gradient. A block with a NaN takes max_grad_window. Rows of fewer
  // than four windows are left to the caller (returns the number of output columns done).
  static int64_t max_grad_row_f32(const float *r0, const float *r1, const float *g, float *d0, float *d1,
                                  int64_t wo) {
    typedef float F __attribute__((vector_size(16)));
    typedef int32_t I __attribute__((vector_size(16)));
    const I odd = {0, -1, 0, -1};
#if defined(__clang__)
#define CTN_POOL_SHUF(v, a, b, c, d) __builtin_shufflevector(v, v, a, b, c, d)
#else
#define CTN_POOL_SHUF(v, a, b, c, d) __builtin_shuffle(v, I{a, b, c, d})
#endif
    auto ld = [](const float *p) {
      F v;
      std::memcpy(&v, p, sizeof v);
      return v;
    };
    auto sto = [](float *p, F v) { std::memcpy(p, &v, sizeof v); };
    const auto block = [&](int64_t ow) {
      const F a0 = ld(r0 + 2 * ow), a1 = ld(r0 + 2 * ow + 4), b0 = ld(r1 + 2 * ow), b1 = ld(r1 + 2 * ow + 4);
      const I nan = (a0 != a0) | (a1 != a1) | (b0 != b0) | (b1 != b1);
      uint64_t any[2];
      std::memcpy(any, &nan, sizeof any);
      if (any[0] | any[1]) {
        for (int64_t k = ow; k < ow + 4; ++k) max_grad_window(r0, r1, g[k], d0, d1, k);
        return;
      }
      const F gv = ld(g + ow);
      const F g0 = CTN_POOL_SHUF(gv, 0, 0, 1, 1), g1 = CTN_POOL_SHUF(gv, 2, 2, 3, 3);
      const auto half = [&](F a, F b, F gg, float *da, float *db) {
        const F col = a > b ? a : b;
        const F oth = CTN_POOL_SHUF(col, 1, 0, 3, 2);
        const F m = col > oth ? col : oth;
        const I ha = a == m, hb = b == m;
        const I ha_s = CTN_POOL_SHUF(ha, 1, 0, 3, 2), hb_s = CTN_POOL_SHUF(hb, 1, 0, 3, 2);
        const I ta = ha & ~(ha_s & odd), tb = hb & ~(ha | ha_s | (hb_s & odd));
        sto(da, (F)((I)gg & ta));
        sto(db, (F)((I)gg & tb));
      };
      half(a0, b0, g0, d0 + 2 * ow, d1 + 2 * ow);
      half(a1, b1, g1, d0 + 2 * ow + 4, d1 + 2 * ow + 4);
    };
    if (wo < 4) return 0;
    int64_t ow = 0;
    for (; ow + 4 <= wo; ow += 4) block(ow);
    // The last windows: one more block ending at the last window, overlapping windows already
    // done (each window's result depends on its own inputs only, so rewriting them is harmless).
    if (ow < wo) block(wo - 4);
    return wo;
#undef CTN_POOL_SHUF
  }

  void max_grad_plane_2x2(const T *xp, const T *dyp, T *dxp) const {
    const PoolState &s = *st;
    const int64_t wo = s.wo;
    for (int64_t oh = 0; oh < s.ho; ++oh) {
      const T *__restrict r0 = xp + 2 * oh * s.w;
      const T *__restrict r1 = r0 + s.w;
      T *__restrict d0 = dxp + 2 * oh * s.w;
      T *__restrict d1 = d0 + s.w;
      const T *__restrict g = dyp + oh * wo;
      int64_t ow = 0;
      if constexpr (std::is_same_v<T, float>) ow = max_grad_row_f32(r0, r1, g, d0, d1, wo);
      for (; ow < wo; ++ow) max_grad_window(r0, r1, g[ow], d0, d1, ow);
      for (int64_t iw = 2 * wo; iw < s.w; ++iw) d0[iw] = d1[iw] = T(0);  // odd width
    }
    for (int64_t ih = 2 * s.ho; ih < s.h; ++ih) std::fill(dxp + ih * s.w, dxp + (ih + 1) * s.w, T(0));
  }
};

// NHWC max_pool2d (kMax) or avg_pool2d: output rows r = n * Ho + oh in [r0, r1).
template <bool kMax, class T>
CTN_POOL_INLINE void nhwc_rows(const PoolState &s, const T *x, T *y, int64_t r0, int64_t r1) {
  const int64_t c = s.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / s.ho, oh = r % s.ho;
    int64_t h0, h1;
    window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
    for (int64_t ow = 0; ow < s.wo; ++ow) {
      int64_t w0, w1;
      window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1);
      T *__restrict o = y + (r * s.wo + ow) * c;
      std::fill(o, o + c, kMax ? MaxOp<T>::init() : T(0));
      for (int64_t ih = h0; ih < h1; ++ih)
        for (int64_t iw = w0; iw < w1; ++iw) {
          const T *__restrict v = x + ((n * s.h + ih) * s.w + iw) * c;
          for (int64_t j = 0; j < c; ++j) o[j] = kMax ? MaxOp<T>::f(o[j], v[j]) : o[j] + v[j];
        }
      if (kMax) continue;
      const T inv = T(1) / (s.include_pad ? T(s.kh) * T(s.kw) : T(h1 - h0) * T(w1 - w0));
      for (int64_t j = 0; j < c; ++j) o[j] *= inv;
    }
  }
}

// Planes [p0, p1) (NHWC: output rows) with the scratch in `slot`; inlined into one function per
// instruction set.
template <class T>
CTN_POOL_INLINE void run_planes(const PoolJob<T> &job, int64_t p0, int64_t p1, char *slot) {
  const PoolState &s = *job.st;
  if (s.nhwc) {
    if (s.kind == PoolKind::kMax)
      nhwc_rows<true>(s, job.x, job.out, p0, p1);
    else
      nhwc_rows<false>(s, job.x, job.out, p0, p1);
    return;
  }
  const Scratch<T> sc(slot, s);
  const int64_t in_sz = s.h * s.w, out_sz = s.ho * s.wo;
  if (s.kind == PoolKind::kAvg || s.kind == PoolKind::kAvgGrad) {
    std::fill(sc.cnt, sc.cnt + s.wo, s.include_pad ? T(s.kw) : T(0));
    for (const Tap &t : s.taps)
      for (int64_t ow = t.lo; ow < t.hi && !s.include_pad; ++ow) sc.cnt[ow] += T(1);
  }
  // The padding of the padded phases, written once: the rows pass and the split fill the rest.
  const bool max = s.kind == PoolKind::kMax || s.kind == PoolKind::kMaxGrad;
  std::fill(sc.pp, sc.pp + s.sw * s.pitch, max ? MaxOp<T>::init() : T(0));
  for (int64_t p = p0; p < p1; ++p) {
    switch (s.kind) {
      case PoolKind::kMax: pool_plane<PlainMaxOp<T>>(s, sc, job.x + p * in_sz, job.out + p * out_sz); break;
      case PoolKind::kAvg: pool_plane<SumOp<T>>(s, sc, job.x + p * in_sz, job.out + p * out_sz); break;
      case PoolKind::kAvgGrad: avg_grad_plane(s, sc, job.x + p * out_sz, job.out + p * in_sz); break;
      case PoolKind::kMaxGrad:
        if (s.k2)
          Grad2x2<T>{&s}.max_grad_plane_2x2(job.x + p * in_sz, job.dy + p * out_sz, job.out + p * in_sz);
        else
          max_grad_plane(s, sc, job.x + p * in_sz, job.dy + p * out_sz, job.out + p * in_sz);
        break;
    }
  }
}

#define CTN_POOL_VARIANT(SUFFIX, TARGET)                                                    \
  TARGET void planes_##SUFFIX(const PoolJob<float> &j, int64_t p0, int64_t p1, char *ws) {  \
    run_planes(j, p0, p1, ws);                                                              \
  }                                                                                         \
  TARGET void planes_##SUFFIX(const PoolJob<double> &j, int64_t p0, int64_t p1, char *ws) { \
    run_planes(j, p0, p1, ws);                                                              \
  }

CTN_ISA_VARIANTS(CTN_POOL_VARIANT, "avx2")

template <class T>
PlanesFn<T> planes_for(const char *isa) {
  return CTN_ISA_VARIANT(PlanesFn<T>, isa, planes);
}

template <class T>
void pool_part(void *ctx, int64_t a, int64_t b, int) {
  const auto &job = *static_cast<const PoolJob<T> *>(ctx);
  const PoolState &s = *job.st;
  PlanesFn<T> run;
  if constexpr (std::is_same_v<T, float>)
    run = s.run32;
  else
    run = s.run64;
  for (int64_t i = a; i < b; ++i)
    run(job, i * s.planes / job.parts, (i + 1) * s.planes / job.parts, job.ws + i * s.slot);
}

template <class T>
ctn_status pool_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const PoolState *>(state);
  PoolJob<T> job{st, desc_ptr<const T>(args->inputs[0]), nullptr, desc_ptr<T>(args->outputs[0]),
                 static_cast<char *>(args->workspace), 1};
  if (st->kind == PoolKind::kMaxGrad) job.dy = desc_ptr<const T>(args->inputs[2]);
  // One part per pool participant (planes 64 of batch 1 split in two on two threads) when the
  // work is worth waking the pool.
  if (st->work >= kParallelThreshold)
    job.parts = std::min<int64_t>({st->parts_max, st->planes, static_cast<int64_t>(st->be->pool->size())});
  if (job.parts > 1)
    st->be->pool->parallel_for(job.parts, 1, pool_part<T>, &job);
  else
    pool_part<T>(&job, 0, 1, 0);
  return CTN_OK;
}

// The column taps: tap k reads input column ow * sw + k - pw, which exists for ow in [lo, hi).
void make_taps(PoolState &s) {
  s.np = (s.w + s.sw - 1) / s.sw;
  s.taps.resize(static_cast<size_t>(s.kw));
  for (int64_t k = 0; k < s.kw; ++k) {
    Tap &t = s.taps[static_cast<size_t>(k)];
    const int64_t q = k - s.pw;
    t.a = q >= 0 ? q / s.sw : -((-q + s.sw - 1) / s.sw);  // floor(q / sw)
    t.r = q - t.a * s.sw;
    t.lo = std::max<int64_t>(-t.a, 0);                           // ow * sw + q >= 0
    t.hi = std::min<int64_t>(s.wo, (s.w - 1 - q) / s.sw + 1);    // ow * sw + q <= w - 1
    t.hi = std::max(t.hi, t.lo);
  }
  // Padded phases: columns before the row and after it read Op::init() instead of being clipped.
  s.padl = std::max<int64_t>(0, -s.taps.front().a);
  s.pitch = s.padl + std::max(s.np, s.wo + s.taps.back().a);
  for (Tap &t : s.taps) t.off = t.r * s.pitch + s.padl + t.a;
}

}  // namespace

ctn_status make_pool_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  static constexpr struct {
    const char *name;
    PoolKind kind;
  } kOps[] = {{CTN_OP_MAX_POOL2D, PoolKind::kMax},
              {CTN_OP_MAX_POOL2D_GRAD, PoolKind::kMaxGrad},
              {CTN_OP_AVG_POOL2D, PoolKind::kAvg},
              {CTN_OP_AVG_POOL2D_GRAD, PoolKind::kAvgGrad}};
  const auto *entry = find_entry(kOps, sig->op);
  if (!entry) return CTN_OK;
  const PoolKind kind = entry->kind;
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &y = *sig->output;
  if (ctn_status s = need_float(host, "cpu", sig->op, y.dtype); s) return s;
  const bool grad = kind == PoolKind::kMaxGrad || kind == PoolKind::kAvgGrad;
  // Full-size and pooled descriptors (the core's shape inference proved them consistent).
  const ctn_tensor_desc &big = kind == PoolKind::kAvgGrad ? y : sig->inputs[0];
  const ctn_tensor_desc &small = kind == PoolKind::kAvgGrad ? sig->inputs[0] : grad ? sig->inputs[2] : y;
  const int64_t *at = sig->attrs->i;
  auto st = new_state<PoolState>(be);
  st->kind = kind;
  st->kh = at[0], st->kw = at[1], st->sh = at[2], st->sw = at[3], st->ph = at[4], st->pw = at[5];
  st->include_pad = (kind == PoolKind::kAvg || kind == PoolKind::kAvgGrad) && at[6] != 0;
  const uint32_t layout_slot = kind == PoolKind::kMax ? 6 : 7;  // forward pools' layout (since 1.7)
  st->nhwc = !grad && sig->attrs->ni > layout_slot && at[layout_slot] == CTN_LAYOUT_NHWC;
  const int hd = st->nhwc ? 1 : 2, cd = st->nhwc ? 3 : 1;  // the H and C dims
  st->c = big.shape[cd];
  st->planes = big.shape[0] * big.shape[1];
  st->h = big.shape[hd], st->w = big.shape[hd + 1];
  st->ho = small.shape[hd], st->wo = small.shape[hd + 1];
  st->work = big.shape[0] * st->c * (st->h * st->w + st->ho * st->wo * st->kh * st->kw);
  if (st->nhwc) st->planes = big.shape[0] * st->ho;  // NHWC splits the output rows
  st->global = !st->nhwc && st->kh == st->h && st->kw == st->w && st->ph == 0 && st->pw == 0;
  st->k2 = st->kh == 2 && st->kw == 2 && st->sh == 2 && st->sw == 2 && st->ph == 0 && st->pw == 0;
  // max_pool2d_grad's arguments are plane offsets in lanes as wide as the data.
  if (kind == PoolKind::kMaxGrad && y.dtype == CTN_F32 && st->h * st->w > INT32_MAX)
    return host->set_error(CTN_ERR_UNSUPPORTED, "cpu %s: f32 planes of more than 2^31 elements", sig->op);
  make_taps(*st);
  st->run32 = planes_for<float>(be->gemm_isa.load()->name);
  st->run64 = planes_for<double>(be->gemm_isa.load()->name);
  st->parts_max = std::max(1, be->num_threads.load());
  st->slot = st->nhwc ? 0 : Scratch<double>::bytes(*st);  // NHWC needs no scratch (a NULL workspace)
  const uint64_t ws = static_cast<uint64_t>(st->parts_max * st->slot);
  kernel_set(out, y.dtype == CTN_F32 ? pool_kernel<float> : pool_kernel<double>, st.release(), 0, ws);
  return CTN_OK;
}

}  // namespace ctn_cpu
