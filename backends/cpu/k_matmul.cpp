// matmul and matmul_bias_act: batched, broadcast batch dims, transposes. GEMM through OpenBLAS
// (called from the host thread while our pool is idle) or the own GEMM in gemm.cpp.
#include <algorithm>
#include <cmath>

#include "cpu_backend.h"

#ifdef CTN_CPU_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace ctn_cpu {
namespace {

struct MatmulState : KernelBase {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t rsa = 0, csa = 0, rsb = 0, csb = 0;  // element strides of A(i,p), B(p,j)
  // Batch dims of the output and A's, B's strides over them, in matrices (0: broadcast). The
  // offsets of batch i are computed when it runs, not tabled: a table per batch is O(batches)
  // memory at compile time (8 TB for a [1, 2^39, 2, 2] input, found by fuzz_graph).
  uint32_t bnd = 0;
  int64_t bshape[CTN_MAX_DIMS] = {}, bsa[CTN_MAX_DIMS] = {}, bsb[CTN_MAX_DIMS] = {};
  int64_t batches = 0;
  void offsets(int64_t i, int64_t *oa, int64_t *ob) const {
    int64_t ra = 0, rb = 0;
    for (int d = static_cast<int>(bnd) - 1; d >= 0 && i; --d) {
      const int64_t idx = i % bshape[d];
      i /= bshape[d];
      ra += idx * bsa[d];
      rb += idx * bsb[d];
    }
    *oa = ra * m * k;
    *ob = rb * k * n;
  }
  int64_t c_step = 0;                           // elements between output matrices
  int act = -1;                                 // -1: plain matmul; else CTN_ACT_*
};

template <class T>
struct EpilogueCall {
  const MatmulState *st;
  T *c;
  const T *bias;
  void rows(int64_t r0, int64_t r1) const {
    const int64_t n = st->n;
    for (int64_t r = r0; r < r1; ++r) {
      T *row = c + r * n;
      switch (st->act) {
        case CTN_ACT_RELU:
          for (int64_t j = 0; j < n; ++j) {
            T v = row[j] + bias[j];
            row[j] = v > T(0) ? v : T(0);
          }
          break;
        case CTN_ACT_GELU:
          for (int64_t j = 0; j < n; ++j) {
            T v = row[j] + bias[j];
            row[j] = T(0.5) * v * (T(1) + std::erf(v * T(0.70710678118654752440)));
          }
          break;
        default:
          for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
      }
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) {
    static_cast<const EpilogueCall *>(ctx)->rows(a, b);
  }
};

#ifdef CTN_CPU_HAVE_OPENBLAS
// Rows [i0, i1) x columns [j0, j1) of C through one single-threaded OpenBLAS call.
template <class T>
struct BlasJob {
  const MatmulState *st;
  const T *a, *b;
  T *c;
  bool split_m;
  int64_t unit, units;
  void run(int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    const auto ta = st->ta ? CblasTrans : CblasNoTrans, tb = st->tb ? CblasTrans : CblasNoTrans;
    const blasint m = static_cast<blasint>(i1 - i0), n = static_cast<blasint>(j1 - j0),
                  k = static_cast<blasint>(st->k);
    const blasint lda = std::max<blasint>(1, static_cast<blasint>(st->ta ? st->m : st->k));
    const blasint ldb = std::max<blasint>(1, static_cast<blasint>(st->tb ? st->k : st->n));
    const T *ap = a + (st->ta ? i0 : i0 * st->k);
    const T *bp = b + (st->tb ? j0 * st->k : j0);
    T *cp = c + i0 * st->n + j0;
    if (m <= 0 || n <= 0) return;
    if constexpr (sizeof(T) == 4)
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, ap, lda, bp, ldb, 0.0f, cp, static_cast<blasint>(st->n));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, ap, lda, bp, ldb, 0.0, cp, static_cast<blasint>(st->n));
  }
  static void part(void *ctx, int64_t u0, int64_t u1, int) {
    const auto &j = *static_cast<const BlasJob *>(ctx);
    const int64_t extent = j.split_m ? j.st->m : j.st->n;
    const int64_t lo = u0 * j.unit, hi = std::min(extent, u1 * j.unit);
    if (j.split_m)
      j.run(lo, hi, 0, j.st->n);
    else
      j.run(0, j.st->m, lo, hi);
  }
};
#endif

template <class T>
void gemm_one(Backend &be, const MatmulState &st, const T *a, const T *b, T *c) {
  if (st.k == 0) {
    std::memset(c, 0, static_cast<size_t>(st.m * st.n) * sizeof(T));
    return;
  }
#ifdef CTN_CPU_HAVE_OPENBLAS
  if (gemm_uses_openblas(be)) {
    // OpenBLAS runs single-threaded (set_threads): its own workers spin-wait after each call
    // and would steal the cores from our pool's next kernel. The pool splits the larger output
    // dimension instead, each participant calling OpenBLAS on its block.
    BlasJob<T> job{&st, a, b, c, st.m >= st.n, 0, 0};
    const int parts = be.pool ? be.pool->size() : 1;
    if (parts > 1 && st.m * st.n * st.k >= 64 * 64 * 64) {
      const int64_t extent = job.split_m ? st.m : st.n, align = job.split_m ? 8 : 16;
      job.unit = std::max<int64_t>(align, (extent / parts + align - 1) / align * align);
      job.units = (extent + job.unit - 1) / job.unit;
      be.pool->parallel_for(job.units, 1, BlasJob<T>::part, &job);
    } else {
      job.run(0, st.m, 0, st.n);
    }
    return;
  }
#endif
  if constexpr (sizeof(T) == 4)
    own_gemm_f32(be, st.m, st.n, st.k, a, st.rsa, st.csa, b, st.rsb, st.csb, c, st.n);
  else
    own_gemm_f64(be, st.m, st.n, st.k, a, st.rsa, st.csa, b, st.rsb, st.csb, c, st.n);
}

template <class T>
ctn_status matmul_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const MatmulState *>(state);
  Backend &be = *st->be;
  if (!gemm_scratch_ready()) return st->host->set_error(CTN_ERR_OUT_OF_MEMORY, "cpu matmul: no memory for GEMM scratch");
  const T *a = desc_ptr<const T>(args->inputs[0]);
  const T *b = desc_ptr<const T>(args->inputs[1]);
  T *c = desc_ptr<T>(args->outputs[0]);
  if (st->m == 0 || st->n == 0) return CTN_OK;
  const int64_t batches = st->batches;
  for (int64_t i = 0; i < batches; ++i) {
    int64_t oa, ob;
    st->offsets(i, &oa, &ob);
    gemm_one<T>(be, *st, a + oa, b + ob, c + i * st->c_step);
  }
  if (st->act >= 0) {
    EpilogueCall<T> ep{st, c, desc_ptr<const T>(args->inputs[2])};
    int64_t rows = st->m * batches;
    if (rows * st->n >= kParallelThreshold && be.pool->size() > 1)
      be.pool->parallel_for(rows, 1, EpilogueCall<T>::part, &ep);
    else
      ep.rows(0, rows);
  }
  return CTN_OK;
}

}  // namespace

ctn_status make_matmul_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                              bool *handled) {
  const char *op = sig->op;
  bool fused = !std::strcmp(op, CTN_OP_MATMUL_BIAS_ACT);
  if (!fused && std::strcmp(op, CTN_OP_MATMUL) != 0) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  uint32_t n_in = fused ? 3 : 2;
  if (sig->n_inputs != n_in)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu %s: expects %u inputs, got %u", op,
                           n_in, sig->n_inputs);
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[1], &y = *sig->output;
  if (!is_float(a.dtype))
    return host->set_error(CTN_ERR_UNSUPPORTED, "cpu %s: dtype %s is not supported (f32, f64 only)",
                           op, dtype_name(a.dtype));
  for (uint32_t i = 1; i <= sig->n_inputs; ++i) {
    const ctn_tensor_desc &d = i < sig->n_inputs ? sig->inputs[i] : y;
    if (d.dtype != a.dtype)
      return host->set_error(CTN_ERR_DTYPE, "cpu %s: operand %u is %s, expected %s", op, i,
                             dtype_name(d.dtype), dtype_name(a.dtype));
  }
  if (a.ndim < 2 || b.ndim < 2)
    return host->set_error(CTN_ERR_SHAPE, "cpu %s: operands must be at least 2-d (%s, %s)", op,
                           shape_str(a).c_str(), shape_str(b).c_str());
  auto st = std::make_unique<MatmulState>();
  st->be = be;
  st->host = host;
  st->ta = sig->attrs->i[0] != 0;
  st->tb = sig->attrs->i[1] != 0;
  const int64_t ar = a.shape[a.ndim - 2], ac = a.shape[a.ndim - 1];
  const int64_t br = b.shape[b.ndim - 2], bc = b.shape[b.ndim - 1];
  st->m = st->ta ? ac : ar;
  st->k = st->ta ? ar : ac;
  const int64_t kb = st->tb ? bc : br;
  st->n = st->tb ? br : bc;
  if (kb != st->k)
    return host->set_error(CTN_ERR_SHAPE, "cpu %s: inner dims differ: %s%s @ %s%s", op,
                           shape_str(a).c_str(), st->ta ? "^T" : "", shape_str(b).c_str(),
                           st->tb ? "^T" : "");
  st->rsa = st->ta ? 1 : st->k;
  st->csa = st->ta ? st->m : 1;
  st->rsb = st->tb ? 1 : st->n;
  st->csb = st->tb ? st->k : 1;
  // Batch dims: broadcast a[:-2] and b[:-2] to y[:-2].
  ctn_tensor_desc ab{}, bb{}, yb{};
  ab.ndim = a.ndim - 2;
  bb.ndim = b.ndim - 2;
  yb.ndim = y.ndim >= 2 ? y.ndim - 2 : 0;
  for (uint32_t k = 0; k < ab.ndim; ++k) ab.shape[k] = a.shape[k];
  for (uint32_t k = 0; k < bb.ndim; ++k) bb.shape[k] = b.shape[k];
  for (uint32_t k = 0; k < yb.ndim; ++k) yb.shape[k] = y.shape[k];
  ctn_tensor_desc want{};
  want.ndim = std::max(ab.ndim, bb.ndim);
  for (uint32_t k = 0; k < want.ndim; ++k) {
    int64_t da = k + ab.ndim >= want.ndim ? ab.shape[k + ab.ndim - want.ndim] : 1;
    int64_t db = k + bb.ndim >= want.ndim ? bb.shape[k + bb.ndim - want.ndim] : 1;
    if (da != db && da != 1 && db != 1)
      return host->set_error(CTN_ERR_SHAPE, "cpu %s: batch dims of %s and %s do not broadcast",
                             op, shape_str(a).c_str(), shape_str(b).c_str());
    want.shape[k] = da == 1 ? db : da;
  }
  want.shape[want.ndim++] = st->m;
  want.shape[want.ndim++] = st->n;
  if (!same_shape(want, y))
    return host->set_error(CTN_ERR_SHAPE, "cpu %s: output shape %s, expected %s", op,
                           shape_str(y).c_str(), shape_str(want).c_str());
  if (fused) {
    const ctn_tensor_desc &bias = sig->inputs[2];
    if (bias.ndim != 1 || bias.shape[0] != st->n)
      return host->set_error(CTN_ERR_SHAPE, "cpu %s: bias %s must be [%lld]", op,
                             shape_str(bias).c_str(), static_cast<long long>(st->n));
    int64_t act = sig->attrs->i[2];
    if (act != CTN_ACT_NONE && act != CTN_ACT_RELU && act != CTN_ACT_GELU)
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu %s: unknown activation %lld", op,
                             static_cast<long long>(act));
    st->act = static_cast<int>(act);
  }
  int64_t sa[CTN_MAX_DIMS] = {}, sb[CTN_MAX_DIMS] = {};
  broadcast_strides(ab, yb, sa);
  broadcast_strides(bb, yb, sb);
  st->bnd = yb.ndim;
  for (uint32_t d = 0; d < yb.ndim; ++d) st->bshape[d] = yb.shape[d], st->bsa[d] = sa[d], st->bsb[d] = sb[d];
  const int64_t batches = desc_numel(yb);
  st->batches = desc_numel(y) ? batches : 0;  // an empty output: nothing to compute
  st->c_step = st->m * st->n;
  // [B, M, K] @ [K, N] with one shared B: a single GEMM of (B*M) rows is faster than B small
  // ones. That needs B broadcast over every batch dim and A's batches contiguous.
  bool fold = batches > 1 && !st->ta;
  int64_t run = 1;
  for (int d = static_cast<int>(yb.ndim) - 1; fold && d >= 0; --d) {
    if (yb.shape[d] == 1) continue;
    fold = sb[d] == 0 && sa[d] == run;
    run *= yb.shape[d];
  }
  if (fold) {
    st->m *= batches;
    st->batches = st->batches ? 1 : 0;
    st->bnd = 0;
    st->c_step = st->m * st->n;
  }
  kernel_set(out, a.dtype == CTN_F32 ? matmul_kernel<float> : matmul_kernel<double>,
             st.release());
  return CTN_OK;
}

}  // namespace ctn_cpu
