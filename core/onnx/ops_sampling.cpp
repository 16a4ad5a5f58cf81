// ONNX GridSample, RoiAlign and DeformConv, composed of existing chutney ops.
// GridSample: the sampling coordinates come from the grid (data, not constants), so they are
// computed by elementwise ops in the grid's dtype, in the order ONNX's reference computes them
// (denormalise, round for nearest, clamp or reflect what lies outside); each interpolation tap
// (1 nearest, 2 linear, 4 cubic per spatial dim) is one gather of the input viewed as
// [N * prod(spatial), C] at n * P + flat index, weighted by the product of the per-dim weights
// (0 for a tap in the zero padding). 2-d and 3-d. Gradients flow to the input (through the
// gather) and to the grid (through the weights). RoiAlign and DeformConv sample the same way.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <algorithm>
#include <cmath>

namespace ctn::onnx {
namespace {

using namespace lower;

Shape shape_of(std::initializer_list<int64_t> v) { return Shape::from(static_cast<uint32_t>(v.size()), std::data(v)); }

// Elementwise helpers in one float dtype.
struct Ew {
  Graph &g;
  int32_t dt;
  ctn_node k(double v) const { return g.add_scalar(dt, v); }
  ctn_node add(ctn_node a, ctn_node b) const { return g.op2(CTN_OP_ADD, a, b); }
  ctn_node sub(ctn_node a, ctn_node b) const { return g.op2(CTN_OP_SUB, a, b); }
  ctn_node mul(ctn_node a, ctn_node b) const { return g.op2(CTN_OP_MUL, a, b); }
  ctn_node div(ctn_node a, ctn_node b) const { return g.op2(CTN_OP_DIV, a, b); }
  ctn_node lt(ctn_node a, ctn_node b) const { return g.op2(CTN_OP_LT, a, b); }
  ctn_node gt(ctn_node a, ctn_node b) const { return g.op2(CTN_OP_GT, a, b); }
  ctn_node where(ctn_node c, ctn_node a, ctn_node b) const {
    ctn_node in[3] = {c, a, b};
    return g.add_op(CTN_OP_WHERE, 3, in, nullptr);
  }
  ctn_node either(ctn_node a, ctn_node b) const {  // logical or of two bool tensors
    return g.op2(CTN_OP_GT, g.op2(CTN_OP_ADD, cast(g, a, dt), cast(g, b, dt)), k(0));
  }
  ctn_node clamp(ctn_node x, double lo, double hi) const { return g.op2(CTN_OP_MINIMUM, g.op2(CTN_OP_MAXIMUM, x, k(lo)), k(hi)); }
  ctn_node floor(ctn_node x) const { return lower::floor(g, x); }
  ctn_node even(ctn_node n) const {  // n - 2 floor(n / 2) == 0
    return g.op2(CTN_OP_EQ, sub(n, mul(k(2), floor(mul(n, k(0.5))))), k(0));
  }
  // Round half to even (numpy's rint).
  ctn_node rint(ctn_node x) const {
    ctn_node f = floor(x), r = sub(x, f), up = add(f, k(1));
    return where(gt(r, k(0.5)), up, where(lt(r, k(0.5)), f, where(even(f), f, up)));
  }
  // Reflects what lies outside [lo, hi] back inside by the near border (the reference's
  // _gs_reflect): dx = distance beyond the border, n = floor(dx / range), r = dx - n range.
  ctn_node reflect(ctn_node v, double lo, double hi) const {
    ctn_node below = lt(v, k(lo)), above = gt(v, k(hi));
    ctn_node dx = where(below, sub(k(lo), v), sub(v, k(hi)));
    const double range = hi - lo;
    ctn_node n = range > 0 ? floor(div(dx, k(range))) : k(0);
    ctn_node r = sub(dx, mul(n, k(range))), ev = even(n);
    ctn_node from_lo = add(k(lo), r), from_hi = sub(k(hi), r);
    ctn_node res = where(below, where(ev, from_lo, from_hi), where(ev, from_hi, from_lo));
    return where(either(below, above), res, v);
  }
};

// Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 for the fraction t.
ctn_node cubic_weight(const Ew &e, ctn_node t, int tap) {
  const double a = -0.75;
  auto far = [&](ctn_node x) {  // ((a (x) - 5a) x + 8a) x - 4a for x in [1, 2]
    return e.sub(e.mul(e.add(e.mul(e.sub(e.mul(e.k(a), x), e.k(5 * a)), x), e.k(8 * a)), x), e.k(4 * a));
  };
  auto near = [&](ctn_node x) {  // ((a + 2) x - (a + 3)) x x + 1 for x in [0, 1]
    return e.add(e.mul(e.mul(e.sub(e.mul(e.k(a + 2), x), e.k(a + 3)), x), x), e.k(1));
  };
  switch (tap) {
    case 0: return far(e.add(t, e.k(1)));
    case 1: return near(t);
    case 2: return near(e.sub(e.k(1), t));
    default: return far(e.sub(e.k(2), t));
  }
}

struct Tap {
  ctn_node idx, w;  // index along the dim (float, in range) and weight (NONE: 1)
};

struct GridSpec {
  std::string mode, padding;
  bool align = false;
};

// The taps of one spatial dim of `size` at the denormalised coordinates u.
std::vector<Tap> dim_taps(const Ew &e, ctn_node u, int64_t size, const GridSpec &s) {
  const double d = static_cast<double>(size);
  const double lo = s.align ? 0 : -0.5, hi = s.align ? d - 1 : d - 0.5;
  if (s.mode == "nearest") u = e.rint(u);
  ctn_node outside = e.either(e.lt(u, e.k(lo)), e.gt(u, e.k(hi)));
  if (s.padding == "border") u = e.where(outside, e.clamp(u, 0, d - 1), u);
  else if (s.padding == "reflection") u = e.reflect(u, lo, hi);
  std::vector<Tap> taps;
  ctn_node base = s.mode == "nearest" ? u : e.floor(u), t = e.sub(u, base);
  const int first = s.mode == "cubic" ? -1 : 0, last = s.mode == "nearest" ? 0 : s.mode == "linear" ? 1 : 2;
  for (int o = first; o <= last; ++o) {
    ctn_node i = o == 0 ? base : e.add(base, e.k(o)), w = CTN_NODE_NONE;
    if (s.mode == "linear") w = o == 0 ? e.sub(e.k(1), t) : t;
    if (s.mode == "cubic") w = cubic_weight(e, t, o + 1);
    if (s.padding == "zeros") {
      ctn_node valid = cast(e.g, e.g.op2(CTN_OP_EQ, e.clamp(i, 0, d - 1), i), e.dt);
      w = w == CTN_NODE_NONE ? valid : e.mul(w, valid);
    } else if (s.padding == "reflection") {
      i = e.reflect(i, lo, hi);
    }
    taps.push_back({e.clamp(i, 0, d - 1), w});
  }
  return taps;
}

void grid_sample(NodeCtx &c) {
  Graph &g = c.g;
  const Shape xs = c.shape(0), gs = c.shape(1);
  const int32_t dt = c.dtype(0), gdt = c.dtype(1);
  if (!dtype_is_float(dt) || !dtype_is_float(gdt)) c.unsupported("dtype %s / %s (float and double only)", dtype_name(dt), dtype_name(gdt));
  const uint32_t D = xs.ndim - 2;
  if (xs.ndim != 4 && xs.ndim != 5) c.unsupported("%u-d input (2-d and 3-d sampling, NCHW / NCDHW)", xs.ndim);
  if (gs.ndim != xs.ndim || gs[0] != xs[0] || gs[gs.ndim - 1] != D)
    c.invalid("grid %s does not fit input %s: [N, out..., %u] expected", shape_str(gs).c_str(), shape_str(xs).c_str(), D);
  GridSpec s;
  s.mode = c.attr_s("mode", c.opset >= 20 ? "linear" : "bilinear");
  if (s.mode == "bilinear") s.mode = "linear";
  if (s.mode == "bicubic") s.mode = "cubic";
  s.padding = c.attr_s("padding_mode", "zeros");
  s.align = c.attr_i("align_corners", 0) != 0;
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic") c.invalid("unknown mode '%s'", s.mode.c_str());
  if (s.padding != "zeros" && s.padding != "border" && s.padding != "reflection") c.invalid("unknown padding_mode '%s'", s.padding.c_str());
  const Ew e{g, gdt};
  const int64_t N = xs[0], C = xs[1];
  int64_t P = 1;
  for (uint32_t i = 0; i < D; ++i) P *= xs[2 + i];
  Shape os;  // [N, out...]
  for (uint32_t k = 0; k + 1 < gs.ndim; ++k) os[os.ndim++] = gs[k];
  // Per spatial dim: its taps. Spatial dim i reads grid component D - 1 - i (x is the last dim).
  std::vector<std::vector<Tap>> taps(D);
  for (uint32_t i = 0; i < D; ++i) {
    const int64_t comp = D - 1 - i;
    ctn_node v = reshape(g, slice(g, c.in(1), static_cast<int32_t>(gs.ndim - 1), comp, comp + 1, 1), os);
    const double len = static_cast<double>(xs[2 + i]);
    ctn_node u = s.align ? e.mul(e.div(e.add(v, e.k(1)), e.k(2.0)), e.k(len - 1))
                         : e.div(e.sub(e.mul(e.add(v, e.k(1)), e.k(len)), e.k(1)), e.k(2.0));
    taps[i] = dim_taps(e, u, xs[2 + i], s);
  }
  // The table [N * P, C] and the batch offsets n * P.
  std::vector<int32_t> last{0};
  for (uint32_t i = 0; i < D; ++i) last.push_back(static_cast<int32_t>(2 + i));
  last.push_back(1);
  ctn_node table = reshape(g, permute(g, c.in(0), last), shape_of({N * P, C}));
  Shape bs = os;
  for (uint32_t k = 1; k < bs.ndim; ++k) bs[k] = 1;
  std::vector<double> boff(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) boff[static_cast<size_t>(n)] = static_cast<double>(n * P);
  ctn_node batch = const_f(g, gdt, boff, bs);
  Shape ws = os;
  ws[ws.ndim++] = 1;
  std::vector<size_t> at(D, 0);
  ctn_node y = CTN_NODE_NONE;
  for (;;) {
    ctn_node flat = batch, w = CTN_NODE_NONE;
    int64_t stride = P;
    for (uint32_t i = 0; i < D; ++i) {
      stride /= xs[2 + i];
      const Tap &t = taps[i][at[i]];
      flat = e.add(flat, stride == 1 ? t.idx : e.mul(t.idx, e.k(static_cast<double>(stride))));
      if (t.w != CTN_NODE_NONE) w = w == CTN_NODE_NONE ? t.w : e.mul(w, t.w);
    }
    ctn_node v = take(g, table, cast(g, flat, CTN_I64), 0);  // [N, out..., C]
    if (w != CTN_NODE_NONE) v = g.op2(CTN_OP_MUL, v, reshape(g, cast(g, w, dt), ws));
    y = y == CTN_NODE_NONE ? v : g.op2(CTN_OP_ADD, y, v);
    uint32_t i = D;
    while (i > 0 && ++at[i - 1] == taps[i - 1].size()) at[--i] = 0;
    if (i == 0) break;
  }
  std::vector<int32_t> back{0, static_cast<int32_t>(os.ndim)};
  for (uint32_t k = 1; k < os.ndim; ++k) back.push_back(static_cast<int32_t>(k));
  c.outs = {permute(g, y, back)};
}

// RoiAlign with constant rois and batch indices (bound as constants when they are graph inputs;
// needed for adaptive sampling, whose sample count depends on each roi's size):
// every sample point's 4 bilinear corners and weights are computed at import as ONNX's reference
// does, then one gather of X viewed as [N * H * W, C], weighted, reduced over the corners and the
// samples (avg: sum / count; max: the max over samples of the max over corners of w * x, the
// reference's rule). Adaptive sampling (sampling_ratio 0) pads rois with fewer samples: weight 0
// for avg, a repeat of the first sample for max.
struct RoiSpec {
  int64_t ph = 1, pw = 1, ratio = 0;
  double scale = 1;
  bool half_pixel = true, is_max = false;
};

struct RoiSample {
  int64_t pos[4];
  double w[4];
};

// The samples of one roi's bins: [ph][pw][samples], samples = gh * gw.
std::vector<RoiSample> roi_samples(const NodeCtx &c, const RoiSpec &s, const double *box, int64_t H, int64_t W, int64_t *per_bin) {
  const double off = s.half_pixel ? 0.5 : 0.0;
  const double x0 = box[0] * s.scale - off, y0 = box[1] * s.scale - off;
  double rw = box[2] * s.scale - off - x0, rh = box[3] * s.scale - off - y0;
  if (!s.half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
  const double bh = rh / static_cast<double>(s.ph), bw = rw / static_cast<double>(s.pw);
  const int64_t gh = s.ratio > 0 ? s.ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(s.ph)));
  const int64_t gw = s.ratio > 0 ? s.ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(s.pw)));
  c.limit(static_cast<double>(s.ph * s.pw) * static_cast<double>(gh) * static_cast<double>(gw), "RoiAlign's sample points");
  *per_bin = std::max<int64_t>(gh, 0) * std::max<int64_t>(gw, 0);
  std::vector<RoiSample> v;
  for (int64_t py = 0; py < s.ph; ++py)
    for (int64_t px = 0; px < s.pw; ++px)
      for (int64_t iy = 0; iy < gh; ++iy)
        for (int64_t ix = 0; ix < gw; ++ix) {
          double y = y0 + static_cast<double>(py) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
          double x = x0 + static_cast<double>(px) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
          RoiSample r{{0, 0, 0, 0}, {0, 0, 0, 0}};
          if (!(y < -1.0 || y > static_cast<double>(H) || x < -1.0 || x > static_cast<double>(W))) {
            y = std::max(y, 0.0), x = std::max(x, 0.0);
            int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh = yl + 1, xh = xl + 1;
            if (yl >= H - 1) yh = yl = H - 1, y = static_cast<double>(yl);
            if (xl >= W - 1) xh = xl = W - 1, x = static_cast<double>(xl);
            const double ly = y - static_cast<double>(yl), lx = x - static_cast<double>(xl), hy = 1 - ly, hx = 1 - lx;
            r = {{yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}};
          }
          v.push_back(r);
        }
  return v;
}

// RoiAlign with rois and batch indices that are data and a fixed sampling_ratio (gh = gw = ratio
// samples per bin): the sample coordinates [R, bins, samples] per axis are elementwise ops in X's
// dtype, in the reference's order; the corner rows' flat indices in f64 (exact for any X); one
// gather per corner of the [R, ph, gh, pw, gw] sample grid.
void roi_align_data(NodeCtx &c, const RoiSpec &s) {
  Graph &g = c.g;
  const Shape xs = c.shape(0), rs = c.shape(1);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], R = rs.ndim == 2 ? rs[0] : 0, G = s.ratio;
  if (rs.ndim != 2 || rs[1] != 4 || c.shape(2).numel() != R || R < 1) c.invalid("rois must be [R, 4] and batch_indices [R]");
  c.limit(static_cast<double>(R * s.ph * G * s.pw * G) * static_cast<double>(C), "RoiAlign's gathered samples");
  const Ew e{g, c.dtype(0)};
  const Ew d{g, CTN_F64};
  auto col = [&](int64_t k) { return reshape(g, slice(g, c.in(1), 1, k, k + 1, 1), Shape::from(3, std::vector<int64_t>{R, 1, 1}.data())); };
  const double off = s.half_pixel ? 0.5 : 0.0;
  auto start = [&](int64_t k) { return e.sub(e.mul(col(k), e.k(s.scale)), e.k(off)); };
  struct Axis {
    ctn_node lo, hi, wl, wh, out;  // corner rows, their weights, the sample is outside
  };
  // One axis: starts x0 (k0) and ends (k1) of every roi, `bins` bins of G samples, input size n.
  auto axis = [&](int64_t k0, int64_t k1, int64_t bins, int64_t n) {
    ctn_node x0 = start(k0), len = e.sub(start(k1), x0);
    if (!s.half_pixel) len = g.op2(CTN_OP_MAXIMUM, len, e.k(1));
    ctn_node bin = e.div(len, e.k(static_cast<double>(bins)));
    std::vector<double> pb(static_cast<size_t>(bins)), iy(static_cast<size_t>(G));
    for (int64_t b = 0; b < bins; ++b) pb[static_cast<size_t>(b)] = static_cast<double>(b);
    for (int64_t i = 0; i < G; ++i) iy[static_cast<size_t>(i)] = static_cast<double>(i) + 0.5;
    ctn_node v = e.add(e.add(x0, e.mul(const_f(g, e.dt, pb, Shape::from(3, std::vector<int64_t>{1, bins, 1}.data())), bin)),
                       e.div(e.mul(const_f(g, e.dt, iy, Shape::from(3, std::vector<int64_t>{1, 1, G}.data())), bin), e.k(static_cast<double>(G))));
    Axis a;
    a.out = e.either(e.lt(v, e.k(-1.0)), e.gt(v, e.k(static_cast<double>(n))));
    v = g.op2(CTN_OP_MAXIMUM, v, e.k(0));
    ctn_node l0 = e.floor(v), top = g.op2(CTN_OP_GE, l0, e.k(static_cast<double>(n - 1))), last = e.k(static_cast<double>(n - 1));
    a.lo = e.where(top, last, l0), a.hi = e.where(top, last, e.add(l0, e.k(1)));
    a.wh = e.sub(e.where(top, last, v), a.lo), a.wl = e.sub(e.k(1), a.wh);
    return a;
  };
  const Axis ay = axis(1, 3, s.ph, H), ax = axis(0, 2, s.pw, W);
  const Shape ys = Shape::from(5, std::vector<int64_t>{R, s.ph, G, 1, 1}.data()), xs5 = Shape::from(5, std::vector<int64_t>{R, 1, 1, s.pw, G}.data());
  auto yv = [&](ctn_node n) { return reshape(g, n, ys); };
  auto xv = [&](ctn_node n) { return reshape(g, n, xs5); };
  ctn_node inside = g.op1(CTN_OP_NEG, e.sub(cast(g, e.either(yv(ay.out), xv(ax.out)), e.dt), e.k(1)));  // 1 - outside
  ctn_node batch = reshape(g, d.mul(cast(g, c.in(2), CTN_F64), d.k(static_cast<double>(H * W))), Shape::from(5, std::vector<int64_t>{R, 1, 1, 1, 1}.data()));
  ctn_node table = reshape(g, permute(g, c.in(0), {0, 2, 3, 1}), Shape::from(2, std::vector<int64_t>{N * H * W, C}.data()));
  Shape w6 = Shape::from(6, std::vector<int64_t>{R, s.ph, G, s.pw, G, 1}.data());
  ctn_node acc = CTN_NODE_NONE;
  for (int cy = 0; cy < 2; ++cy)
    for (int cx = 0; cx < 2; ++cx) {
      ctn_node row = yv(cy ? ay.hi : ay.lo), colx = xv(cx ? ax.hi : ax.lo);
      ctn_node flat = d.add(batch, d.add(d.mul(cast(g, row, CTN_F64), d.k(static_cast<double>(W))), cast(g, colx, CTN_F64)));
      ctn_node w = e.mul(e.mul(yv(cy ? ay.wh : ay.wl), xv(cx ? ax.wh : ax.wl)), inside);
      ctn_node v = g.op2(CTN_OP_MUL, take(g, table, cast(g, flat, CTN_I64), 0), reshape(g, w, w6));
      acc = acc == CTN_NODE_NONE ? v : g.op2(s.is_max ? CTN_OP_MAXIMUM : CTN_OP_ADD, acc, v);
    }
  const uint64_t samples = (1ull << 2) | (1ull << 4);
  ctn_node y = s.is_max ? reduce(g, CTN_OP_MAX, acc, samples, false)
                        : g.op2(CTN_OP_DIV, reduce(g, CTN_OP_SUM, acc, samples, false), e.k(static_cast<double>(G * G)));
  c.outs = {permute(g, y, {0, 3, 1, 2})};
}

void roi_align(NodeCtx &c) {
  Graph &g = c.g;
  const Shape xs = c.shape(0);
  const int32_t dt = c.dtype(0);
  if (!dtype_is_float(dt)) c.unsupported("dtype %s (float and double only)", dtype_name(dt));
  if (xs.ndim != 4) c.invalid("X must be [N, C, H, W], not %s", shape_str(xs).c_str());
  RoiSpec s;
  s.ph = c.attr_i("output_height", 1), s.pw = c.attr_i("output_width", 1), s.ratio = c.attr_i("sampling_ratio", 0);
  s.scale = c.attr_f("spatial_scale", 1.0);
  const std::string mode = c.attr_s("mode", "avg"), coord = c.attr_s("coordinate_transformation_mode", c.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (mode != "avg" && mode != "max") c.invalid("unknown mode '%s'", mode.c_str());
  if (coord != "half_pixel" && coord != "output_half_pixel") c.invalid("unknown coordinate_transformation_mode '%s'", coord.c_str());
  s.is_max = mode == "max", s.half_pixel = coord == "half_pixel";
  if (s.ph < 1 || s.pw < 1 || s.ratio < 0) c.invalid("output_height, output_width must be positive and sampling_ratio not negative");
  if ((!c.konst(1) || !c.konst(2)) && s.ratio > 0) return roi_align_data(c, s);
  const std::vector<double> rois = c.reals(1, "rois");
  const std::vector<int64_t> bi = c.ints(2, "batch_indices");
  const int64_t R = static_cast<int64_t>(bi.size()), N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  if (R < 1 || rois.size() != static_cast<size_t>(4 * R)) c.invalid("rois must be [%lld, 4] for %lld batch indices", static_cast<long long>(R), static_cast<long long>(R));
  std::vector<std::vector<RoiSample>> all(static_cast<size_t>(R));
  std::vector<int64_t> count(static_cast<size_t>(R));
  int64_t S = 1;
  for (int64_t r = 0; r < R; ++r) {
    if (bi[static_cast<size_t>(r)] < 0 || bi[static_cast<size_t>(r)] >= N) c.invalid("batch index %lld is outside [0, %lld)", static_cast<long long>(bi[static_cast<size_t>(r)]), static_cast<long long>(N));
    for (int k = 0; k < 4; ++k)
      if (!std::isfinite(rois[static_cast<size_t>(4 * r + k)]) || std::fabs(rois[static_cast<size_t>(4 * r + k)] * s.scale) > 1e9) c.invalid("roi %lld is not finite or too large", static_cast<long long>(r));
    all[static_cast<size_t>(r)] = roi_samples(c, s, &rois[static_cast<size_t>(4 * r)], H, W, &count[static_cast<size_t>(r)]);
    S = std::max(S, count[static_cast<size_t>(r)]);
  }
  c.limit(static_cast<double>(R * s.ph * s.pw * S * 4) * static_cast<double>(C), "RoiAlign's gathered samples");
  const int64_t bins = s.ph * s.pw, total = R * bins * S * 4;
  std::vector<int64_t> idx(static_cast<size_t>(total));
  std::vector<double> wt(static_cast<size_t>(total));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = count[static_cast<size_t>(r)], base = bi[static_cast<size_t>(r)] * H * W;
    for (int64_t b = 0; b < bins; ++b)
      for (int64_t k = 0; k < S; ++k) {
        const bool pad = k >= n;  // a roi with fewer samples than S
        static const RoiSample none{{0, 0, 0, 0}, {0, 0, 0, 0}};  // an empty roi: 0, as in the reference
        const RoiSample &q = n == 0 ? none : all[static_cast<size_t>(r)][static_cast<size_t>(b * n + (pad ? 0 : k))];
        for (int j = 0; j < 4; ++j) {
          const size_t e = static_cast<size_t>(((r * bins + b) * S + k) * 4 + j);
          idx[e] = base + q.pos[j];
          wt[e] = s.is_max ? q.w[j] : pad ? 0 : q.w[j] / static_cast<double>(std::max<int64_t>(n, 1));
        }
      }
  }
  ctn_node table = reshape(g, permute(g, c.in(0), {0, 2, 3, 1}), Shape::from(2, std::vector<int64_t>{N * H * W, C}.data()));
  ctn_node v = take(g, table, const_i64(g, idx, Shape::from(1, &total)), 0);  // [total, C]
  v = g.op2(CTN_OP_MUL, reshape(g, v, Shape::from(3, std::vector<int64_t>{R * bins, S * 4, C}.data())),
            const_f(g, dt, wt, Shape::from(3, std::vector<int64_t>{R * bins, S * 4, 1}.data())));
  ctn_node y = s.is_max ? reduce(g, CTN_OP_MAX, v, 1ull << 1, false) : reduce(g, CTN_OP_SUM, v, 1ull << 1, false);  // [R * bins, C]
  y = reshape(g, y, Shape::from(4, std::vector<int64_t>{R, s.ph, s.pw, C}.data()));
  c.outs = {permute(g, y, {0, 3, 1, 2})};
}

// DeformConv (2-d): each kernel tap of each offset group samples X bilinearly (zero outside, the
// GridSample rule with align_corners, as ONNX's reference does it) at its regular position plus
// the offset, times the mask; the samples [N, oH, oW, C, taps] then meet the weight in one matrix
// product per group.
struct DeformGeom {
  int64_t kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, og, groups;
};

// The samples of tap (i, j) for every channel: [N, oH, oW, C].
ctn_node deform_tap(NodeCtx &c, const DeformGeom &q, ctn_node table, int64_t i, int64_t j) {
  Graph &g = c.g;
  const Shape xs = c.shape(0);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], cg = C / q.og;
  const Ew e{g, c.dtype(0)};
  GridSpec s;
  s.mode = "linear", s.padding = "zeros", s.align = true;
  const Shape os = Shape::from(3, std::vector<int64_t>{N, q.oh, q.ow}.data());
  std::vector<double> by(static_cast<size_t>(q.oh)), bx(static_cast<size_t>(q.ow));
  for (int64_t o = 0; o < q.oh; ++o) by[static_cast<size_t>(o)] = static_cast<double>(o * q.sh - q.ph + i * q.dh);
  for (int64_t o = 0; o < q.ow; ++o) bx[static_cast<size_t>(o)] = static_cast<double>(o * q.sw - q.pw + j * q.dw);
  ctn_node base_y = const_f(g, e.dt, by, Shape::from(3, std::vector<int64_t>{1, q.oh, 1}.data()));
  ctn_node base_x = const_f(g, e.dt, bx, Shape::from(3, std::vector<int64_t>{1, 1, q.ow}.data()));
  std::vector<double> boff(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) boff[static_cast<size_t>(n)] = static_cast<double>(n * H * W);
  ctn_node batch = const_f(g, e.dt, boff, Shape::from(3, std::vector<int64_t>{N, 1, 1}.data()));
  const Shape ws = Shape::from(4, std::vector<int64_t>{N, q.oh, q.ow, 1}.data());
  std::vector<ctn_node> parts;
  for (int64_t gi = 0; gi < q.og; ++gi) {
    const int64_t ch = ((gi * q.kh + i) * q.kw + j) * 2;
    auto plane = [&](ctn_node src, int64_t k) { return reshape(g, slice(g, src, 1, k, k + 1, 1), os); };
    const std::vector<Tap> ty = dim_taps(e, e.add(plane(c.in(2), ch), base_y), H, s);
    const std::vector<Tap> tx = dim_taps(e, e.add(plane(c.in(2), ch + 1), base_x), W, s);
    ctn_node v = CTN_NODE_NONE;
    for (const Tap &a : ty)
      for (const Tap &b : tx) {
        ctn_node flat = e.add(batch, e.add(e.mul(a.idx, e.k(static_cast<double>(W))), b.idx));
        ctn_node part = g.op2(CTN_OP_MUL, take(g, table, cast(g, flat, CTN_I64), 0), reshape(g, e.mul(a.w, b.w), ws));
        v = v == CTN_NODE_NONE ? part : g.op2(CTN_OP_ADD, v, part);
      }
    if (q.og > 1) v = slice(g, v, 3, gi * cg, (gi + 1) * cg, 1);
    if (c.has(4)) v = g.op2(CTN_OP_MUL, v, reshape(g, plane(c.in(4), (gi * q.kh + i) * q.kw + j), ws));
    parts.push_back(v);
  }
  if (parts.size() == 1) return parts[0];
  ctn_attrs a = attrs_i({3});
  return g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(parts.size()), parts.data(), &a);
}

void deform_conv(NodeCtx &c) {
  Graph &g = c.g;
  const Shape xs = c.shape(0), wsh = c.shape(1), ofs = c.shape(2);
  const int32_t dt = c.dtype(0);
  if (!dtype_is_float(dt)) c.unsupported("dtype %s (float and double only)", dtype_name(dt));
  if (xs.ndim != 4) c.unsupported("%u-d input (2-d DeformConv only, NCHW)", xs.ndim);
  const std::vector<int64_t> st = c.attr_ints_n("strides", 1, 2), di = c.attr_ints_n("dilations", 1, 2), pads = c.attr_ints_n("pads", 0, 4);
  c.ignore("kernel_shape");
  DeformGeom q{wsh.ndim == 4 ? wsh[2] : 0, wsh.ndim == 4 ? wsh[3] : 0, st[0], st[1], di[0], di[1], pads[0], pads[1], 0, 0,
               c.attr_i("offset_group", 1), c.attr_i("group", 1)};
  const int64_t N = xs[0], C = xs[1], O = wsh.ndim == 4 ? wsh[0] : 0, T = q.kh * q.kw;
  if (wsh.ndim != 4 || q.groups < 1 || q.og < 1 || C % q.groups || C % q.og || O % q.groups || wsh[1] * q.groups != C)
    c.invalid("W %s, group %lld and offset_group %lld do not fit X %s", shape_str(wsh).c_str(), static_cast<long long>(q.groups),
              static_cast<long long>(q.og), shape_str(xs).c_str());
  if (ofs.ndim != 4 || ofs[0] != N || ofs[1] != q.og * T * 2) c.invalid("offset %s must be [N, offset_group * kH * kW * 2, oH, oW]", shape_str(ofs).c_str());
  q.oh = ofs[2], q.ow = ofs[3];
  for (int k = 0; k < 2; ++k) {
    const int64_t span = (wsh[2 + static_cast<uint32_t>(k)] - 1) * di[static_cast<size_t>(k)] + 1;
    const int64_t want = (xs[2 + static_cast<uint32_t>(k)] + pads[static_cast<size_t>(k)] + pads[static_cast<size_t>(k + 2)] - span) / st[static_cast<size_t>(k)] + 1;
    if (st[static_cast<size_t>(k)] < 1 || di[static_cast<size_t>(k)] < 1 || want != ofs[2 + static_cast<uint32_t>(k)])
      c.invalid("offset's spatial dims %s do not match the convolution's output", shape_str(ofs).c_str());
  }
  if (c.has(4) && (c.shape(4).ndim != 4 || c.shape(4)[1] != q.og * T)) c.invalid("mask %s must be [N, offset_group * kH * kW, oH, oW]", shape_str(c.shape(4)).c_str());
  c.limit(static_cast<double>(N * q.oh * q.ow) * static_cast<double>(C * T), "DeformConv's sampled columns");
  ctn_node table = reshape(g, permute(g, c.in(0), {0, 2, 3, 1}), Shape::from(2, std::vector<int64_t>{N * xs[2] * xs[3], C}.data()));
  std::vector<ctn_node> taps;
  const Shape t5 = Shape::from(5, std::vector<int64_t>{N, q.oh, q.ow, C, 1}.data());
  for (int64_t i = 0; i < q.kh; ++i)
    for (int64_t j = 0; j < q.kw; ++j) taps.push_back(reshape(g, deform_tap(c, q, table, i, j), t5));
  ctn_attrs cat = attrs_i({4});
  ctn_node cols = taps.size() == 1 ? taps[0] : g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(taps.size()), taps.data(), &cat);
  const int64_t cin = C / q.groups, cout = O / q.groups, rows = N * q.oh * q.ow;
  std::vector<ctn_node> outs;
  ctn_attrs tb = attrs_i({0, 1});
  for (int64_t gi = 0; gi < q.groups; ++gi) {
    ctn_node cg = reshape(g, slice(g, cols, 3, gi * cin, (gi + 1) * cin, 1), Shape::from(2, std::vector<int64_t>{rows, cin * T}.data()));
    ctn_node wg = reshape(g, slice(g, c.in(1), 0, gi * cout, (gi + 1) * cout, 1), Shape::from(2, std::vector<int64_t>{cout, cin * T}.data()));
    outs.push_back(g.op2(CTN_OP_MATMUL, cg, wg, &tb));
  }
  ctn_attrs c1 = attrs_i({1});
  ctn_node y = outs.size() == 1 ? outs[0] : g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(outs.size()), outs.data(), &c1);
  y = permute(g, reshape(g, y, Shape::from(4, std::vector<int64_t>{N, q.oh, q.ow, O}.data())), {0, 3, 1, 2});
  if (c.has(3)) y = g.op2(CTN_OP_ADD, y, reshape(g, c.in(3), Shape::from(3, std::vector<int64_t>{O, 1, 1}.data())));
  c.outs = {y};
}

const OpEntry kSampling[] = {
    {"DeformConv", deform_conv},
    {"RoiAlign", roi_align},
    {"GridSample", grid_sample},
};
}  // namespace

std::span<const OpEntry> sampling_ops() { return kSampling; }

}  // namespace ctn::onnx
