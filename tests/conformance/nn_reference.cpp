// Naive double-precision references for the neural-network ops: direct nested loops from the
// definitions in ops.h, sharing no code with any backend (the adjoint ops scatter where the
// kernels gather, so a shared indexing mistake cannot cancel out).
#include <cmath>
#include <limits>

#include "nn_cases.hpp"

namespace conf {

ctn_attrs ConvP::attrs(std::initializer_list<int64_t> extra) const {
  ctn_attrs a = conf::attrs({sh, sw, ph, pw, dh, dw, g});
  for (int64_t v : extra) a.i[a.ni++] = v;
  return a;
}

std::string ConvP::label() const {
  return "s" + std::to_string(sh) + "," + std::to_string(sw) + " p" + std::to_string(ph) + "," + std::to_string(pw) +
         " d" + std::to_string(dh) + "," + std::to_string(dw) + " g" + std::to_string(g);
}

ctn_attrs PoolP::attrs(bool avg, std::initializer_list<int64_t> extra) const {
  ctn_attrs a = conf::attrs({kh, kw, sh, sw, ph, pw});
  if (avg) a.i[a.ni++] = include_pad;
  for (int64_t v : extra) a.i[a.ni++] = v;
  return a;
}

std::string PoolP::label() const {
  return "k" + std::to_string(kh) + "," + std::to_string(kw) + " s" + std::to_string(sh) + "," + std::to_string(sw) +
         " p" + std::to_string(ph) + "," + std::to_string(pw) + (include_pad ? " incl" : "");
}

namespace {

// Flat index of (a, b, c, d) in a 4-d shape.
inline size_t at4(const Shape &s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return static_cast<size_t>(((a * s[1] + b) * s[2] + c) * s[3] + d);
}

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

}  // namespace

namespace {

// Every in-bounds tap of a conv2d with input shape xs, weight shape ws and output shape ys:
// output (b, oc, oh, ow) reads input (b, (oc / og) * cg + c, ih, iw) through weight (oc, c, i, j).
// f(output index, input index, weight index), in output order, then c, i, j.
template <class F>
void conv2d_taps(const Shape &xs, const Shape &ws, const Shape &ys, const ConvP &p, F f) {
  const int64_t cg = ws[1], kh = ws[2], kw = ws[3], og = ws[0] / p.g;
  for (int64_t b = 0; b < ys[0]; ++b)
    for (int64_t oc = 0; oc < ys[1]; ++oc)
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t ih = oh * p.sh - p.ph + i * p.dh, iw = ow * p.sw - p.pw + j * p.dw;
                if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
                f(at4(ys, b, oc, oh, ow), at4(xs, b, (oc / og) * cg + c, ih, iw), at4(ws, oc, c, i, j));
              }
}

}  // namespace

Arr ref_conv2d(const Arr &x, const Arr &w, const ConvP &p) {
  const Shape &xs = x.shape, &ws = w.shape;
  const int64_t ho = conv_out(xs[2], ws[2], p.sh, p.ph, p.dh), wo = conv_out(xs[3], ws[3], p.sw, p.pw, p.dw);
  Arr y = make_arr({xs[0], ws[0], ho, wo});
  conv2d_taps(xs, ws, y.shape, p, [&](size_t yi, size_t xi, size_t wi) { y.v[yi] += x.v[xi] * w.v[wi]; });
  return y;
}

// The adjoints scatter along the same taps.
Arr ref_conv2d_grad_input(const Arr &dy, const Arr &w, const ConvP &p, int64_t h, int64_t wd) {
  Arr dx = make_arr({dy.shape[0], w.shape[1] * p.g, h, wd});
  conv2d_taps(dx.shape, w.shape, dy.shape, p, [&](size_t yi, size_t xi, size_t wi) { dx.v[xi] += dy.v[yi] * w.v[wi]; });
  return dx;
}

Arr ref_conv2d_grad_weight(const Arr &x, const Arr &dy, const ConvP &p, int64_t kh, int64_t kw) {
  Arr dw = make_arr({dy.shape[1], x.shape[1] / p.g, kh, kw});
  conv2d_taps(x.shape, dw.shape, dy.shape, p, [&](size_t yi, size_t xi, size_t wi) { dw.v[wi] += dy.v[yi] * x.v[xi]; });
  return dw;
}

// Each input pixel spreads x * w over the output (the textbook definition of the transpose).
Arr ref_conv_transpose2d(const Arr &x, const Arr &w, const ConvP &p, int64_t oph, int64_t opw) {
  const Shape &xs = x.shape, &ws = w.shape;
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], og = ws[1], kh = ws[2], kw = ws[3];
  const int64_t cg = c / p.g;
  const int64_t ho = (h - 1) * p.sh - 2 * p.ph + p.dh * (kh - 1) + oph + 1;
  const int64_t wo = (wd - 1) * p.sw - 2 * p.pw + p.dw * (kw - 1) + opw + 1;
  Arr y = make_arr({n, og * p.g, ho, wo});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < wd; ++iw) {
          const double v = x.v[at4(xs, b, ic, ih, iw)];
          for (int64_t oc = 0; oc < og; ++oc)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t oh = ih * p.sh - p.ph + i * p.dh, ow = iw * p.sw - p.pw + j * p.dw;
                if (oh < 0 || oh >= ho || ow < 0 || ow >= wo) continue;
                y.v[at4(y.shape, b, (ic / cg) * og + oc, oh, ow)] += v * w.v[at4(ws, ic, oc, i, j)];
              }
        }
  return y;
}

namespace {
Shape pooled(const Shape &x, const PoolP &p) {
  return {x[0], x[1], (x[2] + 2 * p.ph - p.kh) / p.sh + 1, (x[3] + 2 * p.pw - p.kw) / p.sw + 1};
}

// Every window of a pool with input shape xs and output shape ys: f(output index, the input
// indices of the window's in-bounds taps in window order, the divisor of an average over it).
template <class F>
void pool_windows(const Shape &xs, const Shape &ys, const PoolP &p, F f) {
  std::vector<size_t> taps;
  for (int64_t b = 0; b < ys[0]; ++b)
    for (int64_t c = 0; c < ys[1]; ++c)
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          taps.clear();
          for (int64_t i = 0; i < p.kh; ++i)
            for (int64_t j = 0; j < p.kw; ++j) {
              int64_t ih = oh * p.sh - p.ph + i, iw = ow * p.sw - p.pw + j;
              if (ih >= 0 && ih < xs[2] && iw >= 0 && iw < xs[3]) taps.push_back(at4(xs, b, c, ih, iw));
            }
          const double count = p.include_pad ? static_cast<double>(p.kh * p.kw) : static_cast<double>(taps.size());
          f(at4(ys, b, c, oh, ow), taps, count);
        }
}
}  // namespace

Arr ref_max_pool2d(const Arr &x, const PoolP &p) {
  Arr y = make_arr(pooled(x.shape, p));
  pool_windows(x.shape, y.shape, p, [&](size_t yi, const std::vector<size_t> &taps, double) {
    double m = -std::numeric_limits<double>::infinity();
    for (size_t k : taps) m = std::max(m, x.v[k]);
    y.v[yi] = m;
  });
  return y;
}

Arr ref_max_pool2d_grad(const Arr &x, const Arr &dy, const PoolP &p) {
  Arr dx = make_arr(x.shape);
  pool_windows(x.shape, dy.shape, p, [&](size_t yi, const std::vector<size_t> &taps, double) {
    double m = -std::numeric_limits<double>::infinity();
    size_t arg = 0;
    bool found = false;
    for (size_t k : taps)
      if (!found || x.v[k] > m) m = x.v[k], arg = k, found = true;  // strict: the first max wins
    dx.v[arg] += dy.v[yi];
  });
  return dx;
}

Arr ref_avg_pool2d(const Arr &x, const PoolP &p) {
  Arr y = make_arr(pooled(x.shape, p));
  pool_windows(x.shape, y.shape, p, [&](size_t yi, const std::vector<size_t> &taps, double count) {
    double s = 0;
    for (size_t k : taps) s += x.v[k];
    y.v[yi] = s / count;
  });
  return y;
}

Arr ref_avg_pool2d_grad(const Arr &dy, const PoolP &p, int64_t h, int64_t w) {
  Arr dx = make_arr({dy.shape[0], dy.shape[1], h, w});
  pool_windows(dx.shape, dy.shape, p, [&](size_t yi, const std::vector<size_t> &taps, double count) {
    const double g = dy.v[yi] / count;
    for (size_t k : taps) dx.v[k] += g;
  });
  return dx;
}

// ---- normalisation: x viewed as [outer, C, inner] (batch norm) or [rows, len] (layer norm) ----

namespace {
struct Bn {
  int64_t outer, ch, inner;
  explicit Bn(const Shape &s) : outer(s[0]), ch(s[1]), inner(1) {
    for (size_t k = 2; k < s.size(); ++k) inner *= s[k];
  }
  size_t at(int64_t n, int64_t c, int64_t i) const { return static_cast<size_t>((n * ch + c) * inner + i); }
  double count() const { return static_cast<double>(outer * inner); }
  void stats(const Arr &x, int64_t c, double *mean, double *var) const {
    double s = 0, v = 0;
    for (int64_t n = 0; n < outer; ++n)
      for (int64_t i = 0; i < inner; ++i) s += x.v[at(n, c, i)];
    *mean = s / count();
    for (int64_t n = 0; n < outer; ++n)
      for (int64_t i = 0; i < inner; ++i) v += (x.v[at(n, c, i)] - *mean) * (x.v[at(n, c, i)] - *mean);
    *var = v / count();
  }
};
}  // namespace

Arr ref_batch_norm(const Arr &x, const Arr &gamma, const Arr &beta, double eps, const Arr *mean, const Arr *var) {
  Bn b(x.shape);
  Arr y = make_arr(x.shape);
  for (int64_t c = 0; c < b.ch; ++c) {
    double m, v;
    if (mean) m = mean->v[c], v = var->v[c];
    else b.stats(x, c, &m, &v);
    for (int64_t n = 0; n < b.outer; ++n)
      for (int64_t i = 0; i < b.inner; ++i)
        y.v[b.at(n, c, i)] = (x.v[b.at(n, c, i)] - m) / std::sqrt(v + eps) * gamma.v[c] + beta.v[c];
  }
  return y;
}

// [2, C]: the mean (row 0) and biased variance (row 1) of each channel.
Arr ref_batch_norm_stats(const Arr &x) {
  Bn b(x.shape);
  Arr r = make_arr({2, b.ch});
  for (int64_t c = 0; c < b.ch; ++c) b.stats(x, c, &r.v[c], &r.v[b.ch + c]);
  return r;
}

// dx = gamma / sqrt(var + eps) * (dy - mean(dy) - xhat * mean(dy * xhat))
Arr ref_batch_norm_grad_input(const Arr &x, const Arr &gamma, const Arr &dy, double eps) {
  Bn b(x.shape);
  Arr dx = make_arr(x.shape);
  for (int64_t c = 0; c < b.ch; ++c) {
    double m, v;
    b.stats(x, c, &m, &v);
    double r = 1 / std::sqrt(v + eps), sdy = 0, sdyx = 0;
    for (int64_t n = 0; n < b.outer; ++n)
      for (int64_t i = 0; i < b.inner; ++i) {
        sdy += dy.v[b.at(n, c, i)];
        sdyx += dy.v[b.at(n, c, i)] * (x.v[b.at(n, c, i)] - m) * r;
      }
    for (int64_t n = 0; n < b.outer; ++n)
      for (int64_t i = 0; i < b.inner; ++i) {
        double xh = (x.v[b.at(n, c, i)] - m) * r;
        dx.v[b.at(n, c, i)] = gamma.v[c] * r * (dy.v[b.at(n, c, i)] - sdy / b.count() - xh * sdyx / b.count());
      }
  }
  return dx;
}

Arr ref_batch_norm_grad_gamma(const Arr &x, const Arr &dy, double eps) {
  Bn b(x.shape);
  Arr dg = make_arr({b.ch});
  for (int64_t c = 0; c < b.ch; ++c) {
    double m, v;
    b.stats(x, c, &m, &v);
    for (int64_t n = 0; n < b.outer; ++n)
      for (int64_t i = 0; i < b.inner; ++i)
        dg.v[c] += dy.v[b.at(n, c, i)] * (x.v[b.at(n, c, i)] - m) / std::sqrt(v + eps);
  }
  return dg;
}

namespace {
void ln_split(const Shape &s, int axis, int64_t *rows, int64_t *len) {
  if (axis < 0) axis += static_cast<int>(s.size());
  *rows = 1, *len = 1;
  for (size_t k = 0; k < s.size(); ++k) (static_cast<int>(k) < axis ? *rows : *len) *= s[k];
}
void ln_stats(const Arr &x, int64_t r, int64_t len, double eps, double *mean, double *rstd) {
  double s = 0, v = 0;
  for (int64_t j = 0; j < len; ++j) s += x.v[r * len + j];
  *mean = s / len;
  for (int64_t j = 0; j < len; ++j) v += (x.v[r * len + j] - *mean) * (x.v[r * len + j] - *mean);
  *rstd = 1 / std::sqrt(v / len + eps);
}
}  // namespace

Arr ref_layer_norm(const Arr &x, const Arr &gamma, const Arr &beta, int axis, double eps) {
  int64_t rows, len;
  ln_split(x.shape, axis, &rows, &len);
  Arr y = make_arr(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    double m, rs;
    ln_stats(x, r, len, eps, &m, &rs);
    for (int64_t j = 0; j < len; ++j) y.v[r * len + j] = (x.v[r * len + j] - m) * rs * gamma.v[j] + beta.v[j];
  }
  return y;
}

Arr ref_layer_norm_grad_input(const Arr &x, const Arr &gamma, const Arr &dy, int axis, double eps) {
  int64_t rows, len;
  ln_split(x.shape, axis, &rows, &len);
  Arr dx = make_arr(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    double m, rs, sg = 0, sgx = 0;
    ln_stats(x, r, len, eps, &m, &rs);
    for (int64_t j = 0; j < len; ++j) {
      double g = dy.v[r * len + j] * gamma.v[j];
      sg += g;
      sgx += g * (x.v[r * len + j] - m) * rs;
    }
    for (int64_t j = 0; j < len; ++j) {
      double xh = (x.v[r * len + j] - m) * rs;
      dx.v[r * len + j] = rs * (dy.v[r * len + j] * gamma.v[j] - sg / len - xh * sgx / len);
    }
  }
  return dx;
}

Arr ref_layer_norm_grad_gamma(const Arr &x, const Arr &dy, int axis, double eps) {
  int64_t rows, len;
  ln_split(x.shape, axis, &rows, &len);
  int a = axis < 0 ? axis + static_cast<int>(x.shape.size()) : axis;
  Arr dg = make_arr(Shape(x.shape.begin() + a, x.shape.end()));
  for (int64_t r = 0; r < rows; ++r) {
    double m, rs;
    ln_stats(x, r, len, eps, &m, &rs);
    for (int64_t j = 0; j < len; ++j) dg.v[j] += dy.v[r * len + j] * (x.v[r * len + j] - m) * rs;
  }
  return dg;
}

namespace {
uint64_t splitmix_finaliser(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z;
}
}  // namespace

bool ref_dropout_keep(uint64_t seed, uint64_t step, uint64_t k, double p) {
  const uint64_t golden = 0x9E3779B97F4A7C15ull;
  uint64_t key = splitmix_finaliser(seed + splitmix_finaliser(step + golden));
  uint64_t draw = splitmix_finaliser(key + (k + 1) * golden) >> 40;
  return draw >= static_cast<uint64_t>(std::floor(p * 16777216.0));
}

Arr ref_dropout(const Arr &x, int64_t step, double p, int64_t seed, ctn_dtype dt) {
  Arr y = make_arr(x.shape);
  double scale = round_to(1.0 / (1.0 - p), dt);
  for (size_t k = 0; k < x.v.size(); ++k)
    y.v[k] = ref_dropout_keep(static_cast<uint64_t>(seed), static_cast<uint64_t>(step), k, p) ? x.v[k] * scale : 0.0;
  return y;
}

Arr ref_embedding(const Arr &table, const Arr &ids) {
  const int64_t d = table.shape[1];
  Shape s = ids.shape;
  s.push_back(d);
  Arr y = make_arr(s);
  for (size_t i = 0; i < ids.v.size(); ++i)
    for (int64_t j = 0; j < d; ++j) y.v[i * d + j] = table.v[static_cast<size_t>(ids.v[i]) * d + j];
  return y;
}

Arr ref_embedding_grad(const Arr &ids, const Arr &dy, int64_t v) {
  const int64_t d = dy.shape.back();
  Arr g = make_arr({v, d});
  for (size_t i = 0; i < ids.v.size(); ++i)
    for (int64_t j = 0; j < d; ++j) g.v[static_cast<size_t>(ids.v[i]) * d + j] += dy.v[i * d + j];
  return g;
}

}  // namespace conf
