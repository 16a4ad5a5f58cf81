// get_kernel for matmul and matmul_bias_act through cuBLAS (cublasGemmStridedBatchedEx).
// Row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, so no copy or
// transpose is ever needed. Broadcast batch dims become a stride of 0; batch shapes that no
// single stride describes are split into several strided-batched calls, planned here once.
#include <algorithm>
#include <limits>

#include "cuda_backend.h"
#include "cuda_kernels.h"

namespace ctn_cuda {
namespace {

struct GemmCall {
  int64_t a_off = 0, b_off = 0, c_off = 0;  // bytes
};

struct MatmulState : KernelBase {
  int dtype = 0;
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 1;  // per call
  std::vector<GemmCall> calls;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int act = -1;  // >= 0: matmul_bias_act epilogue
  int64_t rows = 0;
  int64_t out_bytes = 0;
};

ctn_status matmul_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const MatmulState *>(state);
  Backend *be = st->be;
  char *c = dptr<char>(args->outputs[0]);
  const char *a = dptr<const char>(args->inputs[0]);
  const char *b = dptr<const char>(args->inputs[1]);
  if (!st->out_bytes) return CTN_OK;  // an empty output
  if (st->k == 0 && st->out_bytes) {  // an empty sum: zeros (then bias/activation)
    cudaError_t e = cudaMemsetAsync(c, 0, static_cast<size_t>(st->out_bytes), be->stream);
    if (e != cudaSuccess) return cuda_fail(be, e, st->op);
  } else if (st->m && st->n) {
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    const bool f32 = st->dtype == CTN_F32;
    const void *alpha = f32 ? static_cast<const void *>(&one_f) : &one_d;
    const void *beta = f32 ? static_cast<const void *>(&zero_f) : &zero_d;
    const cudaDataType_t t = f32 ? CUDA_R_32F : CUDA_R_64F;
    for (const GemmCall &g : st->calls) {
      cublasStatus_t s = be->cublas.cublasGemmStridedBatchedEx(
          be->blas, st->op_b, st->op_a, st->n, st->m, st->k, alpha, b + g.b_off, t, st->ldb,
          st->stride_b, a + g.a_off, t, st->lda, st->stride_a, beta, c + g.c_off, t, st->n,
          st->stride_c, st->batch, st->compute, CUBLAS_GEMM_DEFAULT);
      if (s != CUBLAS_STATUS_SUCCESS) return cublas_fail(be, s, st->op);
    }
  }
  if (st->act >= 0) {
    launch_bias_act(be->stream, st->dtype, st->rows, st->n, c, dptr(args->inputs[2]), st->act);
    return check_launch(be, st->op);
  }
  return CTN_OK;
}

bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

}  // namespace

ctn_status make_matmul_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                              bool *handled) {
  bool fused = false;
  if (!is_matmul_op(sig->op, &fused)) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const char *op = fused ? CTN_OP_MATMUL_BIAS_ACT : CTN_OP_MATMUL;
  if (!be->have_cublas)
    return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: cuBLAS is not available (%s)", op,
                           be->cublas_why.c_str());
  const ctn_tensor_desc &a = sig->inputs[0], &o = *sig->output;
  if (ctn_status s = need_float(host, "cuda", sig->op, a.dtype); s) return s;
  const MatmulDims dims = matmul_dims(sig);
  const bool ta = dims.ta, tb = dims.tb;
  const int64_t m = dims.m, n = dims.n, k = dims.k;
  if (!fits_int(m) || !fits_int(n) || !fits_int(k))
    return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: a dimension exceeds cuBLAS's int range", op);

  auto st = new_state<MatmulState>(be, op);
  st->dtype = a.dtype;
  st->m = static_cast<int>(m);
  st->n = static_cast<int>(n);
  st->k = static_cast<int>(k);
  st->op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  st->op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  st->lda = static_cast<int>(std::max<int64_t>(1, ta ? m : k));
  st->ldb = static_cast<int>(std::max<int64_t>(1, tb ? k : n));
  st->compute = a.dtype == CTN_F64 ? CUBLAS_COMPUTE_64F
                : be->tf32        ? CUBLAS_COMPUTE_32F_FAST_TF32
                                  : CUBLAS_COMPUTE_32F;
  const int64_t es = static_cast<int64_t>(dtype_size(a.dtype));

  // Batch dims: the output's leading dims; each operand's batch stride (in matrices) is 0 on
  // broadcast dims. Coalesce chained dims, then the last one becomes cuBLAS's batch.
  const uint32_t nb = o.ndim - 2;
  int64_t bshape[CTN_MAX_DIMS], sa[CTN_MAX_DIMS], sb[CTN_MAX_DIMS], sc[CTN_MAX_DIMS];
  {
    int64_t ma = m * k, mb = k * n, mc = m * n;
    int64_t ca = 1, cb = 1, cc = 1;
    for (int d = static_cast<int>(nb) - 1; d >= 0; --d) {
      const int64_t od = o.shape[d];
      const int ia = d - static_cast<int>(nb) + static_cast<int>(a.ndim - 2);
      const int ib = d - static_cast<int>(nb) + static_cast<int>(dims.b_batch.ndim);
      const int64_t da = ia >= 0 ? a.shape[ia] : 1;
      const int64_t db = ib >= 0 ? sig->inputs[1].shape[ib] : 1;
      bshape[d] = od;
      sa[d] = da == 1 ? 0 : ca * ma;
      sb[d] = db == 1 ? 0 : cb * mb;
      sc[d] = cc * mc;
      ca *= da;
      cb *= db;
      cc *= od;
    }
  }
  int nd = 0;
  int64_t cs[CTN_MAX_DIMS], cas[CTN_MAX_DIMS], cbs[CTN_MAX_DIMS], ccs[CTN_MAX_DIMS];
  for (uint32_t d = 0; d < nb; ++d) {
    if (bshape[d] == 1) continue;
    if (nd > 0 && cas[nd - 1] == sa[d] * bshape[d] && cbs[nd - 1] == sb[d] * bshape[d] &&
        ccs[nd - 1] == sc[d] * bshape[d]) {
      cs[nd - 1] *= bshape[d];
      cas[nd - 1] = sa[d];
      cbs[nd - 1] = sb[d];
      ccs[nd - 1] = sc[d];
    } else {
      cs[nd] = bshape[d];
      cas[nd] = sa[d];
      cbs[nd] = sb[d];
      ccs[nd] = sc[d];
      ++nd;
    }
  }
  int64_t inner = 1, outer = 1;
  if (nd > 0) {
    inner = cs[nd - 1];
    st->stride_a = cas[nd - 1];
    st->stride_b = cbs[nd - 1];
    st->stride_c = ccs[nd - 1];
    for (int d = 0; d < nd - 1; ++d) outer *= cs[d];
  }
  if (!fits_int(inner))
    return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: batch exceeds cuBLAS's int range", op);
  st->batch = static_cast<int>(inner);
  for (int64_t i = 0; i < outer; ++i) {
    GemmCall g;
    int64_t rem = i;
    for (int d = nd - 2; d >= 0; --d) {
      const int64_t idx = rem % cs[d];
      rem /= cs[d];
      g.a_off += idx * cas[d] * es;
      g.b_off += idx * cbs[d] * es;
      g.c_off += idx * ccs[d] * es;
    }
    st->calls.push_back(g);
  }
  st->out_bytes = desc_numel(o) * es;
  if (fused) {
    st->act = dims.act;
    st->rows = n ? desc_numel(o) / n : 0;
  }
  kernel_set(out, matmul_kernel, st.release());
  return CTN_OK;
}

}  // namespace ctn_cuda
