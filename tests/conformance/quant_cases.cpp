// Conformance cases of the int8 quantization ops (ops.h, "int8 quantization"): quantize_linear,
// dequantize_linear, matmul_integer, qlinear_matmul, conv2d_integer, qlinear_conv2d, qlinear_add. The
// references compute what the ops define in the same arithmetic (a float multiplier, x / scale in
// the float dtype under test) so that the 8-bit results must match exactly. Only the CPU
// backend runs them; the others decline (the matrix shows unsupported).
#include <cmath>

#include "case_helpers.hpp"
#include "nn_cases.hpp"

namespace conf {
namespace {

double sat_round(double v, double zp, int dt) {
  const double lo = dt == CTN_U8 ? 0 : -128, hi = dt == CTN_U8 ? 255 : 127;
  return std::min(hi, std::max(lo, std::nearbyint(v) + zp));
}

// quantize_linear / dequantize_linear over numpy broadcasting of scale and zero point.
Arr ref_affine(const std::vector<Arr> &x, ctn_dtype fdt, bool quantize, int qdt) {
  Arr y = make_arr(x[0].shape);
  const Shape &s = x[0].shape;
  std::vector<int64_t> idx(s.size(), 0);
  for (size_t i = 0; i < y.v.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i);
    for (size_t d = s.size(); d-- > 0;) {
      idx[d] = rem % s[d];
      rem /= s[d];
    }
    const double sc = bget(x[1], s, idx), zp = bget(x[2], s, idx), v = x[0].v[i];
    if (quantize) {
      // f16 and bf16 run as f32 between conversions: f32 arithmetic unless the dtype is f64.
      const double q = fdt != CTN_F64 ? static_cast<double>(static_cast<float>(v) / static_cast<float>(sc)) : v / sc;
      y.v[i] = sat_round(q, zp, qdt);
    } else {
      y.v[i] = fdt != CTN_F64 ? static_cast<double>(static_cast<float>(v - zp) * static_cast<float>(sc)) : (v - zp) * sc;
    }
  }
  return y;
}

// One i32 sum per output of a (less za) times b (less zb[n]); a [B?, M, K], b [B?, K, N] with
// b's batch 1 or a's.
Arr ref_int_matmul(const Arr &a, const Arr &b, const Arr &za, const Arr &zb) {
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  const int64_t batch = numel(a.shape) / (m * k), bb = numel(b.shape) / (k * n);
  Shape ys = a.shape;
  ys[ra - 1] = n;
  Arr y = make_arr(ys);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        const int64_t tb = bb == 1 ? 0 : t;
        for (int64_t p = 0; p < k; ++p)
          acc += (a.v[static_cast<size_t>((t * m + i) * k + p)] - za.v[0]) *
                 (b.v[static_cast<size_t>((tb * k + p) * n + j)] - zb.v[zb.v.size() == 1 ? 0 : static_cast<size_t>(j)]);
        y.v[static_cast<size_t>((t * m + i) * n + j)] = acc;
      }
  return y;
}

// Requantisation: saturate(round(f32(acc + bias[c]) * f32(f32(sa * sb[c]) / sy)) + zy), with relu.
double requant(double acc, double bias, double sa, double sb, double sy, double zy, int dt, bool relu) {
  const float mult = static_cast<float>(sa) * static_cast<float>(sb) / static_cast<float>(sy);
  float f = static_cast<float>(acc + bias) * mult;
  if (relu) f = std::max(f, 0.0f);
  return sat_round(f, zy, dt);
}

Arr ref_qlinear_matmul(const std::vector<Arr> &x, int dt) {
  Arr y = ref_int_matmul(x[0], x[3], x[2], x[5]);
  const int64_t n = x[3].shape.back();
  auto per = [](const Arr &p, int64_t j) { return p.v[p.v.size() == 1 ? 0 : static_cast<size_t>(j)]; };
  for (size_t i = 0; i < y.v.size(); ++i) {
    const int64_t j = static_cast<int64_t>(i) % n;
    y.v[i] = requant(y.v[i], per(x[8], j), x[1].v[0], per(x[4], j), x[6].v[0], x[7].v[0], dt, false);
  }
  return y;
}

struct QConv {
  Shape x, w;
  ConvP p;
  int xdt = CTN_U8;  // qlinear_conv2d's x (and x_zero_point) dtype
  bool zx0 = false;  // qlinear_conv2d's x_zero_point 0 (as after a ReLU: no weight row sums)
};

// The convolution of (x - zx) and (w - zw[o]), zero padding after the shift (ix, iw, izx, izw:
// where the operands are among the inputs).
Arr ref_int_conv(const std::vector<Arr> &in, const QConv &q, size_t ix, size_t iw, size_t izx, size_t izw) {
  Arr xs = in[ix], ws = in[iw];
  for (double &v : xs.v) v -= in[izx].v[0];
  const int64_t per_w = numel(ws.shape) / ws.shape[0];
  for (size_t i = 0; i < ws.v.size(); ++i) {
    const Arr &z = in[izw];
    ws.v[i] -= z.v[z.v.size() == 1 ? 0 : i / static_cast<size_t>(per_w)];
  }
  return ref_conv2d(xs, ws, q.p);
}

void add_affine(std::vector<OpCase> &cs) {
  OpCase qc{"quantize_linear", CTN_OP_QUANTIZE_LINEAR, {}}, dc{"dequantize_linear", CTN_OP_DEQUANTIZE_LINEAR, {}};
  struct A {
    const char *label;
    Shape param;
    int qdt;
    Gen zp;
  };
  for (const A &a : {A{"per tensor u8", {}, CTN_U8, ints(100, 150)}, A{"per channel i8", {3, 1}, CTN_I8, ints(-10, 10)},
                     A{"per element u8", {2, 3, 4}, CTN_U8, ints(0, 255)}}) {
    const int qdt = a.qdt;
    Variant q = variant(std::string(a.label) + " x [2,3,4]",
                        {in({2, 3, 4}, uni(-3, 3)), in(a.param, uni(0.01, 0.05)), in(a.param, a.zp, qdt)},
                        named(CTN_OP_QUANTIZE_LINEAR),
                        [qdt](const std::vector<Arr> &x, ctn_dtype fdt) { return ref_affine(x, fdt, true, qdt); });
    q.out_dtype = [qdt](ctn_dtype) { return static_cast<ctn_dtype>(qdt); };
    Gen vals = qdt == CTN_U8 ? ints(0, 255) : ints(-128, 127);
    Variant d = variant(std::string(a.label) + " x [2,3,4]",
                        {in({2, 3, 4}, vals, qdt), in(a.param, uni(0.01, 0.05)), in(a.param, a.zp, qdt)},
                        named(CTN_OP_DEQUANTIZE_LINEAR),
                        [qdt](const std::vector<Arr> &x, ctn_dtype fdt) { return ref_affine(x, fdt, false, qdt); });
    q.tol32 = q.tol16 = q.tolbf16 = 0;  // 8-bit results: exact
    d.tol32 = 1e-12;
    qc.variants.push_back(q);
    dc.variants.push_back(d);
  }
  Variant d32 = variant("i32 x [5]", {in({5}, ints(-100000, 100000), CTN_I32), in({}, uni(0.001, 0.01)), in({}, ints(-5, 5), CTN_I32)},
                        named(CTN_OP_DEQUANTIZE_LINEAR),
                        [](const std::vector<Arr> &x, ctn_dtype fdt) { return ref_affine(x, fdt, false, CTN_I32); });
  dc.variants.push_back(d32);
  cs.push_back(qc);
  cs.push_back(dc);
}

void add_int_matmul(std::vector<OpCase> &cs) {
  OpCase mi{"matmul_integer", CTN_OP_MATMUL_INTEGER, {}}, qm{"qlinear_matmul", CTN_OP_QLINEAR_MATMUL, {}};
  struct M {
    Shape a, b;
    bool per_col;
  };
  // K odd and N past one 64-column panel, M past one 4-row block; batches folded and not.
  for (const M &m : {M{{3, 5}, {5, 4}, false}, M{{5, 67}, {67, 130}, true}, M{{2, 3, 6}, {6, 4}, true},
                     M{{2, 3, 6}, {2, 6, 5}, false}}) {
    const int64_t n = m.b.back();
    const Shape zb = m.per_col ? Shape{n} : Shape{};
    const std::string label = shape_label(m.a) + "*" + shape_label(m.b) + (m.per_col ? " per column" : "");
    Variant v = variant(label,
                        {in(m.a, ints(0, 255), CTN_U8), in(m.b, ints(-128, 127), CTN_I8), in({}, ints(100, 150), CTN_U8),
                         in(zb, ints(-3, 3), CTN_I8)},
                        named(CTN_OP_MATMUL_INTEGER),
                        [](const std::vector<Arr> &x, ctn_dtype) { return ref_int_matmul(x[0], x[1], x[2], x[3]); });
    v.out_dtype = [](ctn_dtype) { return CTN_I32; };
    const int64_t k = m.a.back();
    const double sy = 0.002 * static_cast<double>(k);  // outputs spread over the 8-bit range, some saturated
    Variant q = variant(label,
                        {in(m.a, ints(0, 255), CTN_U8), in({}, uni(0.01, 0.02), CTN_F32), in({}, ints(100, 150), CTN_U8),
                         in(m.b, ints(-128, 127), CTN_I8), in(zb, uni(0.005, 0.01), CTN_F32), in(zb, ints(-3, 3), CTN_I8),
                         in({}, uni(sy, 2 * sy), CTN_F32), in({}, ints(-20, 20), CTN_I8), in({n}, ints(-2000, 2000), CTN_I32)},
                        named(CTN_OP_QLINEAR_MATMUL),
                        [](const std::vector<Arr> &x, ctn_dtype) { return ref_qlinear_matmul(x, CTN_I8); });
    q.out_dtype = [](ctn_dtype) { return CTN_I8; };
    for (Variant *p : {&v, &q}) {
      p->no_half = true;
      p->tol32 = p->tol64 = 0;
    }
    mi.variants.push_back(v);
    qm.variants.push_back(q);
  }
  cs.push_back(mi);
  cs.push_back(qm);
}

void add_int_conv(std::vector<OpCase> &cs) {
  OpCase ci{"conv2d_integer", CTN_OP_CONV2D_INTEGER, {}}, qc{"qlinear_conv2d", CTN_OP_QLINEAR_CONV2D, {}};
  const QConv qs[] = {{{1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
                      {{2, 4, 7, 6}, {4, 2, 3, 2}, {2, 1, 1, 0, 1, 2, 2}},
                      {{1, 3, 9, 9}, {70, 3, 1, 1}, {1, 1, 0, 0, 1, 1, 1}},
                      // stride 2 over rows of 70 bytes (the vector path of the u8 im2col), x i8
                      {{1, 3, 5, 70}, {8, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 1}, CTN_I8},
                      // depthwise (the direct kernel)
                      {{1, 4, 7, 7}, {4, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 4}},
                      {{2, 6, 9, 8}, {6, 1, 3, 3}, {2, 2, 1, 1, 1, 1, 6}, CTN_I8},
                      // 16 output pixels: the u8 x s8 tile's one-vector panel
                      {{1, 8, 4, 4}, {5, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
                      // depthwise stride 2 over rows of more than 32 outputs (the AVX-512 phase rows)
                      {{1, 3, 6, 75}, {3, 1, 3, 3}, {2, 2, 1, 1, 1, 1, 3}},
                      {{1, 2, 5, 80}, {2, 1, 3, 3}, {2, 2, 0, 0, 1, 1, 2}, CTN_I8},
                      // x's zero point 0, K = 18 (not a multiple of 4: A copied, no row sums)
                      {{1, 2, 6, 6}, {9, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, CTN_U8, true},
                      {{1, 8, 6, 6}, {9, 8, 1, 1}, {1, 1, 0, 0, 1, 1, 1}, CTN_U8, true},
                      // stride 1, C/groups a multiple of 4 (the padded channel-quad planes): rows
                      // of 37 (16-byte steps and a tail), x i8, two groups, 5 x 3 unpadded
                      {{1, 4, 6, 37}, {7, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
                      {{2, 8, 9, 20}, {6, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, CTN_I8},
                      {{1, 8, 5, 5}, {4, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 2}},
                      {{1, 4, 7, 8}, {3, 4, 5, 3}, {1, 1, 0, 0, 1, 1, 1}, CTN_U8, true},
                      // C/groups a multiple of 4 at strides 2, (2, 1) and (1, 3), a strided 1 x 1, x i8
                      {{1, 8, 9, 11}, {6, 8, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
                      {{2, 4, 8, 37}, {5, 4, 3, 3}, {2, 1, 1, 1, 1, 1, 1}, CTN_I8},
                      {{1, 4, 6, 13}, {3, 4, 2, 5}, {1, 3, 0, 2, 1, 1, 1}},
                      {{1, 8, 7, 7}, {5, 8, 1, 1}, {2, 2, 0, 0, 1, 1, 1}, CTN_U8, true}};
  for (const QConv &q : qs)
    for (bool relu : {false, true}) {
      const ConvP p = q.p;
      const int64_t o = q.w[0];
      const ctn_attrs ca = attrs({p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.g});
      const std::string label =
          shape_label(q.x) + "*" + shape_label(q.w) + " " + p.label() + (q.xdt == CTN_I8 ? " x i8" : "");
      if (!relu) {
        Variant v = variant(label,
                            {in(q.x, ints(0, 255), CTN_U8), in(q.w, ints(-128, 127), CTN_I8), in({}, ints(100, 150), CTN_U8),
                             in({o}, ints(-3, 3), CTN_I8)},
                            named(CTN_OP_CONV2D_INTEGER, ca),
                            [q](const std::vector<Arr> &x, ctn_dtype) { return ref_int_conv(x, q, 0, 1, 2, 3); });
        v.out_dtype = [](ctn_dtype) { return CTN_I32; };
        v.no_half = true;
        v.tol32 = v.tol64 = 0;
        ci.variants.push_back(v);
      }
      const double sy = 0.0005 * static_cast<double>(numel(q.w) / o);
      ctn_attrs qa = ca;
      qa.i[qa.ni++] = relu ? CTN_ACT_RELU : CTN_ACT_NONE;
      Variant v = variant(label + (relu ? " relu" : ""),
                          {in(q.x, q.xdt == CTN_U8 ? ints(0, 255) : ints(-128, 127), q.xdt), in({}, uni(0.01, 0.02), CTN_F32),
                           in({}, q.zx0 ? ints(0, 0) : q.xdt == CTN_U8 ? ints(100, 150) : ints(-20, 20), q.xdt),
                           in(q.w, ints(-127, 127), CTN_I8), in({o}, uni(0.002, 0.004), CTN_F32), in({}, ints(0, 0), CTN_I8),
                           in({}, uni(sy, 2 * sy), CTN_F32), in({}, ints(90, 110), CTN_U8), in({o}, ints(-3000, 3000), CTN_I32)},
                          named(CTN_OP_QLINEAR_CONV2D, qa), [q, relu](const std::vector<Arr> &x, ctn_dtype) {
                            Arr y = ref_int_conv(x, q, 0, 3, 2, 5);
                            const int64_t hw = numel(y.shape) / (y.shape[0] * y.shape[1]), o = y.shape[1];
                            for (size_t i = 0; i < y.v.size(); ++i) {
                              const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / hw) % o);
                              y.v[i] = requant(y.v[i], x[8].v[c], x[1].v[0], x[4].v[c], x[6].v[0], x[7].v[0], CTN_U8, relu);
                            }
                            return y;
                          });
      v.out_dtype = [](ctn_dtype) { return CTN_U8; };
      v.no_half = true;
      v.tol32 = v.tol64 = 0;
      qc.variants.push_back(v);
    }
  cs.push_back(ci);
  cs.push_back(qc);
}

// qlinear_add (since 1.7): onnxruntime's QLinearAdd in f32 with its two fused multiply-adds
// (std::fma on floats rounds once), a past the i32 range the minimum; b broadcasts against a.
Arr ref_qadd(const std::vector<Arr> &x, int dt) {
  const Shape &s = x[0].shape;
  Arr y = make_arr(s);
  const float ra = static_cast<float>(x[1].v[0]) / static_cast<float>(x[6].v[0]);
  const float rb = static_cast<float>(x[4].v[0]) / static_cast<float>(x[6].v[0]);
  const float c = static_cast<float>(x[7].v[0]) -
                  std::fma(ra, static_cast<float>(x[2].v[0]), rb * static_cast<float>(x[5].v[0]));
  for (size_t i = 0; i < y.v.size(); ++i) {
    const float b = static_cast<float>(bget(x[3], s, unravel(static_cast<int64_t>(i), s)));
    const float v = std::fma(static_cast<float>(x[0].v[i]), ra, std::fma(b, rb, c));
    y.v[i] = std::fabs(v) < 2147483648.0f ? sat_round(v, 0, dt) : (dt == CTN_U8 ? 0 : -128);
  }
  return y;
}

void add_qadd(std::vector<OpCase> &cs) {
  OpCase qa{"qlinear_add", CTN_OP_QLINEAR_ADD, {}};
  struct A {
    Shape a, b;
    int dt;
    double ratio;  // a_scale / y_scale about this: 0.6 keeps most outputs inside, 40 saturates most
  };
  // Lengths past one 16-element step with a masked tail; b one value or one row broadcast.
  for (const A &c : {A{{2, 3, 5}, {2, 3, 5}, CTN_U8, 0.6}, A{{3, 37}, {3, 37}, CTN_I8, 0.6}, A{{2, 70}, {2, 70}, CTN_U8, 40},
                     A{{3, 37}, {37}, CTN_U8, 0.6}, A{{4, 6}, {}, CTN_I8, 0.6}}) {
    const int dt = c.dt;
    const Gen vals = dt == CTN_U8 ? ints(0, 255) : ints(-128, 127), zps = dt == CTN_U8 ? ints(90, 160) : ints(-30, 30);
    const double sy = 0.05;
    Variant v = variant(shape_label(c.a) + "+" + shape_label(c.b) + (dt == CTN_U8 ? " u8" : " i8"),
                        {in(c.a, vals, dt), in({}, uni(0.5 * c.ratio * sy, c.ratio * sy), CTN_F32), in({}, zps, dt),
                         in(c.b, vals, dt), in({}, uni(0.5 * c.ratio * sy, c.ratio * sy), CTN_F32), in({}, zps, dt),
                         in({}, uni(sy, sy), CTN_F32), in({}, zps, dt)},
                        named(CTN_OP_QLINEAR_ADD), [dt](const std::vector<Arr> &x, ctn_dtype) { return ref_qadd(x, dt); });
    v.out_dtype = [dt](ctn_dtype) { return static_cast<ctn_dtype>(dt); };
    v.no_half = true;
    v.tol32 = v.tol64 = 0;
    qa.variants.push_back(v);
  }
  cs.push_back(qa);
}

}  // namespace

const std::vector<OpCase> &quant_cases() {
  static const std::vector<OpCase> cases = collect_cases({add_affine, add_int_matmul, add_int_conv, add_qadd});
  return cases;
}

}  // namespace conf
