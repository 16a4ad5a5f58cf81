// ONNX Resize (and the older Upsample): with static shapes every output coordinate's source taps
// and weights are known at import time, so each resized axis becomes one gather per tap (take)
// and a weighted sum with constant weights: nearest is one gather, linear two, cubic four.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <algorithm>
#include <cmath>

namespace ctn::onnx {
namespace {

using namespace lower;

struct ResizeSpec {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0.0;
  bool exclude_outside = false;
  bool antialias = false;  // linear and cubic: the filter stretched by 1 / scale when downsampling
};

// Source coordinate of output position `o` (ONNX's coordinate_transformation_mode). Like ONNX's
// reference, the modes that divide by the output size use the unrounded in * scale.
double source_coord(const ResizeSpec &s, int64_t o, int64_t in, int64_t out, double scale, double roi_b, double roi_e) {
  const double x = static_cast<double>(o), out_f = scale * static_cast<double>(in);
  if (s.coord == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (s.coord == "half_pixel_symmetric") {
    const double adj = static_cast<double>(out) / out_f;
    const double center = static_cast<double>(in) / 2 * (1 - adj);
    return center + (x + 0.5) / scale - 0.5;
  }
  if (s.coord == "pytorch_half_pixel") return out_f == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (s.coord == "align_corners") return out_f == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out_f - 1);
  if (s.coord == "asymmetric") return x / scale;
  // tf_crop_and_resize
  if (out_f == 1) return 0.5 * (roi_b + roi_e) * static_cast<double>(in - 1);
  return roi_b * static_cast<double>(in - 1) + x * (roi_e - roi_b) * static_cast<double>(in - 1) / (out_f - 1);
}

struct Taps {
  int n = 1;
  std::vector<std::vector<int64_t>> idx;  // [tap][out]
  std::vector<std::vector<double>> w;
  std::vector<bool> outside;  // tf_crop_and_resize: coordinate beyond the input
};

Taps taps_for(const ResizeSpec &s, int64_t in, int64_t out, double scale, double roi_b, double roi_e) {
  Taps t;
  t.n = s.mode == "nearest" ? 1 : s.mode == "linear" ? 2 : 4;
  t.idx.assign(static_cast<size_t>(t.n), std::vector<int64_t>(static_cast<size_t>(out)));
  t.w.assign(static_cast<size_t>(t.n), std::vector<double>(static_cast<size_t>(out)));
  t.outside.assign(static_cast<size_t>(out), false);
  auto clampi = [&](int64_t i) { return i < 0 ? 0 : i >= in ? in - 1 : i; };
  for (int64_t o = 0; o < out; ++o) {
    const double x = source_coord(s, o, in, out, scale, roi_b, roi_e);
    const size_t oi = static_cast<size_t>(o);
    if (s.coord == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1))) t.outside[oi] = true;
    const double fl = std::floor(x), r = x - fl;
    const int64_t base = static_cast<int64_t>(fl);
    if (t.n == 1) {
      bool up;
      if (r == 0) up = false;
      else if (s.nearest == "round_prefer_floor") up = r > 0.5;
      else if (s.nearest == "round_prefer_ceil") up = r >= 0.5;
      else if (s.nearest == "floor") up = false;
      else up = true;  // ceil
      t.idx[0][oi] = clampi(base + (up ? 1 : 0));
      t.w[0][oi] = 1;
      continue;
    }
    double c[4];
    if (t.n == 2) {
      c[0] = 1 - r, c[1] = r;
    } else {
      const double A = s.cubic_a, a = r + 1, b = 1 - r, d = 2 - r;
      c[0] = ((A * a - 5 * A) * a + 8 * A) * a - 4 * A;
      c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
      c[2] = ((A + 2) * b - (A + 3)) * b * b + 1;
      c[3] = ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    }
    const int64_t first = t.n == 2 ? base : base - 1;
    double sum = 0;
    for (int k = 0; k < t.n; ++k) {
      const int64_t i = first + k;
      if (s.exclude_outside && (i < 0 || i >= in)) c[k] = 0;
      sum += c[k];
    }
    for (int k = 0; k < t.n; ++k) {
      t.idx[static_cast<size_t>(k)][oi] = clampi(first + k);
      t.w[static_cast<size_t>(k)][oi] = s.exclude_outside && sum != 0 ? c[k] / sum : c[k];
    }
  }
  return t;
}

// Antialiased linear or cubic taps (ONNX's reference): the filter's argument is scaled by
// min(scale, 1), so a downsampling filter spans 1 / scale times as many inputs; the weights are
// normalised to sum 1 and the taps are the n inputs nearest the source coordinate.
Taps taps_antialias(const ResizeSpec &s, int64_t in, int64_t out, double scale, double roi_b, double roi_e) {
  const double sc = std::min(scale, 1.0);
  const bool cubic = s.mode == "cubic";
  const int64_t start = static_cast<int64_t>(std::floor((cubic ? -2 : -1) / sc) + 1);
  const int64_t n = 2 - 2 * start;  // taps start .. 1 - start
  if (n > 4096) fail(CTN_ERR_UNSUPPORTED, "Resize: an antialias filter of %lld taps (scale %g)", static_cast<long long>(n), scale);
  Taps t;
  t.n = static_cast<int>(n);
  t.idx.assign(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(out)));
  t.w.assign(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(out)));
  t.outside.assign(static_cast<size_t>(out), false);
  const double A = s.cubic_a;
  auto weight = [&](double x) {
    x = std::fabs(x);
    if (!cubic) return std::clamp(1 - x, 0.0, 1.0);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    return x < 2 ? ((A * x - 5 * A) * x + 8 * A) * x - 4 * A : 0.0;
  };
  const int64_t pad = (n + 1) / 2;
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t o = 0; o < out; ++o) {
    const size_t oi = static_cast<size_t>(o);
    const double x = source_coord(s, o, in, out, scale, roi_b, roi_e);
    if (s.coord == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1))) t.outside[oi] = true;
    const double fl = std::floor(x), ratio = x == fl ? 1.0 : x - fl;
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += w[static_cast<size_t>(k)] = weight(sc * (static_cast<double>(start + k) - ratio));
    const double xp = x + static_cast<double>(pad), p = std::floor(xp), frac = xp - p;
    const int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1) : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    const int64_t first = static_cast<int64_t>(p) + off - pad;
    double kept = 0;
    for (int64_t k = 0; k < n; ++k) {
      double &wk = w[static_cast<size_t>(k)];
      wk = sum != 0 ? wk / sum : wk;
      if (s.exclude_outside && (first + k < 0 || first + k >= in)) wk = 0;
      kept += wk;
    }
    for (int64_t k = 0; k < n; ++k) {
      t.idx[static_cast<size_t>(k)][oi] = std::clamp<int64_t>(first + k, 0, in - 1);
      t.w[static_cast<size_t>(k)][oi] = s.exclude_outside ? w[static_cast<size_t>(k)] / (kept == 0 ? 1 : kept) : w[static_cast<size_t>(k)];
    }
  }
  return t;
}

ctn_node resize_axis(Graph &g, ctn_node x, uint32_t axis, const Taps &t, const ResizeSpec &s) {
  const Shape xs = g.info(x).shape;
  const int64_t out = static_cast<int64_t>(t.outside.size());
  Shape ws;
  ws.ndim = xs.ndim;
  for (uint32_t k = 0; k < xs.ndim; ++k) ws[k] = k == axis ? out : 1;
  ctn_node y = CTN_NODE_NONE;
  for (int k = 0; k < t.n; ++k) {
    ctn_node part = take(g, x, const_i64(g, t.idx[static_cast<size_t>(k)], Shape::from(1, &out)), static_cast<int32_t>(axis));
    if (t.n > 1) part = g.op2(CTN_OP_MUL, part, const_f(g, g.info(x).dtype, t.w[static_cast<size_t>(k)], ws));
    y = y == CTN_NODE_NONE ? part : g.op2(CTN_OP_ADD, y, part);
  }
  bool any_outside = false;
  for (bool b : t.outside) any_outside = any_outside || b;
  if (any_outside) {
    Tensor m = Tensor::empty(CTN_BOOL, ws);
    for (int64_t o = 0; o < out; ++o) m.data()[o] = t.outside[static_cast<size_t>(o)];
    ctn_node in[3] = {g.add_constant(m), scalar_like(g, y, s.extrapolation), y};
    y = g.add_op(CTN_OP_WHERE, 3, in, nullptr);
  }
  return y;
}

void resize_common(NodeCtx &c, ResizeSpec s, std::vector<double> scales, std::vector<int64_t> sizes, std::vector<double> roi) {
  Graph &g = c.g;
  const Shape xs = c.shape(0);
  const uint32_t nd = xs.ndim;
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic") c.unsupported("mode '%s'", s.mode.c_str());
  if (s.mode != "nearest" && !dtype_is_float(c.dtype(0))) c.unsupported("%s mode on %s", s.mode.c_str(), dtype_name(c.dtype(0)));
  std::vector<int64_t> axes;
  for (int64_t a : c.attr_ints("axes")) axes.push_back(c.axis(a, nd));
  if (axes.empty())
    for (uint32_t k = 0; k < nd; ++k) axes.push_back(k);
  const std::string policy = c.attr_s("keep_aspect_ratio_policy", "stretch");
  std::vector<double> sc(nd, 1.0);
  std::vector<int64_t> out(xs.d, xs.d + nd);
  if (!sizes.empty()) {
    if (sizes.size() != axes.size()) c.invalid("sizes has %zu entries for %zu axes", sizes.size(), axes.size());
    if (policy == "stretch") {
      for (size_t k = 0; k < axes.size(); ++k) {
        const uint32_t a = static_cast<uint32_t>(axes[k]);
        out[a] = sizes[k];
        sc[a] = static_cast<double>(sizes[k]) / static_cast<double>(xs[a]);
      }
    } else {
      double f = policy == "not_larger" ? 1e300 : 0;
      for (size_t k = 0; k < axes.size(); ++k) {
        double r = static_cast<double>(sizes[k]) / static_cast<double>(xs[static_cast<uint32_t>(axes[k])]);
        f = policy == "not_larger" ? std::min(f, r) : std::max(f, r);
      }
      for (int64_t a : axes) {
        sc[static_cast<size_t>(a)] = f;
        out[static_cast<size_t>(a)] = static_cast<int64_t>(std::floor(f * static_cast<double>(xs[static_cast<uint32_t>(a)]) + 0.5));
      }
    }
  } else {
    if (scales.size() != axes.size()) c.invalid("scales has %zu entries for %zu axes", scales.size(), axes.size());
    for (size_t k = 0; k < axes.size(); ++k) {
      const uint32_t a = static_cast<uint32_t>(axes[k]);
      if (!(scales[k] > 0)) c.invalid("scale %g is not positive", scales[k]);
      sc[a] = scales[k];
      out[a] = static_cast<int64_t>(std::floor(static_cast<double>(xs[a]) * scales[k]));
    }
  }
  if (s.coord == "tf_crop_and_resize" && roi.size() != 2 * axes.size() && roi.size() != 2 * nd)
    c.invalid("tf_crop_and_resize needs a roi of 2 x %zu values", axes.size());
  for (int64_t a : axes) c.limit(static_cast<double>(out[static_cast<size_t>(a)]), "a resized axis");
  ctn_node y = c.in(0);
  for (size_t k = axes.size(); k-- > 0;) {  // innermost axis first, as ONNX's reference nests them
    const uint32_t a = static_cast<uint32_t>(axes[k]);
    if (out[a] == xs[a] && sc[a] == 1.0 && s.coord != "tf_crop_and_resize") continue;
    double rb = 0, re = 1;
    if (!roi.empty()) {
      const size_t half = roi.size() / 2, at = roi.size() == 2 * nd ? a : k;
      rb = roi[at];
      re = roi[at + half];
    }
    y = resize_axis(g, y, a, (s.antialias ? taps_antialias : taps_for)(s, xs[a], out[a], sc[a], rb, re), s);
  }
  c.outs = {y};
}

void resize(NodeCtx &c) {
  ResizeSpec s;
  s.mode = c.attr_s("mode", "nearest");
  s.coord = c.attr_s("coordinate_transformation_mode", "half_pixel");
  s.nearest = c.attr_s("nearest_mode", "round_prefer_floor");
  s.cubic_a = c.attr_f("cubic_coeff_a", -0.75);
  s.extrapolation = c.attr_f("extrapolation_value", 0.0);
  s.exclude_outside = c.attr_i("exclude_outside", 0) != 0;
  s.antialias = c.attr_i("antialias", 0) != 0 && s.mode != "nearest";  // nearest ignores it
  std::vector<double> roi, scales;
  std::vector<int64_t> sizes;
  if (c.opset < 11) {  // Resize-10: (X, scales)
    scales = c.reals(1, "scales");
  } else {
    if (c.has(1) && c.shape(1).numel()) roi = c.reals(1, "roi");
    if (c.has(2) && c.shape(2).numel()) scales = c.reals(2, "scales");
    if (c.has(3) && c.shape(3).numel()) sizes = c.ints(3, "sizes");
  }
  if (s.mode == "nearest" && s.nearest != "round_prefer_floor" && s.nearest != "round_prefer_ceil" && s.nearest != "floor" &&
      s.nearest != "ceil")
    c.unsupported("nearest_mode '%s'", s.nearest.c_str());
  static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "tf_crop_and_resize"};
  bool known = false;
  for (const char *k : coords) known = known || s.coord == k;
  if (!known) c.unsupported("coordinate_transformation_mode '%s'", s.coord.c_str());
  if (c.opset < 11) s.coord = "asymmetric", s.nearest = s.mode == "nearest" ? "floor" : s.nearest;
  resize_common(c, s, scales, sizes, roi);
}

void upsample(NodeCtx &c) {
  ResizeSpec s;
  s.mode = c.attr_s("mode", "nearest");
  s.coord = "asymmetric";
  s.nearest = "floor";
  std::vector<float> f = c.attr_floats("scales");
  std::vector<double> scales = f.empty() ? c.reals(1, "scales") : std::vector<double>(f.begin(), f.end());
  resize_common(c, s, scales, {}, {});
}

// AffineGrid: the sampling grid theta @ [x, y(, z), 1] over the normalised output coordinates,
// a constant base grid [1, P, K+1] times theta^T [N, K+1, K] as one batched matmul.
void affine_grid(NodeCtx &c) {
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  if (!dtype_is_float(dt)) c.unsupported("theta of dtype %s (float and double only)", dtype_name(dt));
  const std::vector<int64_t> size = c.ints(1, "size");
  const Shape ts = c.shape(0);
  const auto k = static_cast<int64_t>(size.size()) - 2;  // spatial dims: 2 or 3
  if ((k != 2 && k != 3) || ts.ndim != 3 || ts[0] != size[0] || ts[1] != k || ts[2] != k + 1)
    c.invalid("theta %s does not fit size of %zu entries (theta [N, 2, 3] with [N, C, H, W], [N, 3, 4] with "
              "[N, C, D, H, W])", shape_str(ts).c_str(), size.size());
  const bool align = c.attr_i("align_corners", 0) != 0;
  // Output dims in order (D,) H, W; the coordinate vector is (x, y(, z)): W first.
  std::vector<int64_t> dims(size.begin() + 2, size.end());
  int64_t points = 1;
  for (int64_t d : dims) points *= d;
  c.limit(static_cast<double>(points) * static_cast<double>(k + 1), "AffineGrid's base grid");
  auto coord = [&](int64_t i, int64_t n) {
    if (n <= 1) return 0.0;
    return align ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1)
                 : (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n) - 1.0;
  };
  std::vector<double> base(static_cast<size_t>(points * (k + 1)));
  for (int64_t p = 0; p < points; ++p) {
    int64_t rem = p;
    for (int64_t j = k - 1; j >= 0; --j) {  // j indexes dims; coordinate slot k-1-j
      const int64_t n = dims[static_cast<size_t>(j)], i = rem % n;
      rem /= n;
      base[static_cast<size_t>(p * (k + 1) + (k - 1 - j))] = coord(i, n);
    }
    base[static_cast<size_t>(p * (k + 1) + k)] = 1.0;
  }
  ctn_node bg = const_f(g, dt, base, Shape::from(3, std::vector<int64_t>{1, points, k + 1}.data()));
  ctn_node y = g.op2(CTN_OP_MATMUL, bg, permute(g, c.in(0), {0, 2, 1}));
  Shape out;
  out[out.ndim++] = size[0];
  for (int64_t d : dims) out[out.ndim++] = d;
  out[out.ndim++] = k;
  c.outs = {reshape(g, y, out)};
}

const OpEntry kResize[] = {
    {"AffineGrid", affine_grid},
    {"Resize", resize},
    {"Upsample", upsample},
};

}  // namespace

std::span<const OpEntry> resize_ops() { return kResize; }

}  // namespace ctn::onnx
