// conv2d, conv2d_grad_input, conv2d_grad_weight and conv_transpose2d: im2col + the own GEMM;
// depthwise conv2d (one input and one output channel per group) directly, without either.
// The batch is split into one chunk per pool participant; each chunk runs serial GEMMs with the
// packing scratch of the thread running it and its own slice of the workspace, so images never share
// memory and a call never allocates. Per-image GEMMs write NCHW directly (no transposes), and
// 1x1 stride-1 unpadded convolutions skip im2col (the input already is the column matrix).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

enum class ConvKind { kForward, kGradInput, kGradWeight };  // make_onednn_conv's 0, 1, 2

// Input channels per group from which ConvMode::kAuto picks oneDNN for the backward kernels.
constexpr int64_t kOneDNNMinChannels = 8;

// A convolution of input [N,C,H,W] with weight [O,C/G,KH,KW] to output [N,O,Ho,Wo], whatever
// the op: grad-input and conv_transpose2d run it backwards, grad-weight reduces over N.
struct ConvGeom {
  int64_t n, c, h, w, o, kh, kw, ho, wo, sh, sw, ph, pw, dh, dw, g;
  int64_t cg, og, kg, p, hw;  // per group: channels in/out, GEMM depth C/G*KH*KW; Ho*Wo; H*W
  bool pointwise;
  void finish() {
    cg = c / g;
    og = o / g;
    kg = cg * kh * kw;
    p = ho * wo;
    hw = h * w;
    pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
  }
};

struct ConvState : KernelBase {
  ConvGeom g{};
  ConvKind kind = ConvKind::kForward;
  int64_t chunks_max = 1;     // workspace slots (pool size at get_kernel)
  int64_t shared_elems = 0;   // transposed weight (grad-input)
  int64_t slot_elems = 0;     // per slot: columns (+ weight accumulator for grad-weight)
  // The bf16 GEMM for an f32 convolution whose operands are bf16 values (a bf16 convolution
  // between conversions, k_widen.cpp): its operands are rounded to bf16 as it packs them, which
  // changes none, and it sums in f32. nullptr: the f32 GEMM.
  const Bf16Gemm *bf16 = nullptr;
};

// Valid output columns [lo, hi) for kernel column offset `off` (= k * d - pad): those whose
// input column ow * s + off lies in [0, w).
inline void valid_range(int64_t off, int64_t s, int64_t w, int64_t wo, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = w - off <= 0 ? 0 : (w - off + s - 1) / s;
  a = std::min(a, wo);
  b = std::min(std::max(b, a), wo);
  *lo = a;
  *hi = b;
}

// Short rows (a 14-wide feature map has 14-element rows): fixed-size 32-byte moves inline as
// vector loads/stores, where std::copy / std::fill would call memmove / memset per row.
#if defined(__GNUC__) && !defined(__clang__)
#define CTN_NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define CTN_NO_LIBCALLS
#endif
template <class T>
CTN_NO_LIBCALLS inline void copy_row(T *__restrict d, const T *__restrict s, int64_t n) {
  constexpr int64_t V = 32 / sizeof(T);
  int64_t i = 0;
  for (; i + V <= n; i += V) std::memcpy(d + i, s + i, 32);
  for (; i < n; ++i) d[i] = s[i];
}
template <class T>
CTN_NO_LIBCALLS inline void zero_row(T *d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = T(0);
}

// col[(c*KH + i)*KW + j][oh*Wo + ow] = x[c][oh*sh - ph + i*dh][ow*sw - pw + j*dw], 0 outside.
template <class T>
void im2col(const ConvGeom &g, const T *x, T *col, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T *row = col + ((c * g.kh + i) * g.kw + j) * g.p;
        const int64_t off = j * g.dw - g.pw;
        int64_t lo, hi;
        valid_range(off, g.sw, g.w, g.wo, &lo, &hi);
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          T *r = row + oh * g.wo;
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) {
            zero_row(r, g.wo);
            continue;
          }
          const T *xr = x + (c * g.h + ih) * g.w + off;
          zero_row(r, lo);
          if (g.sw == 1) {
            copy_row(r + lo, xr + lo, hi - lo);
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * g.sw];
          }
          zero_row(r + hi, g.wo - hi);
        }
      }
}

// The adjoint of im2col: x[...] += col[...] (x must be zeroed first).
template <class T>
void col2im_add(const ConvGeom &g, const T *col, T *x, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T *row = col + ((c * g.kh + i) * g.kw + j) * g.p;
        const int64_t off = j * g.dw - g.pw;
        int64_t lo, hi;
        valid_range(off, g.sw, g.w, g.wo, &lo, &hi);
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          const T *r = row + oh * g.wo;
          T *xr = x + (c * g.h + ih) * g.w + off;
          if (g.sw == 1) {
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow] += r[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow * g.sw] += r[ow];
          }
        }
      }
}

template <class T>
void gemm(const ConvState &st, int64_t m, int64_t n, int64_t k, const T *a, int64_t rsa, int64_t csa,
          const T *b, int64_t rsb, int64_t csb, T *c, int64_t ldc, bool acc) {
  if constexpr (sizeof(T) == 4) {
    if (st.bf16)
      gemm_bf16_serial(*st.bf16, gemm_bf16_scratch(), m, n, k, {a, true, rsa, csa}, {b, true, rsb, csb}, c, ldc, acc);
    else
      gemm_serial_f32(*st.be, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, acc);
  } else {
    gemm_serial_f64(*st.be, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, acc);
  }
}

template <class T>
struct ConvCall {
  const ConvState *st;
  const T *in0;  // forward: x; grad-input: dy; grad-weight: x
  const T *in1;  // forward: w; grad-input: w (transposed copy in `wt`); grad-weight: dy
  T *out;
  T *ws;
  const T *wt;
  int64_t chunks;

  // Input channels per column block: the block's columns (cb*KH*KW rows of Ho*Wo) stay within
  // ~128 KiB so that im2col writes and the GEMM reads them in L2 (a 32-channel 5x5 layer on
  // 14x14 has 627 KiB of columns per image).
  int64_t block_channels() const {
    const ConvGeom &g = st->g;
    const int64_t per = g.kh * g.kw * g.p * static_cast<int64_t>(sizeof(T));
    return std::clamp<int64_t>((128 << 10) / std::max<int64_t>(per, 1), 1, g.cg);
  }

  // Calls f(gi, c0, cn, cols) for every group and channel block of image n's input, cols being
  // the block's column matrix [cn*KH*KW, P] (the input itself for pointwise convolutions).
  template <class F>
  void column_blocks(int64_t n, T *col, F &&f) const {
    const ConvGeom &g = st->g;
    const int64_t cb = g.pointwise ? g.cg : block_channels();
    for (int64_t gi = 0; gi < g.g; ++gi) {
      const T *xg = in0 + (n * g.c + gi * g.cg) * g.hw;
      for (int64_t c0 = 0; c0 < g.cg; c0 += cb) {
        const int64_t cn = std::min(cb, g.cg - c0);
        const T *b = xg + c0 * g.hw;
        if (!g.pointwise) {
          im2col(g, b, col, cn);
          b = col;
        }
        f(gi, c0, cn, b);
      }
    }
  }

  // y_n[gi] = sum over channel blocks of W[gi][:, block] * cols.
  void forward(int64_t n, T *col) const {
    const ConvGeom &g = st->g;
    const int64_t khw = g.kh * g.kw;
    column_blocks(n, col, [&](int64_t gi, int64_t c0, int64_t cn, const T *b) {
      gemm(*st, g.og, g.p, cn * khw, in1 + gi * g.og * g.kg + c0 * khw, g.kg, int64_t{1}, b, g.p,
           int64_t{1}, out + (n * g.o + gi * g.og) * g.p, g.p, c0 > 0);
    });
  }

  // dx_n = col2im(W^T dy_n), per group and channel block.
  void grad_input(int64_t n, T *col) const {
    const ConvGeom &g = st->g;
    const int64_t khw = g.kh * g.kw, cb = g.pointwise ? g.cg : block_channels();
    for (int64_t gi = 0; gi < g.g; ++gi) {
      T *dxg = out + (n * g.c + gi * g.cg) * g.hw;
      const T *a = wt + gi * g.kg * g.og;  // [Kg, Og]
      const T *dyg = in0 + (n * g.o + gi * g.og) * g.p;
      if (g.pointwise) {
        gemm(*st, g.kg, g.p, g.og, a, g.og, int64_t{1}, dyg, g.p, int64_t{1}, dxg, g.p, false);
        continue;
      }
      std::fill(dxg, dxg + g.cg * g.hw, T(0));
      for (int64_t c0 = 0; c0 < g.cg; c0 += cb) {
        const int64_t cn = std::min(cb, g.cg - c0);
        gemm(*st, cn * khw, g.p, g.og, a + c0 * khw * g.og, g.og, int64_t{1}, dyg, g.p, int64_t{1}, col,
             g.p, false);
        col2im_add(g, col, dxg + c0 * g.hw, cn);
      }
    }
  }

  // acc[gi][:, block] (+)= dy_n[gi] [Og, P] * cols^T [P, cn*KH*KW]: the GEMM reads the
  // forward pass's column layout transposed through its strides (no transposed im2col).
  void grad_weight(int64_t n, T *col, T *acc, bool first) const {
    const ConvGeom &g = st->g;
    const int64_t khw = g.kh * g.kw;
    column_blocks(n, col, [&](int64_t gi, int64_t c0, int64_t cn, const T *b) {
      gemm(*st, g.og, cn * khw, g.p, in1 + (n * g.o + gi * g.og) * g.p, g.p, int64_t{1}, b, int64_t{1},
           g.p, acc + gi * g.og * g.kg + c0 * khw, g.kg, !first);
    });
  }

  static void part_fn(void *ctx, int64_t c0, int64_t c1, int) {
    const auto &call = *static_cast<const ConvCall *>(ctx);
    const ConvState &st = *call.st;
    const int64_t nimg = st.g.n;
    for (int64_t chunk = c0; chunk < c1; ++chunk) {
      T *slot = call.ws + st.shared_elems + chunk * st.slot_elems;
      const int64_t n0 = nimg * chunk / call.chunks, n1 = nimg * (chunk + 1) / call.chunks;
      for (int64_t n = n0; n < n1; ++n) {
        switch (st.kind) {
          case ConvKind::kForward: call.forward(n, slot); break;
          case ConvKind::kGradInput: call.grad_input(n, slot); break;
          case ConvKind::kGradWeight:
            call.grad_weight(n, slot + st.g.o * st.g.kg, slot, n == n0);
            break;
        }
      }
    }
  }
};

// Depthwise conv2d (groups == input channels == output channels): each output plane is one
// input plane filtered by its own KH x KW taps. Direct, no im2col or GEMM: per output row, per
// tap, y_row[ow] += w * x_row[ow * sw + off] over the columns the tap reaches (contiguous and
// vectorised for stride 1). The (image, channel) planes are split over the pool, so batch 1
// uses every thread.
template <class T>
struct DepthwiseCall {
  const ConvGeom *g;
  const T *x, *w;
  T *y;

  void plane(int64_t p) const {
    const ConvGeom &d = *g;
    const T *xp = x + p * d.hw, *wc = w + (p % d.c) * d.kh * d.kw;
    T *yp = y + p * d.p;
    std::fill(yp, yp + d.p, T(0));
    for (int64_t oh = 0; oh < d.ho; ++oh) {
      T *__restrict yr = yp + oh * d.wo;
      for (int64_t i = 0; i < d.kh; ++i) {
        const int64_t ih = oh * d.sh - d.ph + i * d.dh;
        if (ih < 0 || ih >= d.h) continue;
        for (int64_t j = 0; j < d.kw; ++j) {
          const int64_t off = j * d.dw - d.pw;
          int64_t lo, hi;
          valid_range(off, d.sw, d.w, d.wo, &lo, &hi);
          const T wv = wc[i * d.kw + j];
          const T *__restrict xr = xp + ih * d.w;
          if (d.sw == 1)
            for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow + off];
          else
            for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * d.sw + off];
        }
      }
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) {
    for (int64_t p = a; p < b; ++p) static_cast<const DepthwiseCall *>(ctx)->plane(p);
  }
};

template <class T>
ctn_status depthwise_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const ConvState *>(state);
  const ConvGeom &g = st->g;
  DepthwiseCall<T> call{&g, desc_ptr<const T>(args->inputs[0]), desc_ptr<const T>(args->inputs[1]),
                        desc_ptr<T>(args->outputs[0])};
  const int64_t planes = g.n * g.c;
  if (planes * g.p * g.kh * g.kw >= kParallelThreshold && st->be->pool->size() > 1)
    st->be->pool->parallel_for(planes, 1, DepthwiseCall<T>::part, &call);
  else
    DepthwiseCall<T>::part(&call, 0, planes, 0);
  return CTN_OK;
}

template <class T>
ctn_status conv_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const ConvState *>(state);
  Backend &be = *st->be;
  const ConvGeom &g = st->g;
  if (!gemm_scratch_ready()) return st->host->set_error(CTN_ERR_OUT_OF_MEMORY, "cpu conv: no memory for GEMM scratch");
  ConvCall<T> call{st, desc_ptr<const T>(args->inputs[0]), desc_ptr<const T>(args->inputs[1]),
                   desc_ptr<T>(args->outputs[0]), static_cast<T *>(args->workspace), nullptr, 1};
  if (st->kind == ConvKind::kGradInput) {
    // W [G][Og, Kg] -> W^T [G][Kg, Og] once, so each image's GEMM packs contiguous rows.
    T *wt = call.ws;
    for (int64_t gi = 0; gi < g.g; ++gi) {
      const T *src = call.in1 + gi * g.og * g.kg;
      T *dst = wt + gi * g.kg * g.og;
      for (int64_t o = 0; o < g.og; ++o)
        for (int64_t k = 0; k < g.kg; ++k) dst[k * g.og + o] = src[o * g.kg + k];
    }
    call.wt = wt;
  }
  // Enough images per chunk to make waking the pool worth it.
  const int64_t flops = 2 * g.n * g.o * g.p * g.kg;
  int64_t chunks = std::min<int64_t>({st->chunks_max, g.n, static_cast<int64_t>(be.pool->size())});
  if (flops < (1 << 20)) chunks = 1;
  call.chunks = std::max<int64_t>(chunks, 1);
  if (call.chunks > 1)
    be.pool->parallel_for(call.chunks, 1, ConvCall<T>::part_fn, &call);
  else
    ConvCall<T>::part_fn(&call, 0, 1, 0);
  if (st->kind == ConvKind::kGradWeight) {
    // Sum the per-chunk weight gradients.
    const int64_t len = g.o * g.kg;
    T *dw = call.out;
    const T *s0 = call.ws + st->shared_elems;
    std::copy(s0, s0 + len, dw);
    for (int64_t c = 1; c < call.chunks; ++c) {
      const T *s = s0 + c * st->slot_elems;
      for (int64_t i = 0; i < len; ++i) dw[i] += s[i];
    }
    if (g.n == 0) std::fill(dw, dw + len, T(0));
  }
  return CTN_OK;
}

// conv2d_bias_act without oneDNN's fused kernel (f64, conv=own, a build or ISA without it): the
// plain conv2d kernel, then bias and activation in one pass over each output plane.
struct BiasActState : KernelBase {
  ctn_kernel conv{};
  ConvEpilogue epi;
  int64_t planes = 0, channels = 0, hw = 0;
  // conv2d_bias_add_act: `conv` is conv2d_bias_act without activation (it adds the bias), the
  // pass adds the residual (input 3) and applies the activation.
  bool residual = false;
  ~BiasActState() override {
    if (conv.release) conv.release(conv.state);
  }
};

// One output value's activation (CTN_ACT_*), as the unfused ops compute it.
template <int Act, class T>
T epilogue_act(T v, T lo, T hi) {
  if constexpr (Act == CTN_ACT_RELU) return v > 0 ? v : T(0);
  else if constexpr (Act == CTN_ACT_GELU) return T(0.5) * v * (T(1) + std::erf(v * T(0.70710678118654752440)));
  else if constexpr (Act == CTN_ACT_CLAMP) return v < lo ? lo : v > hi ? hi : v;
  else if constexpr (Act == CTN_ACT_SIGMOID) return T(1) / (T(1) + std::exp(-v));
  else if constexpr (Act == CTN_ACT_SILU) return v / (T(1) + std::exp(-v));
  else if constexpr (Act == CTN_ACT_HARDSWISH) return v * std::min(std::max(v * T(1.0 / 6) + T(0.5), T(0)), T(1));
  else return v;
}

// One output plane: row[i] = act(row[i] + (r ? r[i] : b)); the activation is a template
// argument so that the loops vectorise.
template <int Act, class T>
void epilogue_row(T *row, const T *r, T b, int64_t n, T lo, T hi) {
  if (r)
    for (int64_t i = 0; i < n; ++i) row[i] = epilogue_act<Act>(row[i] + r[i], lo, hi);
  else
    for (int64_t i = 0; i < n; ++i) row[i] = epilogue_act<Act>(row[i] + b, lo, hi);
}

template <class T>
using EpilogueRow = void (*)(T *, const T *, T, int64_t, T, T);
template <class T>
constexpr EpilogueRow<T> kEpilogueRows[] = {epilogue_row<CTN_ACT_NONE, T>,    epilogue_row<CTN_ACT_RELU, T>,
                                            epilogue_row<CTN_ACT_GELU, T>,    epilogue_row<CTN_ACT_CLAMP, T>,
                                            epilogue_row<CTN_ACT_SIGMOID, T>, epilogue_row<CTN_ACT_SILU, T>,
                                            epilogue_row<CTN_ACT_HARDSWISH, T>};

template <class T>
struct BiasActCall {
  const BiasActState *st;
  T *y;
  const T *bias;      // nullptr: the inner kernel added it
  const T *residual;  // conv2d_bias_add_act's r, else nullptr
  static void part(void *ctx, int64_t p0, int64_t p1, int) {
    const auto &c = *static_cast<const BiasActCall *>(ctx);
    const ConvEpilogue &e = c.st->epi;
    const EpilogueRow<T> row_fn = kEpilogueRows<T>[e.act];  // act checked when the kernel was made
    const int64_t hw = c.st->hw;
    for (int64_t p = p0; p < p1; ++p)
      row_fn(c.y + p * hw, c.residual ? c.residual + p * hw : nullptr, c.bias ? c.bias[p % c.st->channels] : T(0), hw,
             static_cast<T>(e.lo), static_cast<T>(e.hi));
  }
};

template <class T>
ctn_status bias_act_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const BiasActState *>(state);
  ctn_kernel_args a = *args;
  a.n_inputs = st->residual ? 3 : 2;
  if (ctn_status s = st->conv.fn(st->conv.state, &a); s != CTN_OK) return s;
  BiasActCall<T> call{st, desc_ptr<T>(args->outputs[0]), st->residual ? nullptr : desc_ptr<const T>(args->inputs[2]),
                      st->residual ? desc_ptr<const T>(args->inputs[3]) : nullptr};
  st->be->pool->parallel_for(st->planes, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, st->hw)),
                             BiasActCall<T>::part, &call);
  return CTN_OK;
}

constexpr const char *kNotOneDNN = "f64, bf16, conv mode 'own' or a build without oneDNN";

// A forward convolution's layout (ABI 1.7) at attribute slot k: true for 1 (NHWC).
bool nhwc_layout(const ctn_op_signature *sig, uint32_t k) { return sig->attrs->ni > k && sig->attrs->i[k] == 1; }

// A layout 1 (NHWC) convolution runs only as oneDNN's (f32, conv mode not 'own'): the own
// kernels are NCHW. UNSUPPORTED naming why, so the compiler keeps the node NCHW.
ctn_status nhwc_refused(Backend *be, const ctn_op_signature *sig, const std::string &why) {
  return be->host->set_error(CTN_ERR_UNSUPPORTED, "cpu %s: layout 1 (NHWC) runs only on oneDNN's f32 convolution (%s)",
                             sig->op, why.c_str());
}

// The activation of fused convolution `sig` (i[7], clamp bounds f[0], f[1]); an error for an
// unknown code.
ctn_status read_epilogue(Backend *be, const ctn_op_signature *sig, ConvEpilogue *epi) {
  epi->act = static_cast<int>(sig->attrs->i[7]);
  epi->lo = sig->attrs->f[0];
  epi->hi = sig->attrs->f[1];
  if (epi->act < CTN_ACT_NONE || epi->act > CTN_ACT_HARDSWISH)
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu %s: unknown activation %d", sig->op, epi->act);
  return CTN_OK;
}

ctn_status make_conv_bias_act(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled,
                              const Bf16Gemm *bf16);
ctn_status make_conv(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled, const Bf16Gemm *bf16);

// A fused convolution as an inner kernel and the epilogue pass above: conv2d then bias and
// activation, or (residual) conv2d_bias_act without activation then residual and activation.
ctn_status make_epilogue_kernel(Backend *be, const ctn_op_signature *sig, const ConvEpilogue &epi, bool residual,
                                ctn_kernel *out, const Bf16Gemm *bf16) {
  const ctn_tensor_desc &y = *sig->output;
  auto st = new_state<BiasActState>(be);
  st->epi = epi;
  st->residual = residual;
  st->channels = y.shape[1];
  st->hw = y.shape[2] * y.shape[3];
  st->planes = y.shape[0] * y.shape[1];
  ctn_op_signature csig = *sig;
  csig.op = residual ? CTN_OP_CONV2D_BIAS_ACT : CTN_OP_CONV2D;
  csig.n_inputs = residual ? 3 : 2;
  ctn_attrs ca = *sig->attrs;
  ca.i[7] = CTN_ACT_NONE;
  ca.ni = residual ? 8 : 7;
  ca.nf = 0;
  if (residual && nhwc_layout(sig, 8)) ca.i[8] = 1, ca.ni = 9;  // the residual pass is layout-blind
  csig.attrs = &ca;
  bool inner_handled = false;
  const ctn_status s = residual ? make_conv_bias_act(be, &csig, &st->conv, &inner_handled, bf16)
                                : make_conv(be, &csig, &st->conv, &inner_handled, bf16);
  if (s != CTN_OK) return s;
  const uint64_t ws = st->conv.workspace_size;
  kernel_set(out, sig->inputs[0].dtype == CTN_F32 ? bias_act_kernel<float> : bias_act_kernel<double>, st.release(), 0,
             ws);
  return CTN_OK;
}

// conv2d_bias_act: oneDNN's convolution with a bias and an eltwise post-op (f32), else the
// plain convolution with the epilogue above.
ctn_status make_conv_bias_act(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled,
                              const Bf16Gemm *bf16) {
  *handled = true;
  const ctn_tensor_desc &x = sig->inputs[0], &w = sig->inputs[1], &y = *sig->output;
  if (ctn_status s = need_float(be->host, "cpu", sig->op, x.dtype); s) return s;
  ConvEpilogue epi;
  if (ctn_status s = read_epilogue(be, sig, &epi); s) return s;
  std::string why = kNotOneDNN;
  const bool nhwc = nhwc_layout(sig, 8);
  if (x.dtype == CTN_F32 && !bf16 && be->conv_mode.load() != ConvMode::kOwn && onednn_built_in() &&
      make_onednn_conv(be, 0, x.shape, w.shape, y.shape, sig->attrs->i, out, &why, &epi, nhwc,
                       ctn_sig_const_inputs(sig) >> 1 & 1))
    return CTN_OK;
  if (nhwc) return nhwc_refused(be, sig, why);
  return make_epilogue_kernel(be, sig, epi, false, out, bf16);
}

// conv2d_bias_add_act: conv2d_bias_act without activation (oneDNN's convolution with its bias
// when it applies), then one pass adding the residual and applying the activation.
ctn_status make_conv_bias_add_act(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled,
                                  const Bf16Gemm *bf16) {
  *handled = true;
  if (ctn_status s = need_float(be->host, "cpu", sig->op, sig->inputs[0].dtype); s) return s;
  ConvEpilogue epi;
  if (ctn_status s = read_epilogue(be, sig, &epi); s) return s;
  return make_epilogue_kernel(be, sig, epi, true, out, bf16);
}

// The own convolution; `bf16`: its GEMMs in bf16 (ConvState::bf16), oneDNN not asked.
ctn_status make_conv(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled, const Bf16Gemm *bf16) {
  // conv_transpose2d is conv2d_grad_input with the transpose's input as dy.
  static constexpr struct {
    const char *name;
    ConvKind kind;
    bool transpose;
  } kOps[] = {{CTN_OP_CONV2D, ConvKind::kForward, false},
              {CTN_OP_CONV2D_GRAD_INPUT, ConvKind::kGradInput, false},
              {CTN_OP_CONV_TRANSPOSE2D, ConvKind::kGradInput, true},
              {CTN_OP_CONV2D_GRAD_WEIGHT, ConvKind::kGradWeight, false}};
  if (!std::strcmp(sig->op, CTN_OP_CONV2D_BIAS_ACT)) return make_conv_bias_act(be, sig, out, handled, bf16);
  if (!std::strcmp(sig->op, CTN_OP_CONV2D_BIAS_ADD_ACT)) return make_conv_bias_add_act(be, sig, out, handled, bf16);
  const auto *entry = find_entry(kOps, sig->op);
  if (!entry) return CTN_OK;
  const ConvKind kind = entry->kind;
  const bool transpose = entry->transpose;
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[1], &y = *sig->output;
  if (ctn_status s = need_float(host, "cpu", sig->op, a.dtype); s) return s;
  const int64_t *at = sig->attrs->i;
  ConvGeom g{};
  g.sh = at[0], g.sw = at[1], g.ph = at[2], g.pw = at[3], g.dh = at[4], g.dw = at[5], g.g = at[6];
  // Conv input/weight/output of the underlying convolution.
  const ctn_tensor_desc *cx, *cw, *cy;
  switch (kind) {
    case ConvKind::kForward: cx = &a, cw = &b, cy = &y; break;
    case ConvKind::kGradInput: cx = &y, cw = &b, cy = &a; break;
    default: cx = &a, cw = &y, cy = &b; break;
  }
  g.n = cx->shape[0], g.c = cx->shape[1], g.h = cx->shape[2], g.w = cx->shape[3];
  g.o = cw->shape[0], g.kh = cw->shape[2], g.kw = cw->shape[3];
  g.ho = cy->shape[2], g.wo = cy->shape[3];
  g.finish();
  // oneDNN for f32 convolutions (not conv_transpose2d) where it has a JIT kernel; auto keeps
  // the own backward kernels for few input channels per group (conv1 of the CNN: 1 channel),
  // where oneDNN measured no faster (grad-input 3-5x slower; docs/BENCHMARKS.md).
  const ConvMode mode = be->conv_mode.load();
  const bool auto_onednn = kind == ConvKind::kForward || g.cg >= kOneDNNMinChannels;
  const bool nhwc = kind == ConvKind::kForward && nhwc_layout(sig, 7);
  std::string why = kNotOneDNN;
  if (a.dtype == CTN_F32 && !bf16 && !transpose && onednn_built_in() &&
      (mode == ConvMode::kOneDNN || (mode == ConvMode::kAuto && auto_onednn))) {
    if (make_onednn_conv(be, static_cast<int>(kind), cx->shape, cw->shape, cy->shape, at, out, &why, nullptr, nhwc,
                         ctn_sig_const_inputs(sig) >> 1 & 1))
      return CTN_OK;
    if (mode == ConvMode::kOneDNN && host->log && !nhwc)
      host->log(CTN_LOG_DEBUG, "cpu", ("conv: own kernel, " + why).c_str());
  }
  if (nhwc) return nhwc_refused(be, sig, why);
  auto st = new_state<ConvState>(be);
  st->g = g;
  st->kind = kind;
  st->bf16 = a.dtype == CTN_F32 ? bf16 : nullptr;
  if (kind == ConvKind::kForward && g.cg == 1 && g.og == 1 && g.g > 1) {
    kernel_set(out, a.dtype == CTN_F32 ? depthwise_kernel<float> : depthwise_kernel<double>, st.release());
    return CTN_OK;
  }
  st->chunks_max = std::max(1, be->num_threads.load());
  switch (kind) {
    case ConvKind::kForward: st->slot_elems = g.pointwise ? 0 : g.kg * g.p; break;
    case ConvKind::kGradInput:
      st->shared_elems = g.g * g.kg * g.og;
      st->slot_elems = g.pointwise ? 0 : g.kg * g.p;
      break;
    case ConvKind::kGradWeight: st->slot_elems = g.o * g.kg + g.p * g.kg; break;
  }
  // Round slots to whole cache lines so that two participants never write the same line.
  const int64_t line = 64 / static_cast<int64_t>(dtype_size(a.dtype));
  st->slot_elems = (st->slot_elems + line - 1) / line * line;
  st->shared_elems = (st->shared_elems + line - 1) / line * line;
  const uint64_t ws = static_cast<uint64_t>(st->shared_elems + st->chunks_max * st->slot_elems) *
                      dtype_size(a.dtype);
  kernel_set(out, a.dtype == CTN_F32 ? conv_kernel<float> : conv_kernel<double>, st.release(), 0, ws);
  return CTN_OK;
}

}  // namespace

ctn_status make_conv_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  return make_conv(be, sig, out, handled, nullptr);
}

ctn_status make_conv_kernel_bf16(Backend *be, const ctn_op_signature *sig, ctn_kernel *out) {
  bool handled = false;
  const ctn_status s = make_conv(be, sig, out, &handled, bf16_gemm_for(*be));
  if (!handled) return be->host->set_error(CTN_ERR_UNSUPPORTED, "cpu: '%s' is not a convolution", sig->op);
  return s;
}

}  // namespace ctn_cpu
