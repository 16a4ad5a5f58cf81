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

// The own one-row product (M = 1: batch-1 classifier heads, LSTM steps) y[j0:j1] = x B, for
// when the own GEMM runs: its packing costs more than the product for a single row. Plain loops,
// compiled per ISA through the target attributes of the gemv_* callers (as k_pool.cpp): B stored
// [n, k] (rsb 1, csb k) is a dot product per column with 16 independent partial sums (a float
// reduction is not vectorised otherwise), B stored [k, n] (csb 1) rows of x[p] * B[p, :] added.
// One of rsb and csb is always 1 (MatmulState); A's row is contiguous (csa is 1 when M is 1).
// The most rows the own GEMV path takes (GemvJob::rows); more go to the GEMM.
constexpr int64_t kSmallRows = 8;

template <class T>
struct GemvJob {
  const T *x, *b;
  T *y;
  int64_t k, rsb, csb;
  // 2..kSmallRows rows (an LSTM step at batch 8): row r of x at x + r * rsa (contiguous), of y
  // at y + r * n; see rows().
  int64_t m = 1, rsa = 0, n = 0;
  [[gnu::always_inline]] inline void run(int64_t j0, int64_t j1) const {
    switch (m) {
      case 1: break;
      case 2: return rows<2>(j0, j1);
      case 3: return rows<3>(j0, j1);
      case 4: return rows<4>(j0, j1);
      case 5: return rows<5>(j0, j1);
      case 6: return rows<6>(j0, j1);
      case 7: return rows<7>(j0, j1);
      default: return rows<8>(j0, j1);
    }
    if (csb == 1) {
      for (int64_t j = j0; j < j1; ++j) y[j] = T(0);
      for (int64_t p = 0; p < k; ++p) {
        const T xp = x[p], *row = b + p * rsb;
        for (int64_t j = j0; j < j1; ++j) y[j] += xp * row[j];
      }
      return;
    }
    constexpr int kLanes = 16;
    for (int64_t j = j0; j < j1; ++j) {
      const T *col = b + j * csb;
      T acc[kLanes] = {};
      int64_t p = 0;
      for (; p + kLanes <= k; p += kLanes)  // rsb is 1 here: B's column j is contiguous
        for (int l = 0; l < kLanes; ++l) acc[l] += x[p + l] * col[p + l];
      T sum = T(0);
      for (int l = 0; l < kLanes; ++l) sum += acc[l];
      for (; p < k; ++p) sum += x[p] * col[p];
      y[j] = sum;
    }
  }
  // M rows at once, M a constant so that the row loops unroll: B [k, n] is read once per block
  // of 256 columns (the rows' sums stay in L1), B [n, k] once per column, two columns per pass
  // (M x 2 dot products of 8 partial sums each; an odd last column alone, 16 partial sums).
  template <int M>
  [[gnu::always_inline]] inline void rows(int64_t j0, int64_t j1) const {
    constexpr int kLanes = 16;
    if (csb == 1) {
      constexpr int64_t kBlock = 256;
      for (int64_t jb = j0; jb < j1; jb += kBlock) {
        const int64_t je = std::min(j1, jb + kBlock);
        for (int r = 0; r < M; ++r) std::fill(y + r * n + jb, y + r * n + je, T(0));
        for (int64_t p = 0; p < k; ++p) {
          const T *row = b + p * rsb;
          for (int r = 0; r < M; ++r) {
            const T xp = x[r * rsa + p];
            T *yr = y + r * n;
            for (int64_t j = jb; j < je; ++j) yr[j] += xp * row[j];
          }
        }
      }
      return;
    }
    // Two columns per pass: each chunk of x's rows, loaded once, feeds both columns' sums.
    constexpr int kCols = 2, kL = 8;
    int64_t j = j0;
    for (; j + kCols <= j1; j += kCols) {
      const T *col0 = b + j * csb, *col1 = col0 + csb;
      T acc0[M][kL] = {}, acc1[M][kL] = {};
      int64_t p = 0;
      for (; p + kL <= k; p += kL)
        for (int r = 0; r < M; ++r) {
          const T *xr = x + r * rsa + p;
          for (int l = 0; l < kL; ++l) {
            acc0[r][l] += xr[l] * col0[p + l];
            acc1[r][l] += xr[l] * col1[p + l];
          }
        }
      for (int r = 0; r < M; ++r) {
        T s0 = T(0), s1 = T(0);
        for (int l = 0; l < kL; ++l) s0 += acc0[r][l], s1 += acc1[r][l];
        for (int64_t q = p; q < k; ++q) s0 += x[r * rsa + q] * col0[q], s1 += x[r * rsa + q] * col1[q];
        y[r * n + j] = s0;
        y[r * n + j + 1] = s1;
      }
    }
    for (; j < j1; ++j) {
      const T *col = b + j * csb;
      T acc[M][kLanes] = {};
      int64_t p = 0;
      for (; p + kLanes <= k; p += kLanes) {
        T c[kLanes];
        for (int l = 0; l < kLanes; ++l) c[l] = col[p + l];
        for (int r = 0; r < M; ++r)
          for (int l = 0; l < kLanes; ++l) acc[r][l] += x[r * rsa + p + l] * c[l];
      }
      for (int r = 0; r < M; ++r) {
        T sum = T(0);
        for (int l = 0; l < kLanes; ++l) sum += acc[r][l];
        for (int64_t q = p; q < k; ++q) sum += x[r * rsa + q] * col[q];
        y[r * n + j] = sum;
      }
    }
  }
};

#define CTN_GEMV_VARIANT(SUFFIX, TARGET)                                                         \
  TARGET void gemv_##SUFFIX(const GemvJob<float> &j, int64_t j0, int64_t j1) { j.run(j0, j1); }  \
  TARGET void gemv_##SUFFIX(const GemvJob<double> &j, int64_t j0, int64_t j1) { j.run(j0, j1); }

CTN_ISA_VARIANTS(CTN_GEMV_VARIANT, "avx2,fma")

template <class T>
using GemvFn = void (*)(const GemvJob<T> &, int64_t, int64_t);

template <class T>
GemvFn<T> gemv_for(const char *isa) {
  return CTN_ISA_VARIANT(GemvFn<T>, isa, gemv);
}

struct MatmulState : KernelBase, MatmulShape {
  GemvFn<float> gemv32 = nullptr;  // the own one-row path, per ISA
  GemvFn<double> gemv64 = nullptr;
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
    if (m == 1) {
      // One row (batch-1 inference: classifier heads, LSTM steps): GEMV reads B once; GEMM
      // would pack all of B first for a single row. A's row is contiguous (stride m = 1 when
      // transposed). y = B[j0:j1, :] x with B stored [n, k] (tb), else y = B[:, j0:j1]^T x.
      const auto tv = st->tb ? CblasNoTrans : CblasTrans;
      const blasint rows = st->tb ? n : k, cols = st->tb ? k : n;
      if constexpr (sizeof(T) == 4)
        cblas_sgemv(CblasRowMajor, tv, rows, cols, 1.0f, bp, ldb, ap, 1, 0.0f, cp, 1);
      else
        cblas_dgemv(CblasRowMajor, tv, rows, cols, 1.0, bp, ldb, ap, 1, 0.0, cp, 1);
      return;
    }
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
struct GemvCall {
  GemvJob<T> job;
  GemvFn<T> fn;
  static void part(void *ctx, int64_t j0, int64_t j1, int) {
    const auto *c = static_cast<const GemvCall *>(ctx);
    c->fn(c->job, j0, j1);
  }
};

template <class T>
void own_gemv(Backend &be, const MatmulState &st, const T *a, const T *b, T *c) {
  GemvCall<T> call{{a, b, c, st.k, st.rsb, st.csb, st.m, st.rsa, st.n}, nullptr};
  if constexpr (sizeof(T) == 4) call.fn = st.gemv32;
  else call.fn = st.gemv64;
  // Split over columns when there is enough to share (a 1280 x 1000 head: yes; an LSTM step's
  // 256 x 1024: no, the hand-off would cost about what the second thread saves).
  if (be.pool && be.pool->size() > 1 && st.m * st.n * st.k >= (int64_t{1} << 19))
    be.pool->parallel_for(st.n, 64, GemvCall<T>::part, &call);
  else
    call.fn(call.job, 0, st.n);
}

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
  if (st.m == 1 || (st.m <= kSmallRows && st.csa == 1)) {
    own_gemv<T>(be, st, a, b, c);
    return;
  }
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
    st->dims.offsets(i, &oa, &ob);
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
  bool fused = false;
  if (!is_matmul_op(sig->op, &fused)) return CTN_OK;
  *handled = true;
  const ctn_tensor_desc &a = sig->inputs[0];
  if (ctn_status s = need_float(be->host, "cpu", sig->op, a.dtype); s) return s;
  auto st = new_state<MatmulState>(be);
  st->set_shape(matmul_dims(sig), fused, *sig->output);
  st->gemv32 = gemv_for<float>(be->gemm_isa.load()->name);
  st->gemv64 = gemv_for<double>(be->gemm_isa.load()->name);
  kernel_set(out, a.dtype == CTN_F32 ? matmul_kernel<float> : matmul_kernel<double>,
             st.release());
  return CTN_OK;
}

}  // namespace ctn_cpu
