// Reductions (sum, mean, max), the softmax family and cross-entropy. Sums accumulate in double,
// so f32 results are accurate to f32 rounding even over long rows.
#include <atomic>
#include <cmath>
#include <limits>

#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

enum RedOp { kSum, kMean, kMax };

struct RedState : KernelBase {
  RedOp op = kSum;
  double scale = 1;      // 1 / count for mean
  int64_t in_numel = 0, out_numel = 0;
  // Coalesced input dims, alternating kept/reduced; `ostr` is the output stride of each
  // (0 on reduced dims).
  int nd = 0;
  int64_t shape[CTN_MAX_DIMS] = {};
  int64_t istr[CTN_MAX_DIMS] = {};
  int64_t ostr[CTN_MAX_DIMS] = {};
  bool red[CTN_MAX_DIMS] = {};
  // [reduced, kept, reduced] with inner runs long enough for vector lanes: the "planes" case
  // (one double of workspace per (outer, kept) pair, at most 1/2 of the input's bytes for f32).
  bool planes = false;
};

template <class T>
double row_reduce(const T *x, int64_t len, RedOp op) {
  if (op == kMax) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < len; ++i) {
      double v = x[i];
      if (v > m || v != v) m = v;
      if (m != m) break;
    }
    return m;
  }
  // Four chains: independent adds pipeline, and the split also limits error growth.
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= len; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  for (; i < len; ++i) s0 += x[i];
  return (s0 + s1) + (s2 + s3);
}

// Sum of a contiguous run in double with 16 independent lanes: the f32 -> f64 conversions and
// adds vectorise, and no serial dependency chain limits the pass. Lane order is fixed, so the
// result does not depend on the thread count.
template <class T>
inline double lane_sum_d(const T *x, int64_t len) {
  double a[16] = {};
  int64_t i = 0;
  for (; i + 16 <= len; i += 16)
    for (int j = 0; j < 16; ++j) a[j] += static_cast<double>(x[i + j]);
  double s = 0;
  for (; i < len; ++i) s += static_cast<double>(x[i]);
  for (int j = 0; j < 8; ++j) a[j] += a[j + 8];
  for (int j = 0; j < 4; ++j) a[j] += a[j + 4];
  return s + ((a[0] + a[1]) + (a[2] + a[3]));
}

template <class T>
struct RedCall {
  const RedState *st;
  const T *x;
  T *y;
  double *acc;

  // Case "rows": dims are [kept, reduced] or [reduced]: one output per contiguous row.
  void rows(int64_t r0, int64_t r1) const {
    int64_t len = st->shape[st->nd - 1];
    for (int64_t r = r0; r < r1; ++r)
      y[r] = static_cast<T>(row_reduce(x + r * len, len, st->op) * st->scale);
  }
  // General: walk the input in order, folding each element into acc[output index]. Handles
  // columns [reduced, kept] with contiguous inner loops; `c0..c1` limits the kept innermost dim
  // so that threads split it without sharing outputs.
  void general(int64_t c0, int64_t c1) const {
    const int nd = st->nd;
    const bool max = st->op == kMax;
    const bool inner_red = st->red[nd - 1];
    const int64_t inner = st->shape[nd - 1];
    const int64_t outer = st->in_numel / (inner ? inner : 1);
    for (int64_t o = 0; o < outer; ++o) {
      int64_t rem = o, ioff = 0, ooff = 0;
      for (int k = nd - 2; k >= 0; --k) {
        int64_t i = rem % st->shape[k];
        rem /= st->shape[k];
        ioff += i * st->istr[k];
        ooff += i * st->ostr[k];
      }
      const T *row = x + ioff;
      if (inner_red) {
        double v = row_reduce(row, inner, st->op);
        double &a = acc[ooff];
        a = max ? ((v > a || v != v || a != a) ? v : a) : a + v;
      } else {
        double *arow = acc + ooff;
        if (max) {
          for (int64_t j = c0; j < c1; ++j) {
            double v = row[j];
            if (v > arow[j] || v != v) arow[j] = v;
          }
        } else {
          for (int64_t j = c0; j < c1; ++j) arow[j] += row[j];
        }
      }
    }
  }
  // Case "planes": dims are [reduced, kept, reduced] (sum or mean of NCHW over axes 0, 2, 3: the
  // per-channel statistics). Threads split the outer index (images), so that each walks its
  // part of memory in order, and reduce every contiguous inner run (one (n, c) plane) with vector
  // lanes into acc[o * kept + k]; `planes_finish` then folds acc over o in a fixed order, so the
  // result does not depend on the thread count.
  void planes(int64_t o0, int64_t o1) const {
    const int64_t mid = st->shape[1], inner = st->shape[2];
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t k = 0; k < mid; ++k) {
        const T *row = x + (o * mid + k) * inner;
        acc[o * mid + k] = st->op == kMax ? row_reduce(row, inner, kMax) : lane_sum_d(row, inner);
      }
  }
  void planes_finish() const {
    const int64_t outer = st->shape[0], mid = st->shape[1];
    for (int64_t k = 0; k < mid; ++k) {
      double a = st->op == kMax ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t o = 0; o < outer; ++o) {
        const double v = acc[o * mid + k];
        a = st->op == kMax ? ((v > a || v != v || a != a) ? v : a) : a + v;
      }
      y[k] = static_cast<T>(a * st->scale);
    }
  }
  static void planes_part(void *ctx, int64_t a, int64_t b, int) {
    static_cast<const RedCall *>(ctx)->planes(a, b);
  }
  static void rows_part(void *ctx, int64_t a, int64_t b, int) {
    static_cast<const RedCall *>(ctx)->rows(a, b);
  }
  static void general_part(void *ctx, int64_t a, int64_t b, int) {
    static_cast<const RedCall *>(ctx)->general(a, b);
  }
};

template <class T>
ctn_status reduce_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const RedState *>(state);
  RedCall<T> call{st, desc_ptr<const T>(args->inputs[0]), desc_ptr<T>(args->outputs[0]),
                  static_cast<double *>(args->workspace)};
  ThreadPool &pool = *st->be->pool;
  bool par = st->in_numel >= kParallelThreshold && pool.size() > 1;
  const int nd = st->nd;
  if (st->in_numel == 0 || nd == 0 || (nd <= 2 && st->red[nd - 1] && (nd == 1 || !st->red[0]))) {
    if (st->in_numel == 0 || nd == 0) {
      // Empty reduction: sum 0, mean NaN, max -inf; or no reduced extent at all (copy).
      for (int64_t i = 0; i < st->out_numel; ++i) {
        double v = st->op == kSum ? 0.0
                   : st->op == kMean ? std::numeric_limits<double>::quiet_NaN()
                                     : -std::numeric_limits<double>::infinity();
        if (st->in_numel == st->out_numel && st->in_numel) v = call.x[i];
        call.y[i] = static_cast<T>(v);
      }
      return CTN_OK;
    }
    int64_t nrows = st->out_numel;
    if (par) pool.parallel_for(nrows, 1, RedCall<T>::rows_part, &call);
    else call.rows(0, nrows);
    return CTN_OK;
  }
  if (st->planes) {
    const int64_t outer = st->shape[0];
    if (par) pool.parallel_for(outer, 1, RedCall<T>::planes_part, &call);
    else call.planes(0, outer);
    call.planes_finish();
    return CTN_OK;
  }
  double init = st->op == kMax ? -std::numeric_limits<double>::infinity() : 0.0;
  for (int64_t i = 0; i < st->out_numel; ++i) call.acc[i] = init;
  int64_t inner = st->shape[nd - 1];
  // Threads split the kept innermost dim when there is one; other layouts stay serial.
  if (par && !st->red[nd - 1] && inner >= 64) pool.parallel_for(inner, 16, RedCall<T>::general_part, &call);
  else call.general(0, inner);
  for (int64_t i = 0; i < st->out_numel; ++i) call.y[i] = static_cast<T>(call.acc[i] * st->scale);
  return CTN_OK;
}

// ---- softmax family -------------------------------------------------------------------------
enum SmOp { kSoftmax, kLogSoftmax, kSoftmaxGrad, kLogSoftmaxGrad };

struct SmState : KernelBase {
  SmOp op = kSoftmax;
  int64_t outer = 0, len = 0, inner = 0;
};

template <class T>
struct SmCall {
  const SmState *st;
  const T *x;
  const T *dy;
  T *y;

  void row(int64_t r) const {
    const int64_t s = st->inner, len = st->len;
    const int64_t base = (r / s) * len * s + r % s;
    const T *xr = x + base;
    T *yr = y + base;
    switch (st->op) {
      case kSoftmax:
      case kLogSoftmax: {
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < len; ++j) m = xr[j * s] > m ? xr[j * s] : m;
        if (m == -std::numeric_limits<T>::infinity()) m = 0;  // all -inf: avoid inf - inf
        double sum = 0;
        if (st->op == kSoftmax) {
          for (int64_t j = 0; j < len; ++j) {
            T e = std::exp(xr[j * s] - m);
            yr[j * s] = e;
            sum += e;
          }
          T inv = static_cast<T>(1.0 / sum);
          for (int64_t j = 0; j < len; ++j) yr[j * s] *= inv;
        } else {
          for (int64_t j = 0; j < len; ++j) sum += std::exp(xr[j * s] - m);
          T lse = m + static_cast<T>(std::log(sum));
          for (int64_t j = 0; j < len; ++j) yr[j * s] = xr[j * s] - lse;
        }
        break;
      }
      case kSoftmaxGrad: {
        const T *dr = dy + base;
        double dot = 0;
        for (int64_t j = 0; j < len; ++j) dot += static_cast<double>(dr[j * s]) * xr[j * s];
        T d = static_cast<T>(dot);
        for (int64_t j = 0; j < len; ++j) yr[j * s] = xr[j * s] * (dr[j * s] - d);
        break;
      }
      case kLogSoftmaxGrad: {
        const T *dr = dy + base;
        double sum = 0;
        for (int64_t j = 0; j < len; ++j) sum += dr[j * s];
        T sm = static_cast<T>(sum);
        for (int64_t j = 0; j < len; ++j) yr[j * s] = dr[j * s] - std::exp(xr[j * s]) * sm;
        break;
      }
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) {
    for (int64_t r = a; r < b; ++r) static_cast<const SmCall *>(ctx)->row(r);
  }
};

template <class T>
ctn_status softmax_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const SmState *>(state);
  SmCall<T> call{st, desc_ptr<const T>(args->inputs[0]),
                 args->n_inputs > 1 ? desc_ptr<const T>(args->inputs[1]) : nullptr,
                 desc_ptr<T>(args->outputs[0])};
  int64_t rows = st->outer * st->inner;
  ThreadPool &pool = *st->be->pool;
  if (rows * st->len >= kParallelThresholdHeavy && pool.size() > 1 && rows > 1) {
    int64_t grain = kParallelThresholdHeavy / (st->len ? st->len : 1);
    pool.parallel_for(rows, grain < 1 ? 1 : grain, SmCall<T>::part, &call);
  } else {
    SmCall<T>::part(&call, 0, rows, 0);
  }
  return CTN_OK;
}

// ---- cross-entropy --------------------------------------------------------------------------
constexpr int kMaxParts = 64;

struct CeState : KernelBase {
  bool grad = false;
  int64_t n = 0, c = 0;
};

template <class T, class L>
struct CeCall {
  const CeState *st;
  const T *x;
  const L *labels;
  T *y;
  T dy_scale;  // grad: dy / N
  double partial[kMaxParts];
  std::atomic<int64_t> bad_row{-1};

  void run(int64_t r0, int64_t r1, int part) {
    const int64_t C = st->c;
    double total = 0;
    for (int64_t r = r0; r < r1; ++r) {
      int64_t lab = static_cast<int64_t>(labels[r]);
      if (lab < 0 || lab >= C) {
        int64_t expected = -1;
        bad_row.compare_exchange_strong(expected, r);
        return;
      }
      const T *xr = x + r * C;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < C; ++j) m = xr[j] > m ? xr[j] : m;
      double sum = 0;
      for (int64_t j = 0; j < C; ++j) sum += std::exp(static_cast<double>(xr[j] - m));
      if (!st->grad) {
        total += static_cast<double>(m) + std::log(sum) - static_cast<double>(xr[lab]);
      } else {
        T *yr = y + r * C;
        double inv = 1.0 / sum;
        for (int64_t j = 0; j < C; ++j)
          yr[j] = static_cast<T>(std::exp(static_cast<double>(xr[j] - m)) * inv) * dy_scale;
        yr[lab] -= dy_scale;
      }
    }
    partial[part] = total;
  }
  static void part_fn(void *ctx, int64_t a, int64_t b, int part) {
    static_cast<CeCall *>(ctx)->run(a, b, part);
  }
};

template <class T, class L>
ctn_status ce_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const CeState *>(state);
  CeCall<T, L> call{st, desc_ptr<const T>(args->inputs[0]), desc_ptr<const L>(args->inputs[1]),
                    desc_ptr<T>(args->outputs[0]), T(0), {}};
  if (st->grad) call.dy_scale = st->n ? desc_ptr<const T>(args->inputs[2])[0] / T(st->n) : T(0);
  ThreadPool &pool = *st->be->pool;
  int64_t grain = (st->n + kMaxParts - 1) / kMaxParts;
  if (st->n * st->c >= kParallelThresholdHeavy && pool.size() > 1) {
    int64_t g = kParallelThresholdHeavy / (st->c ? st->c : 1);
    pool.parallel_for(st->n, g > grain ? g : (grain < 1 ? 1 : grain), CeCall<T, L>::part_fn,
                      &call);
  } else {
    call.run(0, st->n, 0);
  }
  if (int64_t r = call.bad_row.load(); r >= 0)
    return st->host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "cpu %s: label %lld of row %lld is outside [0, %lld)",
                               st->grad ? CTN_OP_CROSS_ENTROPY_GRAD : CTN_OP_CROSS_ENTROPY,
                               static_cast<long long>(call.labels[r]), static_cast<long long>(r),
                               static_cast<long long>(st->c));
  if (!st->grad) {
    double total = 0;
    for (int i = 0; i < kMaxParts && i < pool.size(); ++i) total += call.partial[i];
    call.y[0] = static_cast<T>(st->n ? total / static_cast<double>(st->n)
                                     : std::numeric_limits<double>::quiet_NaN());
  }
  return CTN_OK;
}

ctn_status make_reduce(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, RedOp op) {
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  if (ctn_status s = need_float(host, "cpu", sig->op, x.dtype); s) return s;
  const uint64_t mask = static_cast<uint64_t>(sig->attrs->i[0]);
  const int64_t count = reduce_count(sig);
  auto st = new_state<RedState>(be);
  st->op = op;
  st->scale = op == kMean ? 1.0 / static_cast<double>(count) : 1.0;
  if (op == kMean && count == 0) st->scale = std::numeric_limits<double>::quiet_NaN();
  st->in_numel = desc_numel(x);
  st->out_numel = desc_numel(y);
  // Output strides of the kept dims, then coalescing of same-kind neighbours.
  int64_t ostr_full[CTN_MAX_DIMS], s = 1;
  for (int k = static_cast<int>(x.ndim) - 1; k >= 0; --k) {
    bool r = (mask >> k) & 1;
    ostr_full[k] = r ? 0 : s;
    if (!r) s *= x.shape[k];
  }
  int64_t istr_full[CTN_MAX_DIMS];
  s = 1;
  for (int k = static_cast<int>(x.ndim) - 1; k >= 0; --k) {
    istr_full[k] = s;
    s *= x.shape[k];
  }
  int nd = 0;
  for (uint32_t k = 0; k < x.ndim; ++k) {
    if (x.shape[k] == 1) continue;
    bool r = (mask >> k) & 1;
    if (nd > 0 && st->red[nd - 1] == r) {
      st->shape[nd - 1] *= x.shape[k];
      st->istr[nd - 1] = istr_full[k];
      st->ostr[nd - 1] = ostr_full[k];
    } else {
      st->shape[nd] = x.shape[k];
      st->istr[nd] = istr_full[k];
      st->ostr[nd] = ostr_full[k];
      st->red[nd] = r;
      ++nd;
    }
  }
  st->nd = nd;
  uint64_t ws = static_cast<uint64_t>(st->out_numel) * sizeof(double);
  st->planes = nd == 3 && st->red[0] && !st->red[1] && st->red[2] && st->shape[2] >= 16;
  if (st->planes) ws = static_cast<uint64_t>(st->shape[0] * st->shape[1]) * sizeof(double);
  kernel_set(out, x.dtype == CTN_F32 ? reduce_kernel<float> : reduce_kernel<double>,
             st.release(), 0, ws);
  return CTN_OK;
}

ctn_status make_softmax(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, SmOp op) {
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &x = sig->inputs[0];
  if (ctn_status s = need_float(host, "cpu", sig->op, x.dtype); s) return s;
  auto st = new_state<SmState>(be);
  st->op = op;
  const AxisDims d = axis_dims(x, sig->attrs->i[0]);
  st->outer = d.outer;
  st->len = d.len;
  st->inner = d.inner;
  kernel_set(out, x.dtype == CTN_F32 ? softmax_kernel<float> : softmax_kernel<double>,
             st.release(), CTN_KERNEL_INPLACE_OK);
  return CTN_OK;
}

ctn_status make_ce(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool grad) {
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &x = sig->inputs[0], &lab = sig->inputs[1];
  if (ctn_status s = need_float(host, "cpu", sig->op, x.dtype); s) return s;
  auto st = new_state<CeState>(be);
  st->grad = grad;
  st->n = x.shape[0];
  st->c = x.shape[1];
  ctn_kernel_fn fn;
  if (x.dtype == CTN_F32)
    fn = lab.dtype == CTN_I32 ? ce_kernel<float, int32_t> : ce_kernel<float, int64_t>;
  else
    fn = lab.dtype == CTN_I32 ? ce_kernel<double, int32_t> : ce_kernel<double, int64_t>;
  kernel_set(out, fn, st.release());
  return CTN_OK;
}

}  // namespace

ctn_status make_reduce_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                              bool *handled) {
  return dispatch_reduce(
      sig->op, handled, [&](int c) { return make_reduce(be, sig, out, static_cast<RedOp>(c)); },
      [&](int c) { return make_softmax(be, sig, out, static_cast<SmOp>(c)); },
      [&](bool grad) { return make_ce(be, sig, out, grad); });
}

}  // namespace ctn_cpu
