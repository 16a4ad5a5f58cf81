// max_pool2d, max_pool2d_grad, avg_pool2d, avg_pool2d_grad. Each (image, channel) plane is
// independent, so planes are split over the pool; within a plane the window bounds are clipped
// once per output row and column instead of testing every tap.
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

enum class PoolKind { kMax, kMaxGrad, kAvg, kAvgGrad };

struct PoolState : KernelBase {
  PoolKind kind = PoolKind::kMax;
  int64_t planes = 0, h = 0, w = 0, ho = 0, wo = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool include_pad = false;
};

// Clipped window [lo, hi) of output index o along one axis.
inline void window(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t a = o * s - p;
  *lo = std::max<int64_t>(a, 0);
  *hi = std::min<int64_t>(a + k, n);
}

template <class T>
struct PoolCall {
  const PoolState *st;
  const T *x;   // max, max-grad: x; avg: x; avg-grad: dy
  const T *dy;  // max-grad only
  T *out;

  void max_plane(const T *xp, T *yp) const {
    const PoolState &s = *st;
    for (int64_t oh = 0; oh < s.ho; ++oh) {
      int64_t h0, h1;
      window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
      for (int64_t ow = 0; ow < s.wo; ++ow) {
        int64_t w0, w1;
        window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1);
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            T v = xp[ih * s.w + iw];
            if (v > m || v != v) m = v;  // NaN propagates
          }
        yp[oh * s.wo + ow] = m;
      }
    }
  }

  // The gradient of each window goes to its first maximum in row-major order.
  void max_grad_plane(const T *xp, const T *dyp, T *dxp) const {
    const PoolState &s = *st;
    std::fill(dxp, dxp + s.h * s.w, T(0));
    for (int64_t oh = 0; oh < s.ho; ++oh) {
      int64_t h0, h1;
      window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
      for (int64_t ow = 0; ow < s.wo; ++ow) {
        int64_t w0, w1;
        window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1);
        T m = -std::numeric_limits<T>::infinity();
        int64_t arg = h0 * s.w + w0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            T v = xp[ih * s.w + iw];
            if (v > m || (v != v && m == m)) {
              m = v;
              arg = ih * s.w + iw;
            }
          }
        dxp[arg] += dyp[oh * s.wo + ow];
      }
    }
  }

  T divisor(int64_t h0, int64_t h1, int64_t w0, int64_t w1) const {
    return st->include_pad ? T(st->kh * st->kw) : T((h1 - h0) * (w1 - w0));
  }

  void avg_plane(const T *xp, T *yp) const {
    const PoolState &s = *st;
    for (int64_t oh = 0; oh < s.ho; ++oh) {
      int64_t h0, h1;
      window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
      for (int64_t ow = 0; ow < s.wo; ++ow) {
        int64_t w0, w1;
        window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1);
        T acc = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc += xp[ih * s.w + iw];
        yp[oh * s.wo + ow] = acc / divisor(h0, h1, w0, w1);
      }
    }
  }

  void avg_grad_plane(const T *dyp, T *dxp) const {
    const PoolState &s = *st;
    std::fill(dxp, dxp + s.h * s.w, T(0));
    for (int64_t oh = 0; oh < s.ho; ++oh) {
      int64_t h0, h1;
      window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1);
      for (int64_t ow = 0; ow < s.wo; ++ow) {
        int64_t w0, w1;
        window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1);
        T g = dyp[oh * s.wo + ow] / divisor(h0, h1, w0, w1);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) dxp[ih * s.w + iw] += g;
      }
    }
  }

  // 2x2 windows, stride 2, no padding (the common CNN pool): windows never overlap, so each
  // input element is written exactly once and no window bounds are needed. Same results as the
  // general loops, NaN and tie rules included.
  static T max4(T a, T b, T c, T d) {
    T m = a;
    m = (b > m || b != b) ? b : m;
    m = (c > m || c != c) ? c : m;
    return (d > m || d != d) ? d : m;
  }
  void max_plane_2x2(const T *xp, T *yp) const {
    const PoolState &s = *st;
    for (int64_t oh = 0; oh < s.ho; ++oh) {
      const T *__restrict r0 = xp + 2 * oh * s.w;
      const T *__restrict r1 = r0 + s.w;
      T *__restrict yr = yp + oh * s.wo;
      for (int64_t ow = 0; ow < s.wo; ++ow) yr[ow] = max4(r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1]);
    }
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

  void planes(int64_t p0, int64_t p1) const {
    const PoolState &s = *st;
    const int64_t in_sz = s.h * s.w, out_sz = s.ho * s.wo;
    const bool k2 = s.kh == 2 && s.kw == 2 && s.sh == 2 && s.sw == 2 && s.ph == 0 && s.pw == 0;
    if (k2 && (s.kind == PoolKind::kMax || s.kind == PoolKind::kMaxGrad)) {
      for (int64_t p = p0; p < p1; ++p) {
        if (s.kind == PoolKind::kMax)
          max_plane_2x2(x + p * in_sz, out + p * out_sz);
        else
          max_grad_plane_2x2(x + p * in_sz, dy + p * out_sz, out + p * in_sz);
      }
      return;
    }
    for (int64_t p = p0; p < p1; ++p) {
      switch (s.kind) {
        case PoolKind::kMax: max_plane(x + p * in_sz, out + p * out_sz); break;
        case PoolKind::kMaxGrad: max_grad_plane(x + p * in_sz, dy + p * out_sz, out + p * in_sz); break;
        case PoolKind::kAvg: avg_plane(x + p * in_sz, out + p * out_sz); break;
        case PoolKind::kAvgGrad: avg_grad_plane(x + p * out_sz, out + p * in_sz); break;
      }
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) { static_cast<const PoolCall *>(ctx)->planes(a, b); }
};

template <class T>
ctn_status pool_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const PoolState *>(state);
  PoolCall<T> call{st, desc_ptr<const T>(args->inputs[0]), nullptr, desc_ptr<T>(args->outputs[0])};
  if (st->kind == PoolKind::kMaxGrad) call.dy = desc_ptr<const T>(args->inputs[2]);
  const int64_t work = st->planes * (st->h * st->w + st->ho * st->wo * st->kh * st->kw);
  if (work >= kParallelThreshold && st->be->pool->size() > 1)
    st->be->pool->parallel_for(st->planes, 1, PoolCall<T>::part, &call);
  else
    call.planes(0, st->planes);
  return CTN_OK;
}

}  // namespace

ctn_status make_pool_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const char *op = sig->op;
  PoolKind kind;
  if (!std::strcmp(op, CTN_OP_MAX_POOL2D)) {
    kind = PoolKind::kMax;
  } else if (!std::strcmp(op, CTN_OP_MAX_POOL2D_GRAD)) {
    kind = PoolKind::kMaxGrad;
  } else if (!std::strcmp(op, CTN_OP_AVG_POOL2D)) {
    kind = PoolKind::kAvg;
  } else if (!std::strcmp(op, CTN_OP_AVG_POOL2D_GRAD)) {
    kind = PoolKind::kAvgGrad;
  } else {
    return CTN_OK;
  }
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &y = *sig->output;
  if (ctn_status s = need_float(host, "cpu", sig->op, y.dtype); s) return s;
  const bool grad = kind == PoolKind::kMaxGrad || kind == PoolKind::kAvgGrad;
  // Full-size and pooled descriptors.
  const ctn_tensor_desc &big = kind == PoolKind::kAvgGrad ? y : sig->inputs[0];
  const ctn_tensor_desc &small = kind == PoolKind::kAvgGrad ? sig->inputs[0] : grad ? sig->inputs[2] : y;
  const int64_t *at = sig->attrs->i;
  auto st = new_state<PoolState>(be);
  st->kind = kind;
  st->kh = at[0], st->kw = at[1], st->sh = at[2], st->sw = at[3], st->ph = at[4], st->pw = at[5];
  st->include_pad = (kind == PoolKind::kAvg || kind == PoolKind::kAvgGrad) && at[6] != 0;
  st->planes = big.shape[0] * big.shape[1];
  st->h = big.shape[2], st->w = big.shape[3];
  st->ho = small.shape[2], st->wo = small.shape[3];
  bool ok = st->kh >= 1 && st->kw >= 1 && st->sh >= 1 && st->sw >= 1 && st->ph >= 0 && st->pw >= 0 &&
            2 * st->ph <= st->kh && 2 * st->pw <= st->kw && small.shape[0] == big.shape[0] &&
            small.shape[1] == big.shape[1] && st->h + 2 * st->ph >= st->kh && st->w + 2 * st->pw >= st->kw &&
            st->ho == (st->h + 2 * st->ph - st->kh) / st->sh + 1 && st->wo == (st->w + 2 * st->pw - st->kw) / st->sw + 1;
  if (kind == PoolKind::kMaxGrad) ok = ok && same_shape(sig->inputs[1], small) && same_shape(y, big);
  kernel_set(out, y.dtype == CTN_F32 ? pool_kernel<float> : pool_kernel<double>, st.release());
  return CTN_OK;
}

}  // namespace ctn_cpu
