// batch_norm (training, with relu, inference), batch_norm_stats and layer_norm with their *_grad ops.
// Statistics are taken with two passes (mean, then the mean of squared deviations), each run of
// a plane summed in vector lanes of T and the runs added in double, so f32 results do not suffer
// from cancellation; batch_norm_stats takes shifted sums and squares in one sweep instead.
// Batch norm splits channels over the pool (a channel's planes, re-read by the later passes, stay
// in the core's L2 at the CNN's sizes), layer norm rows.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

enum class NormKind { kBn, kBnRelu, kBnGradInput, kBnGradGamma, kBnInference, kBnStats, kLn, kLnGradInput, kLnGradGamma };

struct NormState : KernelBase {
  NormKind kind = NormKind::kBn;
  double eps = 0;
  // Batch norm: x viewed as [outer = N, ch = C, inner = spatial]. Layer norm: [rows, len].
  int64_t outer = 0, ch = 0, inner = 0;
  int64_t rows = 0, len = 0;
};

struct Stats {
  double mean, rstd;
};

// Batch-norm passes over one contiguous run (one image's plane of one channel) in 16-byte
// vectors of T (SSE2 / NEON; GCC vector extensions, so 32-bit ARM gets plain code), with
// several independent accumulators so that no serial dependency chain limits the pass. The
// partial sums are added in double in a fixed order: the statistics add up in double across the
// batch, and the results do not depend on the thread count.
template <class T>
struct Vec;
template <>
struct Vec<float> {
  typedef float V __attribute__((vector_size(16)));
};
template <>
struct Vec<double> {
  typedef double V __attribute__((vector_size(16)));
};

template <class T>
inline typename Vec<T>::V vload(const T *p) {
  typename Vec<T>::V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T, class V>
inline double hsum(V v) {
  double s = 0;
  for (int j = 0; j < static_cast<int>(sizeof(V) / sizeof(T)); ++j) s += static_cast<double>(v[j]);
  return s;
}

// Vector partial sums cover at most this many elements before they go into the double sum, so
// that the f32 rounding error does not grow with the plane's size (1 024: ~64 adds per lane).
constexpr int64_t kChunk = 1024;

// Sum of x[i] - m (m = 0: the plain sum) or, when `square`, of (x[i] - m)^2.
template <class T, bool square>
inline double run_sum(const T *x, int64_t n, T m) {
  typedef typename Vec<T>::V V;
  constexpr int W = sizeof(V) / sizeof(T);
  double s = 0;
  int64_t i = 0;
  while (i + 4 * W <= n) {
    V a0 = {}, a1 = {}, a2 = {}, a3 = {};
    const int64_t end = std::min(n, i + kChunk);
    for (; i + 4 * W <= end; i += 4 * W) {
      V d0 = vload(x + i) - m, d1 = vload(x + i + W) - m, d2 = vload(x + i + 2 * W) - m, d3 = vload(x + i + 3 * W) - m;
      if (square) {
        d0 *= d0;
        d1 *= d1;
        d2 *= d2;
        d3 *= d3;
      }
      a0 += d0;
      a1 += d1;
      a2 += d2;
      a3 += d3;
    }
    s += (hsum<T>(a0) + hsum<T>(a1)) + (hsum<T>(a2) + hsum<T>(a3));
  }
  for (; i < n; ++i) {
    T d = x[i] - m;
    s += static_cast<double>(square ? d * d : d);
  }
  return s;
}

// One sweep over a run of x: the sums of x[i] - m and of (x[i] - m)^2, added to s1, s2 (the
// batch_norm_stats pass; m, a value of the channel, keeps the shifted sums from cancelling).
template <class T>
inline void shifted_sums(const T *x, int64_t n, T m, double *s1, double *s2) {
  typedef typename Vec<T>::V V;
  constexpr int W = sizeof(V) / sizeof(T);
  double t1 = 0, t2 = 0;
  int64_t i = 0;
  while (i + 2 * W <= n) {
    V a0 = {}, a1 = {}, q0 = {}, q1 = {};
    const int64_t end = std::min(n, i + kChunk);
    for (; i + 2 * W <= end; i += 2 * W) {
      const V d0 = vload(x + i) - m, d1 = vload(x + i + W) - m;
      a0 += d0;
      a1 += d1;
      q0 += d0 * d0;
      q1 += d1 * d1;
    }
    t1 += hsum<T>(a0) + hsum<T>(a1);
    t2 += hsum<T>(q0) + hsum<T>(q1);
  }
  for (; i < n; ++i) {
    const T d = x[i] - m;
    t1 += static_cast<double>(d);
    t2 += static_cast<double>(d * d);
  }
  *s1 += t1;
  *s2 += t2;
}

// One pass over a run of x and dy for the batch-norm gradients: the squared deviations from m
// (the variance), dy, and dy * (x - m), added to v, sdy, sdyx.
template <class T>
inline void grad_sums(const T *x, const T *dy, int64_t n, T m, double *v, double *sdy, double *sdyx) {
  typedef typename Vec<T>::V V;
  constexpr int W = sizeof(V) / sizeof(T);
  double sv = 0, sd = 0, sp = 0;
  int64_t i = 0;
  while (i + 2 * W <= n) {
    V v0 = {}, v1 = {}, g0 = {}, g1 = {}, p0 = {}, p1 = {};
    const int64_t end = std::min(n, i + kChunk);
    for (; i + 2 * W <= end; i += 2 * W) {
      const V d0 = vload(x + i) - m, d1 = vload(x + i + W) - m;
      const V e0 = vload(dy + i), e1 = vload(dy + i + W);
      v0 += d0 * d0;
      v1 += d1 * d1;
      g0 += e0;
      g1 += e1;
      p0 += e0 * d0;
      p1 += e1 * d1;
    }
    sv += hsum<T>(v0) + hsum<T>(v1);
    sd += hsum<T>(g0) + hsum<T>(g1);
    sp += hsum<T>(p0) + hsum<T>(p1);
  }
  for (; i < n; ++i) {
    const T d = x[i] - m, g = dy[i];
    sv += static_cast<double>(d * d);
    sd += static_cast<double>(g);
    sp += static_cast<double>(g * d);
  }
  *v += sv;
  *sdy += sd;
  *sdyx += sp;
}

// ---- batch norm -------------------------------------------------------------------------------

template <class T>
struct BnCall {
  const NormState *st;
  const ctn_kernel_args *args;

  const T *in(int k) const { return desc_ptr<const T>(args->inputs[k]); }

  template <class F>
  void each(int64_t c, F &&f) const {  // f(offset of a contiguous run of `inner` elements)
    for (int64_t n = 0; n < st->outer; ++n) f((n * st->ch + c) * st->inner);
  }

  // The runs of a channel are one plane per image, far apart: the first pass over them (from
  // memory) asks for the next image's run while it sums this one.
  void prefetch_next(const T *p, int64_t o) const {
    const int64_t next = o + st->ch * st->inner;
    if (next >= st->outer * st->ch * st->inner) return;
    for (int64_t i = 0; i < st->inner; i += 64 / static_cast<int64_t>(sizeof(T))) __builtin_prefetch(p + next + i);
  }

  double mean_of(const T *x, int64_t c) const {
    const int64_t inner = st->inner;
    double s = 0;
    each(c, [&](int64_t o) {
      prefetch_next(x, o);
      s += run_sum<T, false>(x + o, inner, T(0));
    });
    return s / static_cast<double>(st->outer * st->inner);
  }
  double rstd_of(double v) const { return 1.0 / std::sqrt(v / static_cast<double>(st->outer * st->inner) + st->eps); }

  Stats stats(const T *x, int64_t c) const {
    const int64_t inner = st->inner;
    const double mean = mean_of(x, c);
    const T m = static_cast<T>(mean);
    double v = 0;
    each(c, [&](int64_t o) { v += run_sum<T, true>(x + o, inner, m); });
    const double delta = static_cast<double>(m) - mean;  // as in grad_stats
    v = std::max(0.0, v - static_cast<double>(st->outer * inner) * delta * delta);
    return {mean, rstd_of(v)};
  }

  // batch_norm_stats: mean and biased variance in one sweep over the channel's runs, shifted by
  // the channel's first element (var = E[(x - k)^2] - E[x - k]^2 in double).
  void one_pass_stats(const T *x, int64_t c, T *out) const {
    const int64_t inner = st->inner;
    const T k = x[c * inner];
    double s1 = 0, s2 = 0;
    each(c, [&](int64_t o) {
      prefetch_next(x, o);
      shifted_sums(x + o, inner, k, &s1, &s2);
    });
    const double count = static_cast<double>(st->outer * inner), d = s1 / count;
    out[c] = static_cast<T>(static_cast<double>(k) + d);
    out[st->ch + c] = static_cast<T>(std::max(0.0, s2 / count - d * d));
  }

  // Batch-norm gradient statistics in two passes over x (the mean, then everything else).
  void grad_stats(const T *x, const T *dy, int64_t c, Stats *s, double *sdy, double *sdyx) const {
    const int64_t inner = st->inner;
    s->mean = mean_of(x, c);
    const T m = static_cast<T>(s->mean);
    double v = 0;
    *sdy = *sdyx = 0;
    each(c, [&](int64_t o) {
      prefetch_next(dy, o);
      grad_sums(x + o, dy + o, inner, m, &v, sdy, sdyx);
    });
    // The passes used m, the mean rounded to T: sum(dy (x - mean)) = sum(dy (x - m)) + (m - mean)
    // sum(dy), and sum((x - mean)^2) = sum((x - m)^2) - count (m - mean)^2 (exactly, in double).
    const double delta = static_cast<double>(m) - s->mean;
    *sdyx += delta * *sdy;
    v = std::max(0.0, v - static_cast<double>(st->outer * inner) * delta * delta);
    s->rstd = rstd_of(v);
  }

  void channel(int64_t c) const {
    const T *x = in(0);
    T *out = desc_ptr<T>(args->outputs[0]);
    const int64_t inner = st->inner;
    switch (st->kind) {
      case NormKind::kBn:
      case NormKind::kBnRelu:
      case NormKind::kBnInference: {
        Stats s;
        if (st->kind != NormKind::kBnInference) {
          s = stats(x, c);
        } else {
          s.mean = in(3)[c];
          s.rstd = 1.0 / std::sqrt(static_cast<double>(in(4)[c]) + st->eps);
        }
        const double gamma = in(1)[c], beta = in(2)[c];
        const T scale = static_cast<T>(gamma * s.rstd), shift = static_cast<T>(beta - s.mean * gamma * s.rstd);
        if (st->kind == NormKind::kBnRelu)
          each(c, [&](int64_t o) {
            for (int64_t i = 0; i < inner; ++i) {
              const T v = x[o + i] * scale + shift;
              out[o + i] = v > T(0) ? v : T(0);  // relu's formula (NaN -> 0)
            }
          });
        else
          each(c, [&](int64_t o) {
            for (int64_t i = 0; i < inner; ++i) out[o + i] = x[o + i] * scale + shift;
          });
        break;
      }
      case NormKind::kBnStats: one_pass_stats(x, c, out); break;
      case NormKind::kBnGradInput:
      case NormKind::kBnGradGamma: {
        // Inputs: grad-input (x, gamma, dy), grad-gamma (x, dy).
        const bool gamma_grad = st->kind == NormKind::kBnGradGamma;
        const T *dy = in(gamma_grad ? 1 : 2);
        Stats s;
        double sdy, sdyx;
        grad_stats(x, dy, c, &s, &sdy, &sdyx);
        if (gamma_grad) {  // dgamma = sum(dy * xhat)
          out[c] = static_cast<T>(sdyx * s.rstd);
          break;
        }
        // dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat))
        const double count = static_cast<double>(st->outer * inner);
        const double k = in(1)[c] * s.rstd;
        const double mdy = sdy / count, mdyx = sdyx * s.rstd * s.rstd / count;
        // dx = k*dy - k*mdy - k*mdyx*(x - mean) = a*dy + b*x + c0, in T (vectorisable).
        const T a = static_cast<T>(k), b = static_cast<T>(-k * mdyx),
                c0 = static_cast<T>(-k * mdy + k * mdyx * s.mean);
        each(c, [&](int64_t o) {
          for (int64_t i = 0; i < inner; ++i) out[o + i] = a * dy[o + i] + b * x[o + i] + c0;
        });
        break;
      }
      default: break;
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) {
    for (int64_t c = a; c < b; ++c) static_cast<const BnCall *>(ctx)->channel(c);
  }
};

// ---- layer norm --------------------------------------------------------------------------------

template <class T>
Stats row_stats(const T *x, int64_t len, double eps) {
  double s = 0;
  for (int64_t i = 0; i < len; ++i) s += x[i];
  const double mean = s / static_cast<double>(len);
  double v = 0;
  for (int64_t i = 0; i < len; ++i) {
    double d = x[i] - mean;
    v += d * d;
  }
  return {mean, 1.0 / std::sqrt(v / static_cast<double>(len) + eps)};
}

template <class T>
struct LnCall {
  const NormState *st;
  const ctn_kernel_args *args;
  Stats *stats;  // workspace, grad-gamma only

  const T *in(int k) const { return desc_ptr<const T>(args->inputs[k]); }

  void row(int64_t r) const {
    const int64_t len = st->len;
    const T *x = in(0) + r * len;
    const Stats s = row_stats(x, len, st->eps);
    switch (st->kind) {
      case NormKind::kLn: {
        const T *gamma = in(1), *beta = in(2);
        T *y = desc_ptr<T>(args->outputs[0]) + r * len;
        const T mean = static_cast<T>(s.mean), rstd = static_cast<T>(s.rstd);
        for (int64_t i = 0; i < len; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
        break;
      }
      case NormKind::kLnGradInput: {
        // g = dy * gamma; dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
        const T *gamma = in(1), *dy = in(2) + r * len;
        T *dx = desc_ptr<T>(args->outputs[0]) + r * len;
        double sg = 0, sgx = 0;
        for (int64_t i = 0; i < len; ++i) {
          double g = static_cast<double>(dy[i]) * gamma[i];
          sg += g;
          sgx += g * (x[i] - s.mean);
        }
        const double mg = sg / static_cast<double>(len), mgx = sgx * s.rstd * s.rstd / static_cast<double>(len);
        for (int64_t i = 0; i < len; ++i)
          dx[i] = static_cast<T>(s.rstd * (static_cast<double>(dy[i]) * gamma[i] - mg - (x[i] - s.mean) * mgx));
        break;
      }
      case NormKind::kLnGradGamma: stats[r] = s; break;
      default: break;
    }
  }
  // grad-gamma, second phase: columns [a, b) summed over every row.
  void columns(int64_t a, int64_t b) const {
    const int64_t len = st->len;
    const T *x = in(0), *dy = in(1);
    T *dg = desc_ptr<T>(args->outputs[0]);
    double acc[64];
    for (int64_t j0 = a; j0 < b; j0 += 64) {
      const int64_t j1 = std::min<int64_t>(j0 + 64, b);
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] = 0;
      for (int64_t r = 0; r < st->rows; ++r) {
        const T *xr = x + r * len, *dr = dy + r * len;
        const double m = stats[r].mean, rs = stats[r].rstd;
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += dr[j] * ((xr[j] - m) * rs);
      }
      for (int64_t j = j0; j < j1; ++j) dg[j] = static_cast<T>(acc[j - j0]);
    }
  }
  static void rows_part(void *ctx, int64_t a, int64_t b, int) {
    for (int64_t r = a; r < b; ++r) static_cast<const LnCall *>(ctx)->row(r);
  }
  static void cols_part(void *ctx, int64_t a, int64_t b, int) { static_cast<const LnCall *>(ctx)->columns(a, b); }
};

template <class T>
ctn_status norm_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const NormState *>(state);
  ThreadPool &pool = *st->be->pool;
  const bool par = desc_numel(args->inputs[0]) >= kParallelThreshold && pool.size() > 1;
  switch (st->kind) {
    case NormKind::kLn:
    case NormKind::kLnGradInput:
    case NormKind::kLnGradGamma: {
      LnCall<T> call{st, args, static_cast<Stats *>(args->workspace)};
      if (par)
        pool.parallel_for(st->rows, 1, LnCall<T>::rows_part, &call);
      else
        LnCall<T>::rows_part(&call, 0, st->rows, 0);
      if (st->kind == NormKind::kLnGradGamma) {
        if (par)
          pool.parallel_for(st->len, 64, LnCall<T>::cols_part, &call);
        else
          call.columns(0, st->len);
      }
      break;
    }
    default: {
      BnCall<T> call{st, args};
      if (par)
        pool.parallel_for(st->ch, 1, BnCall<T>::part, &call);
      else
        BnCall<T>::part(&call, 0, st->ch, 0);
    }
  }
  return CTN_OK;
}

}  // namespace

ctn_status make_norm_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  struct Entry {
    const char *name;
    NormKind kind;
    uint32_t n_in;
  };
  static const Entry kEntries[] = {
      {CTN_OP_BATCH_NORM, NormKind::kBn, 3},
      {CTN_OP_BATCH_NORM_GRAD_INPUT, NormKind::kBnGradInput, 3},
      {CTN_OP_BATCH_NORM_GRAD_GAMMA, NormKind::kBnGradGamma, 2},
      {CTN_OP_BATCH_NORM_INFERENCE, NormKind::kBnInference, 5},
      {CTN_OP_BATCH_NORM_STATS, NormKind::kBnStats, 1},
      {CTN_OP_BATCH_NORM_RELU, NormKind::kBnRelu, 3},
      {CTN_OP_LAYER_NORM, NormKind::kLn, 3},
      {CTN_OP_LAYER_NORM_GRAD_INPUT, NormKind::kLnGradInput, 3},
      {CTN_OP_LAYER_NORM_GRAD_GAMMA, NormKind::kLnGradGamma, 2},
  };
  const Entry *e = find_entry(kEntries, sig->op);
  if (!e) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &x = sig->inputs[0];
  if (ctn_status s = need_float(host, "cpu", sig->op, x.dtype); s) return s;
  auto st = new_state<NormState>(be);
  st->kind = e->kind;
  st->eps = sig->attrs->f[0];
  uint64_t ws = 0;
  const bool ln = e->kind == NormKind::kLn || e->kind == NormKind::kLnGradInput || e->kind == NormKind::kLnGradGamma;
  if (ln) {
    const int64_t a = sig->attrs->i[0];
    st->rows = 1;
    st->len = 1;
    for (uint32_t k = 0; k < x.ndim; ++k) (static_cast<int64_t>(k) < a ? st->rows : st->len) *= x.shape[k];
    if (e->kind == NormKind::kLnGradGamma) ws = static_cast<uint64_t>(st->rows) * sizeof(Stats);
  } else {
    st->outer = x.shape[0];
    st->ch = x.shape[1];
    st->inner = 1;
    for (uint32_t k = 2; k < x.ndim; ++k) st->inner *= x.shape[k];
  }
  kernel_set(out, x.dtype == CTN_F32 ? norm_kernel<float> : norm_kernel<double>, st.release(), 0, ws);
  return CTN_OK;
}

}  // namespace ctn_cpu
