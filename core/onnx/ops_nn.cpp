// ONNX neural-network ops: matmul/Gemm, convolutions, pooling, normalisations, dropout.
// Recurrent layers (LSTM, GRU, RNN) are in ops_rnn.cpp.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "tensor/tensor.h"
#include "util/status.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace ctn::onnx {
namespace {

using namespace lower;

void out1(NodeCtx &c, ctn_node y) { c.outs = {y}; }

Shape shape_of(std::initializer_list<int64_t> v) { return Shape::from(static_cast<uint32_t>(v.size()), std::data(v)); }

void matmul(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node a = c.in(0), b = c.in(1);
  Shape as = c.shape(0), bs = c.shape(1);
  const int32_t dt = c.dtype(0);
  if (as.ndim == 0 || bs.ndim == 0) c.invalid("operands must be at least 1-d");
  const bool a1 = as.ndim == 1, b1 = bs.ndim == 1;
  if (a1) a = reshape(g, a, shape_of({1, as[0]}));
  if (b1) b = reshape(g, b, shape_of({bs[0], 1}));
  ctn_node y = dtype_is_float(dt) ? g.op2(CTN_OP_MATMUL, a, b)
                                  : cast(g, g.op2(CTN_OP_MATMUL, cast(g, a, CTN_F64), cast(g, b, CTN_F64)), dt);
  Shape ys = g.info(y).shape, r;
  for (uint32_t k = 0; k < ys.ndim; ++k) {
    if ((a1 && k == ys.ndim - 2) || (b1 && k == ys.ndim - 1)) continue;
    r[r.ndim++] = ys[k];
  }
  out1(c, reshape(g, y, r));
}

void gemm(NodeCtx &c) {
  Graph &g = c.g;
  const double alpha = c.attr_f("alpha", 1.0), beta = c.attr_f("beta", 1.0);
  ctn_attrs a = attrs_i({c.attr_i("transA", 0) != 0, c.attr_i("transB", 0) != 0});
  c.ignore("broadcast");  // opsets < 7 only; opset 7 made broadcasting unconditional
  ctn_node y = g.op2(CTN_OP_MATMUL, c.in(0), c.in(1), &a);
  if (alpha != 1.0) y = g.op2(CTN_OP_MUL, y, scalar_like(g, y, alpha));
  if (c.has(2)) {
    ctn_node bias = c.in(2);
    if (beta != 1.0) bias = g.op2(CTN_OP_MUL, bias, scalar_like(g, bias, beta));
    y = g.op2(CTN_OP_ADD, y, bias);
  }
  out1(c, y);
}

// ---- convolution and pooling geometry ------------------------------------------------------------
struct Window {
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0};
  bool one_d = false;  // the ONNX op was 1-d: [N, C, L] handled as [N, C, 1, L]
};

// auto_pad of a forward window (Conv, pooling) along one spatial dim of `in` elements, a window
// of `span` (dilated kernel) and `stride`: SAME_UPPER / SAME_LOWER pad so that the output has
// ceil(in / stride) elements (the odd one at the end / the start), VALID pads nothing, NOTSET
// keeps the explicit pads.
void apply_auto_pad(NodeCtx &c, const std::string &ap, int64_t in, int64_t stride, int64_t span, int64_t *pb, int64_t *pe) {
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const int64_t out = (in + stride - 1) / stride, total = std::max<int64_t>(0, (out - 1) * stride + span - in);
    *pb = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    *pe = total - *pb;
  } else if (ap == "VALID") {
    *pb = *pe = 0;
  } else if (ap != "NOTSET") {
    c.unsupported("auto_pad '%s'", ap.c_str());
  }
}

// Reads strides, dilations, pads and auto_pad for a 2-d window over spatial `in` sizes.
Window window(NodeCtx &c, const int64_t *kernel, const int64_t *in, uint32_t nsp, bool transposed) {
  Window w;
  std::vector<int64_t> st = c.attr_ints("strides"), di = c.attr_ints("dilations"), pads = c.attr_ints("pads");
  std::string ap = c.attr_s("auto_pad", "NOTSET");
  if ((!st.empty() && st.size() != nsp) || (!di.empty() && di.size() != nsp) || (!pads.empty() && pads.size() != 2 * nsp))
    c.invalid("strides, dilations or pads do not match %u spatial dims", nsp);
  const uint32_t off = nsp == 1 ? 1 : 0;  // 1-d ops use the W slot
  w.one_d = nsp == 1;
  for (uint32_t k = 0; k < nsp; ++k) {
    w.k[k + off] = kernel[k];
    if (!st.empty()) w.s[k + off] = st[k];
    if (!di.empty()) w.d[k + off] = di[k];
    if (!pads.empty()) w.pb[k + off] = pads[k], w.pe[k + off] = pads[k + nsp];
    if (w.s[k + off] < 1 || w.d[k + off] < 1 || w.pb[k + off] < 0 || w.pe[k + off] < 0) c.invalid("bad strides, dilations or pads");
    if (transposed && (ap == "SAME_UPPER" || ap == "SAME_LOWER")) continue;  // conv_transpose: from the output size
    apply_auto_pad(c, ap, in[k], w.s[k + off], (kernel[k] - 1) * w.d[k + off] + 1, &w.pb[k + off], &w.pe[k + off]);
  }
  return w;
}

// Spatial rank of input 0 (1 or 2) for the 2-d ops; 3-d inputs take the paths above and below
// (conv3d, conv_transpose3d, pool_nd) before this, 4 spatial dims and more are not lowered.
uint32_t spatial_dims(NodeCtx &c) {
  const uint32_t nd = c.shape(0).ndim;
  if (nd != 3 && nd != 4) c.unsupported("%u-d input (1 to 3 spatial dims, layout NCW / NCHW / NCDHW)", nd);
  return nd - 2;
}

ctn_node to4d(Graph &g, ctn_node x) {
  Shape s = g.info(x).shape;
  if (s.ndim == 4) return x;
  return reshape(g, x, shape_of({s[0], s[1], 1, s[2]}));
}

ctn_node from4d(Graph &g, ctn_node y, bool one_d) {
  if (!one_d) return y;
  Shape s = g.info(y).shape;
  return reshape(g, y, shape_of({s[0], s[1], s[3]}));
}

// Pads the asymmetric remainder explicitly so that the op's own (symmetric) padding is what is
// left; returns the symmetric amounts.
ctn_node pad_rest(Graph &g, ctn_node x, Window &w, double value, int64_t sym[2], int64_t extra_end[2]) {
  for (int k = 0; k < 2; ++k) {
    sym[k] = std::min(w.pb[k], w.pe[k]);
    x = pad_axis(g, x, 2 + k, w.pb[k] - sym[k], w.pe[k] - sym[k] + extra_end[k], 0, value);
  }
  return x;
}

// ---- 3-d convolutions by depth taps ----------------------------------------------------------------
// A 3-d convolution is a sum over the kernel's depth taps of 2-d convolutions with the depth folded
// into the batch: tap kd reads the input depths od * sd + kd * dd (a strided slice). The transposed
// one likewise: tap kd's 2-d transposed convolution lands at depths i * sd + kd * dd (zero-
// interleaved and shifted). Pads are applied (or cropped) explicitly on all three axes.
struct Geom3 {
  int64_t k[3], s[3], d[3], pb[3], pe[3];
  std::string auto_pad;
};

// The 3-d geometry of Conv / ConvTranspose (weight `ws`) and its group.
Geom3 geom3(NodeCtx &c, const Shape &ws, int64_t *group) {
  Geom3 q;
  if (ws.ndim != 5) c.invalid("the weight must have the input's rank");
  c.ignore("kernel_shape");
  *group = c.attr_i("group", 1);
  q.auto_pad = c.attr_s("auto_pad", "NOTSET");
  const std::vector<int64_t> st = c.attr_ints_n("strides", 1, 3), di = c.attr_ints_n("dilations", 1, 3), pads = c.attr_ints_n("pads", 0, 6);
  for (int i = 0; i < 3; ++i) {
    q.k[i] = ws[2 + static_cast<uint32_t>(i)], q.s[i] = st[static_cast<size_t>(i)], q.d[i] = di[static_cast<size_t>(i)];
    q.pb[i] = pads[static_cast<size_t>(i)], q.pe[i] = pads[static_cast<size_t>(i + 3)];
    if (q.s[i] < 1 || q.d[i] < 1 || q.pb[i] < 0 || q.pe[i] < 0) c.invalid("bad strides, dilations or pads");
  }
  return q;
}

ctn_node fold_depth(Graph &g, ctn_node x) {  // [N, C, D, H, W] -> [N * D, C, H, W]
  const Shape s = g.info(x).shape;
  return reshape(g, permute(g, x, {0, 2, 1, 3, 4}), shape_of({s[0] * s[2], s[1], s[3], s[4]}));
}

ctn_node unfold_depth(Graph &g, ctn_node y, int64_t n) {  // [N * D, O, H, W] -> [N, O, D, H, W]
  const Shape s = g.info(y).shape;
  return permute(g, reshape(g, y, shape_of({n, s[0] / n, s[1], s[2], s[3]})), {0, 2, 1, 3, 4});
}

ctn_node weight_tap(Graph &g, ctn_node w, int64_t kd) {  // [A, B, kD, kH, kW] -> [A, B, kH, kW]
  const Shape s = g.info(w).shape;
  return reshape(g, slice(g, w, 2, kd, kd + 1, 1), shape_of({s[0], s[1], s[3], s[4]}));
}

void conv3d(NodeCtx &c) {
  Graph &g = c.g;
  const Shape xs = c.shape(0), ws = c.shape(1);
  int64_t group = 1;
  Geom3 q = geom3(c, ws, &group);
  for (int i = 0; i < 3; ++i)
    apply_auto_pad(c, q.auto_pad, xs[2 + static_cast<uint32_t>(i)], q.s[i], (q.k[i] - 1) * q.d[i] + 1, &q.pb[i], &q.pe[i]);
  ctn_node x = c.in(0);
  for (int i = 0; i < 3; ++i) x = pad_axis(g, x, 2 + i, q.pb[i], q.pe[i], 0, 0.0);
  const int64_t dp = g.info(x).shape[2], span = (q.k[0] - 1) * q.d[0] + 1;
  if (dp < span) c.invalid("the kernel's depth (%lld with dilations) exceeds the padded input's (%lld)", static_cast<long long>(span), static_cast<long long>(dp));
  const int64_t od = (dp - span) / q.s[0] + 1;
  ctn_attrs a = attrs_i({q.s[1], q.s[2], 0, 0, q.d[1], q.d[2], group});
  ctn_node y = CTN_NODE_NONE;
  for (int64_t kd = 0; kd < q.k[0]; ++kd) {
    ctn_node xt = fold_depth(g, slice(g, x, 2, kd * q.d[0], kd * q.d[0] + (od - 1) * q.s[0] + 1, q.s[0]));
    ctn_node t = g.op2(CTN_OP_CONV2D, xt, weight_tap(g, c.in(1), kd), &a);
    y = y == CTN_NODE_NONE ? t : g.op2(CTN_OP_ADD, y, t);
  }
  y = unfold_depth(g, y, xs[0]);
  if (c.has(2)) y = g.op2(CTN_OP_ADD, y, reshape(g, c.in(2), shape_of({ws[0], 1, 1, 1})));
  out1(c, y);
}

void conv_transpose3d(NodeCtx &c) {
  Graph &g = c.g;
  const Shape xs = c.shape(0), ws = c.shape(1);
  int64_t group = 1;
  Geom3 q = geom3(c, ws, &group);
  const std::string &ap = q.auto_pad;
  std::vector<int64_t> op = c.attr_ints("output_padding"), os = c.attr_ints("output_shape");
  if ((!op.empty() && op.size() != 3) || (!os.empty() && os.size() != 3 && os.size() != 5)) c.invalid("output_padding or output_shape do not match 3 spatial dims");
  int64_t opad[3] = {0, 0, 0}, full[3];
  for (int i = 0; i < 3; ++i) {
    if (!op.empty()) opad[i] = op[static_cast<size_t>(i)];
    const int64_t in = xs[2 + static_cast<uint32_t>(i)];
    full[i] = q.s[i] * (in - 1) + opad[i] + (q.k[i] - 1) * q.d[i] + 1;
    int64_t target = -1;
    if (!os.empty()) target = os[os.size() - 3 + static_cast<size_t>(i)];
    else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") target = in * q.s[i];
    else if (ap != "NOTSET" && ap != "VALID") c.unsupported("auto_pad '%s'", ap.c_str());
    if (target >= 0) {
      const int64_t total = full[i] - target;
      q.pb[i] = ap == "SAME_LOWER" ? total - total / 2 : total / 2;
      q.pe[i] = total - q.pb[i];
    }
  }
  // Tap kd: the 2-d transposed convolution of every input depth, zero-interleaved by the stride
  // and shifted to kd * dd in the full (unpadded) output.
  ctn_attrs a = attrs_i({q.s[1], q.s[2], 0, 0, q.d[1], q.d[2], group, 0, 0});
  const int64_t D = xs[2];
  ctn_node y = CTN_NODE_NONE;
  for (int64_t kd = 0; kd < q.k[0]; ++kd) {
    ctn_node t = g.op2(CTN_OP_CONV_TRANSPOSE2D, fold_depth(g, c.in(0)), weight_tap(g, c.in(1), kd), &a);
    const Shape ts = g.info(t).shape;  // [N * D, O, Hf, Wf]
    const int64_t rest = ts[1] * ts[2] * ts[3];
    t = pad_axis(g, reshape(g, t, shape_of({xs[0], D, 1, rest})), 2, 0, q.s[0] - 1, 0, 0.0);
    t = slice(g, reshape(g, t, shape_of({xs[0], D * q.s[0], rest})), 1, 0, (D - 1) * q.s[0] + 1, 1);
    t = pad_axis(g, t, 1, kd * q.d[0], full[0] - opad[0] - (D - 1) * q.s[0] - 1 - kd * q.d[0], 0, 0.0);
    t = permute(g, reshape(g, t, shape_of({xs[0], full[0] - opad[0], ts[1], ts[2], ts[3]})), {0, 2, 1, 3, 4});
    y = y == CTN_NODE_NONE ? t : g.op2(CTN_OP_ADD, y, t);
  }
  // H and W of the 2-d result lack their output padding; crop the pads, append the output padding.
  for (int i = 0; i < 3; ++i) y = pad_axis(g, y, 2 + i, -q.pb[i], opad[i] - q.pe[i], 0, 0.0);
  if (c.has(2)) y = g.op2(CTN_OP_ADD, y, reshape(g, c.in(2), shape_of({g.info(y).shape[1], 1, 1, 1})));
  out1(c, y);
}

void conv(NodeCtx &c) {
  Graph &g = c.g;
  if (c.shape(0).ndim == 5) return conv3d(c);
  const uint32_t nsp = spatial_dims(c);
  const Shape xs = c.shape(0), ws = c.shape(1);
  if (ws.ndim != xs.ndim) c.invalid("the weight must have the input's rank");
  c.ignore("kernel_shape");
  const int64_t group = c.attr_i("group", 1);
  Window w = window(c, &ws.d[2], &xs.d[2], nsp, false);
  ctn_node x = to4d(g, c.in(0)), wt = to4d(g, c.in(1));
  int64_t sym[2], none[2] = {0, 0};
  x = pad_rest(g, x, w, 0.0, sym, none);
  ctn_attrs a = attrs_i({w.s[0], w.s[1], sym[0], sym[1], w.d[0], w.d[1], group});
  ctn_node y = g.op2(CTN_OP_CONV2D, x, wt, &a);
  if (c.has(2)) y = g.op2(CTN_OP_ADD, y, reshape(g, c.in(2), shape_of({ws[0], 1, 1})));
  out1(c, from4d(g, y, w.one_d));
}

// QLinearConv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias?) and ConvInteger (x, w,
// x_zp?, w_zp?): Conv's geometry on the int8 ops; the padding is the input's zero point, so only
// symmetric pads are taken (the op pads itself).
void conv_quantized(NodeCtx &c, bool qlinear) {
  Graph &g = c.g;
  const size_t iw = qlinear ? 3 : 1;
  const uint32_t nsp = spatial_dims(c);
  const Shape xs = c.shape(0), ws = c.shape(iw);
  if (ws.ndim != xs.ndim) c.invalid("the weight must have the input's rank");
  c.ignore("kernel_shape");
  const int64_t group = c.attr_i("group", 1);
  Window w = window(c, &ws.d[2], &xs.d[2], nsp, false);
  if (w.pb[0] != w.pe[0] || w.pb[1] != w.pe[1]) c.unsupported("asymmetric pads on a quantized convolution");
  ctn_attrs a = attrs_i({w.s[0], w.s[1], w.pb[0], w.pb[1], w.d[0], w.d[1], group});
  const int64_t o = ws[0];
  const Shape per_o = Shape::from(1, &o);
  // One value as [], one per output channel as [O]; absent zero points are zeros.
  auto param = [&](size_t i, int32_t dt) {
    if (!c.has(i)) return g.add_scalar(dt, 0);
    ctn_node p = dtype_is_float(c.dtype(i)) ? cast(g, c.in(i), CTN_F32) : c.in(i);
    return reshape(g, p, c.shape(i).numel() == 1 ? Shape{} : per_o);
  };
  ctn_node x = to4d(g, c.in(0)), wt = to4d(g, c.in(iw)), y;
  if (qlinear) {
    a.i[7] = CTN_ACT_NONE;
    a.ni = 8;
    ctn_node bias = c.has(8) ? c.in(8) : g.add_constant(Tensor::empty(CTN_I32, per_o));
    ctn_node in[9] = {x, param(1, CTN_F32), param(2, c.dtype(0)), wt, param(4, CTN_F32), param(5, c.dtype(3)),
                      param(6, CTN_F32), param(7, c.dtype(7)), bias};
    y = g.add_op(CTN_OP_QLINEAR_CONV2D, 9, in, &a);
  } else {
    ctn_node in[4] = {x, wt, param(2, c.dtype(0)), param(3, c.dtype(1))};
    y = g.add_op(CTN_OP_CONV2D_INTEGER, 4, in, &a);
  }
  out1(c, from4d(g, y, w.one_d));
}

void qlinear_conv(NodeCtx &c) { conv_quantized(c, true); }
void conv_integer(NodeCtx &c) { conv_quantized(c, false); }

void conv_transpose(NodeCtx &c) {
  Graph &g = c.g;
  if (c.shape(0).ndim == 5) return conv_transpose3d(c);
  const uint32_t nsp = spatial_dims(c);
  const Shape xs = c.shape(0), ws = c.shape(1);
  c.ignore("kernel_shape");
  const int64_t group = c.attr_i("group", 1);
  const std::string ap = c.attr_s("auto_pad", "NOTSET");
  Window w = window(c, &ws.d[2], &xs.d[2], nsp, true);
  std::vector<int64_t> op = c.attr_ints("output_padding"), os = c.attr_ints("output_shape");
  int64_t opad[2] = {0, 0};
  const uint32_t off = nsp == 1 ? 1 : 0;
  for (uint32_t k = 0; k < nsp && k < op.size(); ++k) opad[k + off] = op[k];
  int64_t in[2] = {1, 1};
  for (uint32_t k = 0; k < nsp; ++k) in[k + off] = xs[2 + k];
  for (int k = 0; k < 2; ++k) {
    const int64_t full = w.s[k] * (in[k] - 1) + opad[k] + (w.k[k] - 1) * w.d[k] + 1;
    int64_t target = -1;
    if (!os.empty()) target = os[os.size() - (k == 0 ? (nsp == 2 ? 2 : 0) : 1)];
    else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") target = in[k] * w.s[k];
    if (target >= 0 && !(k == 0 && nsp == 1)) {
      const int64_t total = full - target;
      const bool upper = ap != "SAME_LOWER";
      w.pb[k] = upper ? total / 2 : total - total / 2;
      w.pe[k] = total - w.pb[k];
    }
  }
  ctn_node x = to4d(g, c.in(0)), wt = to4d(g, c.in(1));
  ctn_node y;
  if (w.pb[0] == w.pe[0] && w.pb[1] == w.pe[1] && opad[0] < w.s[0] && opad[1] < w.s[1] && w.pb[0] >= 0 && w.pb[1] >= 0) {
    ctn_attrs a = attrs_i({w.s[0], w.s[1], w.pb[0], w.pb[1], w.d[0], w.d[1], group, opad[0], opad[1]});
    y = g.op2(CTN_OP_CONV_TRANSPOSE2D, x, wt, &a);
  } else {
    // The full, unpadded result, then crop the pads and append the output padding as zeros.
    ctn_attrs a = attrs_i({w.s[0], w.s[1], 0, 0, w.d[0], w.d[1], group, 0, 0});
    y = g.op2(CTN_OP_CONV_TRANSPOSE2D, x, wt, &a);
    for (int k = 0; k < 2; ++k) y = pad_axis(g, y, 2 + k, -w.pb[k], opad[k] - w.pe[k], 0, 0.0);
  }
  if (c.has(2)) {
    const int64_t o = g.info(y).shape[1];
    y = g.op2(CTN_OP_ADD, y, reshape(g, c.in(2), shape_of({o, 1, 1})));
  }
  out1(c, from4d(g, y, w.one_d));
}

// Extra end padding so that ceil_mode's last partial window exists (it must start inside the
// input or its begin padding).
void ceil_extra(const Window &w, const int64_t in[2], bool ceil_mode, int64_t extra[2]) {
  for (int k = 0; k < 2; ++k) {
    extra[k] = 0;
    if (!ceil_mode) continue;
    const int64_t span = in[k] + w.pb[k] + w.pe[k] - ((w.k[k] - 1) * w.d[k] + 1);
    int64_t out = (span + w.s[k] - 1) / w.s[k] + 1;
    if ((out - 1) * w.s[k] >= in[k] + w.pb[k]) --out;
    extra[k] = std::max<int64_t>(0, (out - 1) * w.s[k] + (w.k[k] - 1) * w.d[k] + 1 - (in[k] + w.pb[k] + w.pe[k]));
  }
}

// ---- N-d pooling by shifted strided slices ---------------------------------------------------------
// Pooling over 3 spatial dims, or with dilations (the pooling ops have none): the input padded
// (-inf for max, 0 otherwise), one strided slice per kernel offset, combined with maximum or add.
// Exact; cost: one slice per element of the kernel.
enum class PoolKind { kMax, kAvg, kLp };

struct PoolGeom {
  std::vector<int64_t> k, s, d, pb, pe, out, extra;
};

PoolGeom pool_geom(NodeCtx &c, const Shape &xs, uint32_t nsp) {
  PoolGeom p;
  p.k = c.attr_ints("kernel_shape");
  if (p.k.size() != nsp) c.invalid("kernel_shape must have %u entries", nsp);
  p.s = c.attr_ints_n("strides", 1, nsp), p.d = c.attr_ints_n("dilations", 1, nsp);
  const std::vector<int64_t> pads = c.attr_ints_n("pads", 0, 2 * nsp);
  const std::string ap = c.attr_s("auto_pad", "NOTSET");
  const bool ceil_mode = c.attr_i("ceil_mode", 0) != 0;
  for (uint32_t i = 0; i < nsp; ++i) {
    const int64_t in = xs[2 + i], span = (p.k[i] - 1) * p.d[i] + 1;
    if (p.k[i] < 1 || p.s[i] < 1 || p.d[i] < 1 || pads[i] < 0 || pads[i + nsp] < 0) c.invalid("bad kernel_shape, strides, dilations or pads");
    int64_t pb = pads[i], pe = pads[i + nsp];
    apply_auto_pad(c, ap, in, p.s[i], span, &pb, &pe);
    const int64_t room = in + pb + pe - span;
    if (room < 0) c.invalid("the window (%lld with dilations) is larger than the padded input (%lld) along spatial dim %u",
                            static_cast<long long>(span), static_cast<long long>(in + pb + pe), i);
    int64_t o = (ceil_mode ? (room + p.s[i] - 1) / p.s[i] : room / p.s[i]) + 1;
    if (ceil_mode && (o - 1) * p.s[i] >= in + pb) --o;  // the last window must start inside
    p.pb.push_back(pb), p.pe.push_back(pe), p.out.push_back(o);
    p.extra.push_back(std::max<int64_t>(0, (o - 1) * p.s[i] + span - (in + pb + pe)));
  }
  return p;
}

// Sum (or maximum) over the kernel offsets of the strided slices of the padded `x`. With `pos`
// (the positions of x's elements, same spatial dims), *arg gets the position of each window's
// first maximum (kernel offsets in row-major order, as ONNX's reference scans them).
ctn_node window_reduce(Graph &g, ctn_node x, const PoolGeom &p, bool is_max, ctn_node pos = CTN_NODE_NONE,
                       ctn_node *arg = nullptr) {
  const size_t nsp = p.k.size();
  std::vector<int64_t> at(nsp, 0);
  ctn_node acc = CTN_NODE_NONE;
  auto window = [&](ctn_node t) {
    for (size_t i = 0; i < nsp; ++i) {
      const int64_t start = at[i] * p.d[i];
      t = slice(g, t, static_cast<int32_t>(2 + i), start, start + (p.out[i] - 1) * p.s[i] + 1, p.s[i]);
    }
    return t;
  };
  for (;;) {
    ctn_node t = window(x);
    if (arg && acc != CTN_NODE_NONE) {
      ctn_node in[3] = {g.op2(CTN_OP_GT, t, acc), window(pos), *arg};
      *arg = g.add_op(CTN_OP_WHERE, 3, in, nullptr);
    } else if (arg) {
      *arg = window(pos);
    }
    acc = acc == CTN_NODE_NONE ? t : g.op2(is_max ? CTN_OP_MAXIMUM : CTN_OP_ADD, acc, t);
    size_t i = nsp;
    while (i > 0 && ++at[i - 1] == p.k[i - 1]) at[--i] = 0;
    if (i == 0) return acc;
  }
}

// [1, 1, padded spatial...]: each real element's flat position in its plane (row-major, or
// column-major with storage_order 1), -1 in the padding (never a window's first maximum: the
// padding is -inf there). In f64: exact for any plane.
ctn_node pool_positions(NodeCtx &c, Graph &g, const Shape &xs, const PoolGeom &p) {
  const size_t nsp = p.k.size();
  const bool col_major = c.attr_i("storage_order", 0) != 0;
  Shape ms = shape_of({1, 1});
  for (size_t i = 0; i < nsp; ++i) ms[ms.ndim++] = xs[2 + i] + p.pb[i] + p.pe[i] + p.extra[i];
  c.limit(static_cast<double>(ms.numel()), "the MaxPool position map");
  std::vector<double> m(static_cast<size_t>(ms.numel()));
  for (int64_t e = 0; e < ms.numel(); ++e) {
    int64_t rest = e, flat = 0, stride = 1;
    bool real = true;
    std::vector<int64_t> q(nsp);
    for (size_t i = nsp; i-- > 0;) {
      q[i] = rest % ms[2 + i] - p.pb[i];
      rest /= ms[2 + i];
      real = real && q[i] >= 0 && q[i] < xs[2 + i];
    }
    for (size_t j = 0; j < nsp; ++j) {  // row-major: the last dim varies fastest
      const size_t i = col_major ? j : nsp - 1 - j;
      flat += q[i] * stride;
      stride *= xs[2 + i];
    }
    m[static_cast<size_t>(e)] = real ? static_cast<double>(flat) : -1;
  }
  return const_f(g, CTN_F64, m, ms);
}

void pool_nd(NodeCtx &c, PoolKind kind) {
  Graph &g = c.g;
  const Shape xs = c.shape(0);
  if (xs.ndim < 3 || xs.ndim > 5) c.unsupported("%u-d input (pooling takes 1 to 3 spatial dims, layout NC...)", xs.ndim);
  const uint32_t nsp = xs.ndim - 2;
  const int32_t in_dt = c.dtype(0);
  const PoolGeom p = pool_geom(c, xs, nsp);
  double vol = 1;
  for (int64_t k : p.k) vol *= static_cast<double>(k);
  if (vol > 4096) c.unsupported("a dilated or 3-d pooling window of %g elements (4096 at most)", vol);
  const bool is_max = kind == PoolKind::kMax;
  const bool include_pad = kind == PoolKind::kAvg && c.attr_i("count_include_pad", 0) != 0;
  const double lp = kind == PoolKind::kLp ? static_cast<double>(c.attr_i("p", 2)) : 1;
  if (lp < 1) c.invalid("p must be at least 1, not %g", lp);
  ctn_node x = cast(g, c.in(0), dtype_is_float(in_dt) ? in_dt : CTN_F64);
  const int32_t dt = g.info(x).dtype;
  if (kind == PoolKind::kLp) {
    x = g.op1(CTN_OP_ABS, x);
    if (lp != 1) x = g.op2(CTN_OP_POW, x, g.add_scalar(dt, lp));
  }
  const double fill = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  ctn_node xp = x;
  for (uint32_t i = 0; i < nsp; ++i) xp = pad_axis(g, xp, static_cast<int32_t>(2 + i), p.pb[i], p.pe[i] + p.extra[i], 0, fill);
  const bool want_idx = is_max && c.node.outputs.size() > 1 && !c.node.outputs[1].empty();
  ctn_node arg = CTN_NODE_NONE, pos = want_idx ? pool_positions(c, g, xs, p) : CTN_NODE_NONE;
  ctn_node y = window_reduce(g, xp, p, is_max, pos, want_idx ? &arg : nullptr);
  if (kind == PoolKind::kLp && lp != 1) y = g.op2(CTN_OP_POW, y, g.add_scalar(dt, 1.0 / lp));
  if (kind == PoolKind::kAvg) {
    // The count of the elements each window averages: the real ones, plus the declared pads
    // with count_include_pad (never the ceil_mode overhang).
    Shape ms = shape_of({1, 1});
    for (uint32_t i = 0; i < nsp; ++i) ms[ms.ndim++] = xs[2 + i] + p.pb[i] + p.pe[i] + p.extra[i];
    c.limit(static_cast<double>(ms.numel()), "the pooling count map");
    std::vector<double> m(static_cast<size_t>(ms.numel()));
    for (int64_t e = 0; e < ms.numel(); ++e) {
      bool counted = true;
      int64_t rest = e;
      for (uint32_t i = nsp; i-- > 0;) {
        const int64_t pos = rest % ms[2 + i];
        rest /= ms[2 + i];
        const int64_t lo = include_pad ? 0 : p.pb[i], hi = p.pb[i] + xs[2 + i] + (include_pad ? p.pe[i] : 0);
        counted = counted && pos >= lo && pos < hi;
      }
      m[static_cast<size_t>(e)] = counted ? 1 : 0;
    }
    y = g.op2(CTN_OP_DIV, y, window_reduce(g, const_f(g, dt, m, ms), p, false));
  }
  c.outs = {cast(g, y, in_dt)};
  if (want_idx) {
    // + (n C + c) prod(spatial): the Indices count over the whole [N, C, spatial...] tensor.
    Shape bs = shape_of({xs[0], xs[1]});
    int64_t plane = 1;
    for (uint32_t i = 0; i < nsp; ++i) bs[bs.ndim++] = 1, plane *= xs[2 + i];
    std::vector<double> off(static_cast<size_t>(xs[0] * xs[1]));
    for (size_t k = 0; k < off.size(); ++k) off[k] = static_cast<double>(k) * static_cast<double>(plane);
    c.outs.push_back(cast(g, g.op2(CTN_OP_ADD, cast(g, arg, CTN_F64), const_f(g, CTN_F64, off, bs)), CTN_I64));
  }
}

// 3 spatial dims or dilations: the N-d path above; 1-d and 2-d without dilations: the pooling ops.
bool pool_needs_nd(NodeCtx &c) {
  if (c.shape(0).ndim == 5) return true;
  for (int64_t d : c.attr_ints("dilations"))
    if (d != 1) return true;
  return false;
}

void pool(NodeCtx &c, bool is_max) {
  Graph &g = c.g;
  const int32_t in_dt = c.dtype(0);
  if (!dtype_is_float(in_dt) && !(is_max && (in_dt == CTN_U8 || in_dt == CTN_I32)))
    c.unsupported("dtype %s (float and double; uint8 and int32 for MaxPool)", dtype_name(in_dt));
  if (is_max) c.ignore("storage_order");  // it orders the Indices output only
  const bool indices = is_max && c.node.outputs.size() > 1 && !c.node.outputs[1].empty();
  if (indices || pool_needs_nd(c)) return pool_nd(c, is_max ? PoolKind::kMax : PoolKind::kAvg);
  const uint32_t nsp = spatial_dims(c);
  const Shape xs = c.shape(0);
  std::vector<int64_t> ks = c.attr_ints("kernel_shape");
  if (ks.size() != nsp) c.invalid("kernel_shape must have %u entries", nsp);
  Window w = window(c, ks.data(), &xs.d[2], nsp, false);
  const bool ceil_mode = c.attr_i("ceil_mode", 0) != 0;
  const bool include_pad = !is_max && c.attr_i("count_include_pad", 0) != 0;
  ctn_node x = to4d(g, cast(g, c.in(0), dtype_is_float(in_dt) ? in_dt : CTN_F64));  // max of ints is exact in f64
  const Shape s4 = g.info(x).shape;
  const int64_t in[2] = {s4[2], s4[3]};
  int64_t extra[2];
  ceil_extra(w, in, ceil_mode, extra);
  const bool native = w.pb[0] == w.pe[0] && w.pb[1] == w.pe[1] && extra[0] == 0 && extra[1] == 0 &&
                      2 * w.pb[0] <= w.k[0] && 2 * w.pb[1] <= w.k[1];
  ctn_node y;
  if (is_max) {
    int64_t sym[2] = {w.pb[0], w.pb[1]};
    if (!native) {
      // -inf padding: max never picks it, as the window always holds a real element.
      x = pad_rest(g, x, w, -std::numeric_limits<double>::infinity(), sym, extra);
      if (2 * sym[0] > w.k[0] || 2 * sym[1] > w.k[1]) {
        for (int k = 0; k < 2; ++k) x = pad_axis(g, x, 2 + k, sym[k], sym[k], 0, -std::numeric_limits<double>::infinity());
        sym[0] = sym[1] = 0;
      }
    }
    ctn_attrs a = attrs_i({w.k[0], w.k[1], w.s[0], w.s[1], sym[0], sym[1]});
    y = g.op1(CTN_OP_MAX_POOL2D, x, &a);
  } else if (native) {
    ctn_attrs a = attrs_i({w.k[0], w.k[1], w.s[0], w.s[1], w.pb[0], w.pb[1], include_pad ? 1 : 0});
    y = g.op1(CTN_OP_AVG_POOL2D, x, &a);
  } else {
    // sum over the zero-padded input / number of counted elements under each window, where the
    // counted elements are the real ones (plus the declared pads with count_include_pad).
    ctn_attrs a = attrs_i({w.k[0], w.k[1], w.s[0], w.s[1], 0, 0, 1});
    ctn_node xp = x;
    for (int k = 0; k < 2; ++k) xp = pad_axis(g, xp, 2 + k, w.pb[k], w.pe[k] + extra[k], 0, 0.0);
    Tensor m = Tensor::empty(g.info(x).dtype, shape_of({1, 1, in[0] + w.pb[0] + w.pe[0] + extra[0], in[1] + w.pb[1] + w.pe[1] + extra[1]}));
    const Shape ms = m.shape;
    for (int64_t i = 0; i < ms[2]; ++i)
      for (int64_t j = 0; j < ms[3]; ++j) {
        bool real = i >= w.pb[0] && i < w.pb[0] + in[0] && j >= w.pb[1] && j < w.pb[1] + in[1];
        bool declared = i < w.pb[0] + in[0] + w.pe[0] && j < w.pb[1] + in[1] + w.pe[1];
        double v = (include_pad ? declared : real) ? 1.0 : 0.0;
        if (m.dtype == CTN_F32) reinterpret_cast<float *>(m.data())[i * ms[3] + j] = static_cast<float>(v);
        else reinterpret_cast<double *>(m.data())[i * ms[3] + j] = v;
      }
    ctn_node count = g.op1(CTN_OP_AVG_POOL2D, g.add_constant(m), &a);
    y = g.op2(CTN_OP_DIV, g.op1(CTN_OP_AVG_POOL2D, xp, &a), count);
  }
  out1(c, cast(g, from4d(g, y, w.one_d), in_dt));
}
void max_pool(NodeCtx &c) { pool(c, true); }
void avg_pool(NodeCtx &c) { pool(c, false); }

// MaxUnpool: X's values scattered to the flat positions I (over the whole output) of a zero
// tensor: embedding_grad, the scatter-add of rows, with one-element rows (duplicate positions,
// which MaxPool never makes, add up).
void max_unpool(NodeCtx &c) {
  Graph &g = c.g;
  const Shape xs = c.shape(0), is = c.shape(1);
  const int32_t dt = c.dtype(0);
  if (!dtype_is_float(dt)) c.unsupported("dtype %s (float and double only)", dtype_name(dt));
  if (xs.ndim < 3 || is != xs) c.invalid("X %s and I %s must have the same shape, at least 3-d", shape_str(xs).c_str(), shape_str(is).c_str());
  const uint32_t nsp = xs.ndim - 2;
  const std::vector<int64_t> ks = c.attr_ints("kernel_shape");
  std::vector<int64_t> st = c.attr_ints("strides"), pads = c.attr_ints("pads");
  if (st.empty()) st.assign(nsp, 1);
  if (pads.empty()) pads.assign(2 * nsp, 0);
  if (ks.size() != nsp || st.size() != nsp || pads.size() != 2 * nsp) c.invalid("kernel_shape, strides or pads do not match %u spatial dims", nsp);
  // I indexes the inferred shape; an output_shape beyond it is zero-padded at the end (ONNX's
  // reference).
  Shape out = shape_of({xs[0], xs[1]});
  for (uint32_t i = 0; i < nsp; ++i) out[out.ndim++] = (xs[2 + i] - 1) * st[i] - pads[i] - pads[i + nsp] + ks[i];
  std::vector<int64_t> want(out.d, out.d + out.ndim);
  if (c.has(2)) want = c.ints(2, "output_shape");
  if (want.size() != xs.ndim) c.invalid("output_shape must have %u entries", xs.ndim);
  const int64_t total = out.numel(), u = xs.numel();
  for (uint32_t i = 0; i < xs.ndim; ++i)
    if (out[i] < 1 || want[i] < out[i] || (i < 2 && want[i] != out[i]))
      c.invalid("output_shape does not hold the unpooled shape %s", shape_str(out).c_str());
  c.limit(static_cast<double>(Shape::from(xs.ndim, want.data()).numel()), "MaxUnpool's output");
  ctn_attrs a = attrs_i({total});
  ctn_node ids = cast(g, reshape(g, c.in(1), Shape::from(1, &u)), CTN_I64);
  ctn_node y = reshape(g, g.op2(CTN_OP_EMBEDDING_GRAD, ids, reshape(g, c.in(0), shape_of({u, 1})), &a), out);
  for (uint32_t i = 2; i < xs.ndim; ++i) y = pad_axis(g, y, static_cast<int32_t>(i), 0, want[i] - out[i], 0, 0.0);
  out1(c, y);
}

// LpPool: (sum of |x|^p over the zero-padded window)^(1/p), the sum as an average pool with no
// padding of its own times the window's size.
void lp_pool(NodeCtx &c) {
  Graph &g = c.g;
  if (!dtype_is_float(c.dtype(0))) c.unsupported("dtype %s (float and double only)", dtype_name(c.dtype(0)));
  if (pool_needs_nd(c)) return pool_nd(c, PoolKind::kLp);
  const uint32_t nsp = spatial_dims(c);
  const Shape xs = c.shape(0);
  std::vector<int64_t> ks = c.attr_ints("kernel_shape");
  if (ks.size() != nsp) c.invalid("kernel_shape must have %u entries", nsp);
  Window w = window(c, ks.data(), &xs.d[2], nsp, false);
  const double p = static_cast<double>(c.attr_i("p", 2));
  if (p < 1) c.invalid("p must be at least 1, not %g", p);
  ctn_node x = to4d(g, g.op1(CTN_OP_ABS, c.in(0)));
  const int32_t dt = g.info(x).dtype;
  x = p == 1 ? x : p == 2 ? g.op2(CTN_OP_MUL, x, x) : g.op2(CTN_OP_POW, x, g.add_scalar(dt, p));
  const Shape s4 = g.info(x).shape;
  const int64_t in[2] = {s4[2], s4[3]};
  int64_t extra[2];
  ceil_extra(w, in, c.attr_i("ceil_mode", 0) != 0, extra);
  for (int k = 0; k < 2; ++k) x = pad_axis(g, x, 2 + k, w.pb[k], w.pe[k] + extra[k], 0, 0.0);
  ctn_attrs a = attrs_i({w.k[0], w.k[1], w.s[0], w.s[1], 0, 0, 1});
  ctn_node y = g.op2(CTN_OP_MUL, g.op1(CTN_OP_AVG_POOL2D, x, &a), g.add_scalar(dt, static_cast<double>(w.k[0] * w.k[1])));
  if (p == 2) y = g.op1(CTN_OP_SQRT, y);
  else if (p != 1) y = g.op2(CTN_OP_POW, y, g.add_scalar(dt, 1.0 / p));
  out1(c, from4d(g, y, w.one_d));
}

void global_pool(NodeCtx &c, const char *op) {
  const Shape s = c.shape(0);
  if (s.ndim < 3) c.invalid("the input must be at least 3-d");
  if ((s.ndim == 3 || s.ndim == 4) && dtype_is_float(c.dtype(0))) {
    // 1-d and 2-d: one pooling window over the whole plane (the CPU backend's global path,
    // faster than the reduction), [N, C, 1(, 1)] as the reduction with kept axes gives.
    Graph &g = c.g;
    ctn_node x = to4d(g, c.in(0));
    const Shape s4 = g.info(x).shape;
    const bool is_max = !std::strcmp(op, CTN_OP_MAX);
    ctn_attrs a = is_max ? attrs_i({s4[2], s4[3], 1, 1, 0, 0}) : attrs_i({s4[2], s4[3], 1, 1, 0, 0, 0});
    out1(c, from4d(g, g.op1(is_max ? CTN_OP_MAX_POOL2D : CTN_OP_AVG_POOL2D, x, &a), s.ndim == 3));
    return;
  }
  uint64_t mask = 0;
  for (uint32_t k = 2; k < s.ndim; ++k) mask |= 1ull << k;
  out1(c, reduce(c.g, op, c.in(0), mask, true));
}
void global_avg_pool(NodeCtx &c) { global_pool(c, CTN_OP_MEAN); }
void global_max_pool(NodeCtx &c) { global_pool(c, CTN_OP_MAX); }

// ---- normalisation -------------------------------------------------------------------------------
// [C] -> [C, 1, ..., 1] to broadcast against [N, C, ...].
ctn_node per_channel(Graph &g, ctn_node v, uint32_t ndim) {
  Shape s = g.info(v).shape, r;
  r.ndim = ndim - 1;
  r[0] = s.numel();
  for (uint32_t k = 1; k < r.ndim; ++k) r[k] = 1;
  return reshape(g, v, r);
}

void batch_norm(NodeCtx &c) {
  Graph &g = c.g;
  const double eps = c.attr_f("epsilon", 1e-5), momentum = c.attr_f("momentum", 0.9);
  if (c.attr_i("spatial", 1) != 1) c.unsupported("spatial = 0");
  c.ignore("is_test");
  c.ignore("consumed_inputs");
  const bool training = c.attr_i("training_mode", 0) != 0;
  ctn_node x = c.in(0);
  const uint32_t nd = c.shape(0).ndim;
  if (nd < 2) c.invalid("the input must be at least 2-d");
  if (!training) {
    for (size_t k = 1; k < c.node.outputs.size(); ++k)
      if (!c.node.outputs[k].empty()) c.unsupported("output %zu outside training mode", k);
    ctn_node in[5] = {x, c.in(1), c.in(2), c.in(3), c.in(4)};
    ctn_attrs a = attrs_f({eps});
    return out1(c, g.add_op(CTN_OP_BATCH_NORM_INFERENCE, 5, in, &a));
  }
  ctn_node in[3] = {x, c.in(1), c.in(2)};
  ctn_attrs a = attrs_f({eps});
  ctn_node y = g.add_op(CTN_OP_BATCH_NORM, 3, in, &a);
  uint64_t mask = 0;
  for (uint32_t k = 0; k < nd; ++k)
    if (k != 1) mask |= 1ull << k;
  ctn_node mean, var;
  moments(g, x, mask, &mean, &var);
  Shape cs = c.shape(3);
  mean = reshape(g, mean, cs);
  var = reshape(g, var, cs);
  ctn_node m = scalar_like(g, x, momentum), m1 = scalar_like(g, x, 1 - momentum);
  ctn_node rm = g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, c.in(3), m), g.op2(CTN_OP_MUL, mean, m1));
  ctn_node rv = g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, c.in(4), m), g.op2(CTN_OP_MUL, var, m1));
  c.outs = {y, rm, rv};
}

void instance_norm(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  if (s.ndim < 3) c.invalid("the input must be at least 3-d");
  const double eps = c.attr_f("epsilon", 1e-5);
  uint64_t mask = 0;
  for (uint32_t k = 2; k < s.ndim; ++k) mask |= 1ull << k;
  ctn_node x = c.in(0), mean, var;
  moments(g, x, mask, &mean, &var);
  ctn_node r = g.op1(CTN_OP_SQRT, g.op2(CTN_OP_ADD, var, scalar_like(g, x, eps)));
  ctn_node y = g.op2(CTN_OP_DIV, g.op2(CTN_OP_SUB, x, mean), r);
  y = g.op2(CTN_OP_MUL, y, per_channel(g, c.in(1), s.ndim));
  out1(c, g.op2(CTN_OP_ADD, y, per_channel(g, c.in(2), s.ndim)));
}

void layer_norm(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const int32_t ax = c.axis(c.attr_i("axis", -1), s.ndim);
  const double eps = c.attr_f("epsilon", 1e-5);
  c.ignore("stash_type");
  ctn_node x = c.in(0);
  Shape ns;
  for (uint32_t k = static_cast<uint32_t>(ax); k < s.ndim; ++k) ns[ns.ndim++] = s[k];
  auto fit = [&](ctn_node v) {
    if (g.info(v).shape == ns) return v;
    ctn_attrs a{};
    for (uint32_t k = 0; k < ns.ndim; ++k) a.i[a.ni++] = ns[k];
    return g.op1(CTN_OP_BROADCAST_TO, v, &a);
  };
  ctn_node gamma = fit(c.in(1));
  ctn_node beta = c.has(2) ? fit(c.in(2)) : fit(scalar_like(g, x, 0));
  ctn_node in[3] = {x, gamma, beta};
  ctn_attrs a = attrs_i({ax});
  a.f[0] = eps;
  a.nf = 1;
  c.outs = {g.add_op(CTN_OP_LAYER_NORM, 3, in, &a)};
  const bool want_stats = (c.node.outputs.size() > 1 && !c.node.outputs[1].empty()) ||
                          (c.node.outputs.size() > 2 && !c.node.outputs[2].empty());
  if (want_stats) {
    uint64_t mask = 0;
    for (uint32_t k = static_cast<uint32_t>(ax); k < s.ndim; ++k) mask |= 1ull << k;
    ctn_node mean, var;
    moments(g, x, mask, &mean, &var);
    ctn_node inv = g.op2(CTN_OP_DIV, scalar_like(g, x, 1),
                         g.op1(CTN_OP_SQRT, g.op2(CTN_OP_ADD, var, scalar_like(g, x, eps))));
    c.outs.push_back(mean);
    c.outs.push_back(inv);
  }
}

void mean_variance_norm(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (!c.has_attr("axes")) axes = {0, 2, 3};
  uint64_t mask = 0;
  for (int64_t a : axes) mask |= 1ull << c.axis(a, s.ndim);
  ctn_node x = c.in(0), mean, var;
  moments(g, x, mask, &mean, &var);
  // ONNX's function body: (x - mean) / (sqrt(var) + 1e-9).
  ctn_node den = g.op2(CTN_OP_ADD, g.op1(CTN_OP_SQRT, var), scalar_like(g, x, 1e-9));
  out1(c, g.op2(CTN_OP_DIV, g.op2(CTN_OP_SUB, x, mean), den));
}

void lrn(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const double alpha = c.attr_f("alpha", 1e-4), beta = c.attr_f("beta", 0.75), bias = c.attr_f("bias", 1.0);
  const int64_t size = c.attr_i("size", 0);
  if (size < 1 || s.ndim < 3) c.invalid("size must be >= 1 and the input at least 3-d");
  if (size > 4096) c.unsupported("size %lld (one slice per window position; at most 4096)", static_cast<long long>(size));
  ctn_node x = c.in(0);
  ctn_node sq = pad_axis(g, g.op2(CTN_OP_MUL, x, x), 1, (size - 1) / 2, size / 2, 0, 0.0);
  ctn_node acc = CTN_NODE_NONE;
  for (int64_t k = 0; k < size; ++k) {
    ctn_node part = slice(g, sq, 1, k, k + s[1], 1);
    acc = acc == CTN_NODE_NONE ? part : g.op2(CTN_OP_ADD, acc, part);
  }
  ctn_node den = g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, acc, scalar_like(g, x, alpha / static_cast<double>(size))),
                       scalar_like(g, x, bias));
  out1(c, g.op2(CTN_OP_DIV, x, g.op2(CTN_OP_POW, den, scalar_like(g, x, beta))));
}

void dropout(NodeCtx &c) {
  Graph &g = c.g;
  c.ignore("seed");
  c.ignore("ratio");
  bool training = c.attr_i("is_test", 1) == 0;
  if (c.has(2)) {
    std::vector<int64_t> t = c.ints(2, "training_mode");
    training = !t.empty() && t[0] != 0;
  }
  if (training) {
    double ratio = c.has(1) ? c.reals(1, "ratio").at(0) : 0.5;
    if (ratio != 0.0) c.unsupported("training mode with ratio %g (import the model for inference)", ratio);
  }
  ctn_node x = c.in(0);
  c.outs = {x};
  if (c.node.outputs.size() > 1 && !c.node.outputs[1].empty()) {
    ctn_attrs a{};
    const Shape s = c.shape(0);
    for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
    c.outs.push_back(g.op1(CTN_OP_BROADCAST_TO, g.add_scalar(CTN_BOOL, 1), &a));
  }
}


// ---- losses ----------------------------------------------------------------------------------------
// NegativeLogLikelihoodLoss on log-probabilities [N, C, d...] and targets [N, d...]: the class
// entry is picked with a one-hot mask (targets are data, not constants), weighted, reduced.
ctn_node nll(NodeCtx &c, ctn_node logp, ctn_node target, ctn_node weight) {
  Graph &g = c.g;
  const Shape s = g.info(logp).shape, ts = g.info(target).shape;
  const int32_t dt = g.info(logp).dtype;
  if (s.ndim < 2 || ts.ndim != s.ndim - 1) c.invalid("input must be [N, C, ...] and target [N, ...]");
  const std::string red = c.attr_s("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean") c.unsupported("reduction '%s'", red.c_str());
  const int64_t C = s[1];
  Shape us, rs;  // targets with a size-1 class axis; the class weights' broadcast shape
  us.ndim = rs.ndim = s.ndim;
  for (uint32_t k = 0; k < s.ndim; ++k) {
    us[k] = k == 0 ? ts[0] : k == 1 ? 1 : ts[k - 1];
    rs[k] = k == 1 ? C : 1;
  }
  ctn_node t64 = cast(g, target, CTN_F64);
  ctn_node onehot = cast(g, one_hot(g, reshape(g, t64, us), C, 1), dt);
  ctn_node picked = reduce(g, CTN_OP_SUM, g.op2(CTN_OP_MUL, logp, onehot), 2, false);
  ctn_node w = onehot;
  if (weight != CTN_NODE_NONE) w = g.op2(CTN_OP_MUL, onehot, reshape(g, weight, rs));
  w = reduce(g, CTN_OP_SUM, w, 2, false);
  if (c.has_attr("ignore_index")) {
    ctn_node keep = g.op2(CTN_OP_NE, t64, g.add_scalar(CTN_F64, static_cast<double>(c.attr_i("ignore_index", 0))));
    w = g.op2(CTN_OP_MUL, w, cast(g, keep, dt));
  }
  ctn_node loss = g.op1(CTN_OP_NEG, g.op2(CTN_OP_MUL, picked, w));
  if (red == "none") return loss;
  ctn_node total = reduce(g, CTN_OP_SUM, loss, 0, false);
  if (red == "sum") return total;
  return g.op2(CTN_OP_DIV, total, reduce(g, CTN_OP_SUM, w, 0, false));
}

void nll_loss(NodeCtx &c) { out1(c, nll(c, c.in(0), c.in(1), c.has(2) ? c.in(2) : CTN_NODE_NONE)); }

void softmax_cross_entropy(NodeCtx &c) {
  ctn_attrs a = attrs_i({1});
  if (c.shape(0).ndim < 2) c.invalid("scores must be [N, C, ...]");
  ctn_node logp = c.g.op1(CTN_OP_LOG_SOFTMAX, c.in(0), &a);
  c.outs = {nll(c, logp, c.in(1), c.has(2) ? c.in(2) : CTN_NODE_NONE), logp};
}

// ---- more normalisations -------------------------------------------------------------------------
uint64_t tail_mask(uint32_t from, uint32_t nd) {
  uint64_t m = 0;
  for (uint32_t k = from; k < nd; ++k) m |= 1ull << k;
  return m;
}

void rms_norm(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const int32_t ax = c.axis(c.attr_i("axis", -1), s.ndim);
  c.ignore("stash_type");
  ctn_node x = c.in(0);
  ctn_node ms = reduce(g, CTN_OP_MEAN, g.op2(CTN_OP_MUL, x, x), tail_mask(static_cast<uint32_t>(ax), s.ndim), true);
  ctn_node r = g.op1(CTN_OP_SQRT, g.op2(CTN_OP_ADD, ms, scalar_like(g, x, c.attr_f("epsilon", 1e-5))));
  out1(c, g.op2(CTN_OP_MUL, g.op2(CTN_OP_DIV, x, r), c.in(1)));
}

void group_norm(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const int64_t G = c.attr_i("num_groups", 0);
  c.ignore("stash_type");
  if (s.ndim < 3 || G < 1 || s[1] % G) c.invalid("needs [N, C, ...] with C divisible by num_groups");
  const int64_t N = s[0], C = s[1], rest = s.numel() / (N * C);
  ctn_node x = reshape(g, c.in(0), shape_of({N, G, C / G * rest}));
  ctn_node mean, var;
  moments(g, x, 4, &mean, &var);
  ctn_node r = g.op1(CTN_OP_SQRT, g.op2(CTN_OP_ADD, var, scalar_like(g, x, c.attr_f("epsilon", 1e-5))));
  ctn_node y = reshape(g, g.op2(CTN_OP_DIV, g.op2(CTN_OP_SUB, x, mean), r), s);
  ctn_node sc = c.in(1), b = c.in(2);
  if (c.shape(1).numel() == G && G != C) {  // opset 18: one scale and bias per group
    ctn_attrs a = attrs_i({G, C / G});
    sc = reshape(g, g.op1(CTN_OP_BROADCAST_TO, reshape(g, sc, shape_of({G, 1})), &a), shape_of({C}));
    b = reshape(g, g.op1(CTN_OP_BROADCAST_TO, reshape(g, b, shape_of({G, 1})), &a), shape_of({C}));
  }
  y = g.op2(CTN_OP_MUL, y, per_channel(g, sc, s.ndim));
  out1(c, g.op2(CTN_OP_ADD, y, per_channel(g, b, s.ndim)));
}

void lp_norm(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const int32_t ax = c.axis(c.attr_i("axis", -1), s.ndim);
  const int64_t p = c.attr_i("p", 2);
  ctn_node x = c.in(0);
  if (p != 1 && p != 2) c.unsupported("p = %lld", static_cast<long long>(p));
  ctn_node n = p == 1 ? reduce(g, CTN_OP_SUM, g.op1(CTN_OP_ABS, x), 1ull << ax, true)
                      : g.op1(CTN_OP_SQRT, reduce(g, CTN_OP_SUM, g.op2(CTN_OP_MUL, x, x), 1ull << ax, true));
  // A zero norm leaves the zero vector as it is (ONNX's reference), not 0/0.
  ctn_node zero = g.op2(CTN_OP_EQ, n, scalar_like(g, n, 0));
  ctn_node in[3] = {zero, scalar_like(g, n, 1), n};
  out1(c, g.op2(CTN_OP_DIV, x, g.add_op(CTN_OP_WHERE, 3, in, nullptr)));
}

}  // namespace

void convert_lstm(NodeCtx &c);
void convert_gru(NodeCtx &c);
void convert_rnn(NodeCtx &c);

namespace {
// Col2Im: the inverse of im2col, summing overlapping blocks: the columns [N, C*prod(block), L]
// times a constant 0/1 map [prod(block)*L, prod(image)] from (kernel offset, block location) to
// the image position it lands on (positions in the padding are dropped).
void col2im(NodeCtx &c) {
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  if (!dtype_is_float(dt)) c.unsupported("dtype %s (float and double only)", dtype_name(dt));
  const std::vector<int64_t> img = c.ints(1, "image_shape"), blk = c.ints(2, "block_shape");
  const size_t nd = img.size();
  if (nd == 0 || blk.size() != nd) c.invalid("image_shape and block_shape must have the same, non-zero length");
  const std::vector<int64_t> dil = c.attr_ints_n("dilations", 1, nd), str = c.attr_ints_n("strides", 1, nd), pads = c.attr_ints_n("pads", 0, 2 * nd);
  const Shape xs = c.shape(0);
  int64_t k_total = 1, img_total = 1, l_total = 1;
  std::vector<int64_t> locs(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (blk[d] < 1 || img[d] < 1 || dil[d] < 1 || str[d] < 1) c.invalid("sizes, dilations and strides must be positive");
    constexpr int64_t kBig = int64_t{1} << 31;  // keeps every product below in int64
    if (blk[d] > kBig || img[d] > kBig || dil[d] > kBig || str[d] > kBig || pads[d] < 0 || pads[d + nd] < 0 ||
        pads[d] > kBig || pads[d + nd] > kBig)
      c.invalid("sizes, dilations, strides and pads must be below 2^31 (and pads not negative)");
    locs[d] = (img[d] + pads[d] + pads[d + nd] - (dil[d] * (blk[d] - 1) + 1)) / str[d] + 1;
    if (locs[d] < 1) c.invalid("the block does not fit the padded image along dim %zu", d);
    k_total *= blk[d], img_total *= img[d], l_total *= locs[d];
    c.limit(static_cast<double>(k_total) * static_cast<double>(l_total) * static_cast<double>(img_total), "Col2Im's position map");
  }
  if (xs.ndim != 3 || xs[1] % k_total != 0 || xs[2] != l_total)
    c.invalid("input %s does not fit: [N, C*%lld, %lld] expected", shape_str(xs).c_str(), static_cast<long long>(k_total),
              static_cast<long long>(l_total));
  c.limit(static_cast<double>(k_total) * static_cast<double>(l_total) * static_cast<double>(img_total), "Col2Im's position map");
  std::vector<double> map(static_cast<size_t>(k_total * l_total * img_total));
  for (int64_t k = 0; k < k_total; ++k)
    for (int64_t l = 0; l < l_total; ++l) {
      int64_t kr = k, lr = l, pos = 0, stride = 1;
      bool inside = true;
      for (size_t d = nd; d-- > 0;) {
        const int64_t ki = kr % blk[d], li = lr % locs[d];
        kr /= blk[d], lr /= locs[d];
        const int64_t at = li * str[d] - pads[d] + ki * dil[d];
        inside = inside && at >= 0 && at < img[d];
        pos += at * stride;
        stride *= img[d];
      }
      if (inside) map[static_cast<size_t>((k * l_total + l) * img_total + pos)] = 1;
    }
  const int64_t nc = xs[0] * (xs[1] / k_total);
  ctn_node cols = reshape(g, c.in(0), shape_of({nc, k_total * l_total}));
  ctn_node y = g.op2(CTN_OP_MATMUL, cols, const_f(g, dt, map, shape_of({k_total * l_total, img_total})));
  Shape out;
  out[out.ndim++] = xs[0];
  out[out.ndim++] = xs[1] / k_total;
  for (int64_t v : img) out[out.ndim++] = v;
  out1(c, reshape(g, y, out));
}

const OpEntry kNn[] = {
    {"MatMul", matmul},
    {"Gemm", gemm},
    {"Conv", conv},
    {"QLinearConv", qlinear_conv},
    {"ConvInteger", conv_integer},
    {"ConvTranspose", conv_transpose},
    {"MaxPool", max_pool},
    {"AveragePool", avg_pool},
    {"LpPool", lp_pool},
    {"MaxUnpool", max_unpool},
    {"Col2Im", col2im},
    {"GlobalAveragePool", global_avg_pool},
    {"GlobalMaxPool", global_max_pool},
    {"BatchNormalization", batch_norm},
    {"InstanceNormalization", instance_norm},
    {"LayerNormalization", layer_norm},
    {"MeanVarianceNormalization", mean_variance_norm},
    {"LRN", lrn},
    {"Dropout", dropout},
    {"NegativeLogLikelihoodLoss", nll_loss},
    {"SoftmaxCrossEntropyLoss", softmax_cross_entropy},
    {"RMSNormalization", rms_norm},
    {"GroupNormalization", group_norm},
    {"LpNormalization", lp_norm},
    {"LSTM", convert_lstm},
    {"GRU", convert_gru},
    {"RNN", convert_rnn},
};
}  // namespace

std::span<const OpEntry> nn_ops() { return kNn; }

}  // namespace ctn::onnx
