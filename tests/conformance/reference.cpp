// Naive double-precision reference implementations. Written for obviousness, not speed: every op
// loops over output multi-indices. Independent of chutney (no chutney call in this file).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "conformance.hpp"

namespace conf {

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Arr make_arr(Shape shape, double fill) {
  Arr a;
  a.v.assign(static_cast<size_t>(numel(shape)), fill);
  a.shape = std::move(shape);
  return a;
}

Shape broadcast_shapes(const std::vector<Shape> &shapes) {
  size_t nd = 0;
  for (const auto &s : shapes) nd = std::max(nd, s.size());
  Shape out(nd, 1);
  for (const auto &s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[s.size() - 1 - i];
      int64_t &o = out[nd - 1 - i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      throw std::runtime_error("reference: shapes do not broadcast");
    }
  }
  return out;
}

std::vector<int64_t> unravel(int64_t flat, const Shape &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = flat % shape[i];
    flat /= shape[i];
  }
  return idx;
}

static int64_t ravel(const std::vector<int64_t> &idx, const Shape &shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + idx[i];
  return flat;
}

int64_t bindex(const Shape &a_shape, const Shape &out, const std::vector<int64_t> &idx) {
  size_t lead = out.size() - a_shape.size();
  int64_t flat = 0;
  for (size_t i = 0; i < a_shape.size(); ++i) {
    int64_t d = a_shape[i];
    flat = flat * d + (d == 1 ? 0 : idx[lead + i]);
  }
  return flat;
}

double bget(const Arr &a, const Shape &out, const std::vector<int64_t> &idx) {
  return a.v[static_cast<size_t>(bindex(a.shape, out, idx))];
}

Arr ref_map1(const Arr &a, const std::function<double(double)> &f) {
  Arr r = a;
  for (double &x : r.v) x = f(x);
  return r;
}

Arr ref_map2(const Arr &a, const Arr &b, const std::function<double(double, double)> &f) {
  Arr r = make_arr(broadcast_shapes({a.shape, b.shape}));
  for (int64_t i = 0; i < numel(r.shape); ++i) {
    auto idx = unravel(i, r.shape);
    r.v[i] = f(bget(a, r.shape, idx), bget(b, r.shape, idx));
  }
  return r;
}

Arr ref_map3(const Arr &a, const Arr &b, const Arr &c,
             const std::function<double(double, double, double)> &f) {
  Arr r = make_arr(broadcast_shapes({a.shape, b.shape, c.shape}));
  for (int64_t i = 0; i < numel(r.shape); ++i) {
    auto idx = unravel(i, r.shape);
    r.v[i] = f(bget(a, r.shape, idx), bget(b, r.shape, idx), bget(c, r.shape, idx));
  }
  return r;
}

Arr ref_matmul(const Arr &a, const Arr &b, bool ta, bool tb) {
  size_t na = a.shape.size(), nb = b.shape.size();
  int64_t M = ta ? a.shape[na - 1] : a.shape[na - 2];
  int64_t K = ta ? a.shape[na - 2] : a.shape[na - 1];
  int64_t N = tb ? b.shape[nb - 2] : b.shape[nb - 1];
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Shape batch = broadcast_shapes({ba, bb});
  Shape out = batch;
  out.push_back(M);
  out.push_back(N);
  Arr r = make_arr(out);
  int64_t as = a.shape[na - 2] * a.shape[na - 1], bs = b.shape[nb - 2] * b.shape[nb - 1];
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    auto idx = unravel(bi, batch);
    int64_t ia = bindex(ba, batch, idx) * as;
    int64_t ib = bindex(bb, batch, idx) * bs;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          double x = ta ? a.v[ia + k * M + m] : a.v[ia + m * K + k];
          double y = tb ? b.v[ib + n * K + k] : b.v[ib + k * N + n];
          acc += x * y;
        }
        r.v[(bi * M + m) * N + n] = acc;
      }
  }
  return r;
}

Arr ref_reduce(const Arr &x, std::vector<int32_t> axes, bool keepdims, Red kind) {
  int32_t nd = static_cast<int32_t>(x.shape.size());
  std::vector<bool> red(x.shape.size(), axes.empty());
  for (int32_t ax : axes) red[static_cast<size_t>(ax < 0 ? ax + nd : ax)] = true;
  Shape kshape = x.shape, oshape;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (red[i]) kshape[i] = 1;
    if (!red[i] || keepdims) oshape.push_back(kshape[i]);
  }
  double init = kind == Red::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  Arr r = make_arr(kshape, init);
  int64_t count = numel(x.shape) / std::max<int64_t>(numel(kshape), 1);
  for (int64_t i = 0; i < numel(x.shape); ++i) {
    auto idx = unravel(i, x.shape);
    for (size_t d = 0; d < idx.size(); ++d)
      if (red[d]) idx[d] = 0;
    double &o = r.v[ravel(idx, kshape)];
    o = kind == Red::Max ? std::max(o, x.v[i]) : o + x.v[i];
  }
  if (kind == Red::Mean)
    for (double &o : r.v) o /= static_cast<double>(count);
  r.shape = oshape;
  return r;
}

Arr ref_permute(const Arr &x, const std::vector<int32_t> &perm) {
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = x.shape[perm[i]];
  Arr r = make_arr(out);
  for (int64_t i = 0; i < numel(out); ++i) {
    auto oi = unravel(i, out);
    std::vector<int64_t> si(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) si[perm[k]] = oi[k];
    r.v[i] = x.v[ravel(si, x.shape)];
  }
  return r;
}

Arr ref_reshape(const Arr &x, Shape shape) {
  int64_t known = 1;
  for (int64_t d : shape)
    if (d != -1) known *= d;
  for (int64_t &d : shape)
    if (d == -1) d = numel(x.shape) / known;
  return Arr{shape, x.v};
}

std::tuple<int64_t, int64_t, int64_t> norm_slice(int64_t n, int64_t start, int64_t stop,
                                                  int64_t step) {
  auto fix = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  start = fix(start);
  stop = fix(stop);
  int64_t count = stop > start ? (stop - start + step - 1) / step : 0;
  return {start, stop, count};
}

Arr ref_slice(const Arr &x, int32_t axis, int64_t start, int64_t stop, int64_t step) {
  size_t ax = static_cast<size_t>(axis < 0 ? axis + static_cast<int32_t>(x.shape.size()) : axis);
  auto [s0, s1, count] = norm_slice(x.shape[ax], start, stop, step);
  (void)s1;
  Shape out = x.shape;
  out[ax] = count;
  Arr r = make_arr(out);
  for (int64_t i = 0; i < numel(out); ++i) {
    auto idx = unravel(i, out);
    idx[ax] = s0 + idx[ax] * step;
    r.v[i] = x.v[ravel(idx, x.shape)];
  }
  return r;
}

Arr ref_slice_grad(const Arr &dy, int32_t axis, int64_t start, int64_t step, int64_t src_size) {
  Shape out = dy.shape;
  out[axis] = src_size;
  Arr r = make_arr(out);
  for (int64_t i = 0; i < numel(dy.shape); ++i) {
    auto idx = unravel(i, dy.shape);
    idx[axis] = start + idx[axis] * step;
    r.v[ravel(idx, out)] += dy.v[i];
  }
  return r;
}

Arr ref_concat(const std::vector<Arr> &xs, int32_t axis) {
  size_t ax = static_cast<size_t>(axis < 0 ? axis + static_cast<int32_t>(xs[0].shape.size())
                                           : axis);
  Shape out = xs[0].shape;
  out[ax] = 0;
  for (const auto &x : xs) out[ax] += x.shape[ax];
  Arr r = make_arr(out);
  for (int64_t i = 0; i < numel(out); ++i) {
    auto idx = unravel(i, out);
    size_t k = 0;
    while (idx[ax] >= xs[k].shape[ax]) idx[ax] -= xs[k++].shape[ax];
    r.v[i] = xs[k].v[ravel(idx, xs[k].shape)];
  }
  return r;
}

Arr ref_broadcast_to(const Arr &x, const Shape &shape) {
  Arr r = make_arr(shape);
  for (int64_t i = 0; i < numel(shape); ++i) r.v[i] = bget(x, shape, unravel(i, shape));
  return r;
}

Arr ref_softmax(const Arr &x, int32_t axis, bool log) {
  size_t ax = static_cast<size_t>(axis < 0 ? axis + static_cast<int32_t>(x.shape.size()) : axis);
  Arr mx = ref_reduce(x, {static_cast<int32_t>(ax)}, true, Red::Max);
  Arr e = ref_map2(x, mx, [](double a, double m) { return std::exp(a - m); });
  Arr s = ref_reduce(e, {static_cast<int32_t>(ax)}, true, Red::Sum);
  if (!log) return ref_map2(e, s, [](double a, double b) { return a / b; });
  Arr sh = ref_map2(x, mx, [](double a, double m) { return a - m; });
  return ref_map2(sh, s, [](double a, double b) { return a - std::log(b); });
}

Arr ref_cross_entropy(const Arr &logits, const Arr &labels) {
  Arr ls = ref_softmax(logits, 1, true);
  int64_t N = logits.shape[0], C = logits.shape[1];
  double acc = 0;
  for (int64_t n = 0; n < N; ++n) acc -= ls.v[n * C + static_cast<int64_t>(labels.v[n])];
  return Arr{{}, {acc / static_cast<double>(N)}};
}

Arr ref_cross_entropy_grad(const Arr &logits, const Arr &labels, double dy) {
  Arr p = ref_softmax(logits, 1, false);
  int64_t N = logits.shape[0], C = logits.shape[1];
  for (int64_t n = 0; n < N; ++n) p.v[n * C + static_cast<int64_t>(labels.v[n])] -= 1.0;
  for (double &v : p.v) v *= dy / static_cast<double>(N);
  return p;
}

Arr ref_softmax_grad(const Arr &y, const Arr &dy, int32_t axis, bool log) {
  if (!log) {
    Arr prod = ref_map2(dy, y, [](double a, double b) { return a * b; });
    Arr s = ref_reduce(prod, {axis}, true, Red::Sum);
    Arr t = ref_map2(dy, s, [](double a, double b) { return a - b; });
    return ref_map2(y, t, [](double a, double b) { return a * b; });
  }
  Arr s = ref_reduce(dy, {axis}, true, Red::Sum);
  Arr e = ref_map2(y, s, [](double a, double b) { return std::exp(a) * b; });
  return ref_map2(dy, e, [](double a, double b) { return a - b; });
}

double ref_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

double ref_gelu_grad(double x) {
  const double pi = 3.14159265358979323846;
  double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * pi);
  return cdf + x * pdf;
}

double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double round_to(double x, ctn_dtype dtype) {
  switch (dtype) {
    case CTN_F32: return static_cast<double>(static_cast<float>(x));
    case CTN_F64: return x;
    case CTN_I32: return static_cast<double>(static_cast<int32_t>(x));
    case CTN_I64: return static_cast<double>(static_cast<int64_t>(x));
    case CTN_U8: return static_cast<double>(static_cast<uint8_t>(x));
    case CTN_BOOL: return x != 0.0 ? 1.0 : 0.0;
    case CTN_I8: return static_cast<double>(static_cast<int8_t>(x));
    case CTN_F16: return ctn_desc_f16_to_f32(ctn_desc_f64_to_f16(x));
    case CTN_BF16: return ctn_desc_bf16_to_f32(ctn_desc_f64_to_bf16(x));
    default: return x;
  }
}

}  // namespace conf
