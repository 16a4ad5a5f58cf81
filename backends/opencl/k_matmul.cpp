// matmul and matmul_bias_act through CLBlast (GEMM, batched GEMM with per-batch offsets), the
// bias/activation epilogue as our kernel; and the optimizer update ops.
#include <clblast_c.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

struct MatmulOp : Op {
  int32_t dt = CTN_F32;
  size_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  std::vector<size_t> a_off, b_off;  // per batch, elements (relative to the operand)
  size_t c_step = 0;
  int act = -1;
  cl_kernel epi = nullptr;
  cl_kernel small = nullptr;  // gemm_small instead of CLBlast (meta = per-batch offsets)
  // bound per call
  cl_mem A = nullptr, B = nullptr, C = nullptr;
  size_t ao = 0, bo = 0, co = 0;
  std::vector<size_t> ba, bb, bc;  // absolute per-batch offsets
  std::vector<float> alph32, beta32;
  std::vector<double> alph64, beta64;

  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    A = mem_of(a.inputs[0]);
    B = mem_of(a.inputs[1]);
    C = mem_of(a.outputs[0]);
    ao = static_cast<size_t>(elem_off(a.inputs[0]));
    bo = static_cast<size_t>(elem_off(a.inputs[1]));
    co = static_cast<size_t>(elem_off(a.outputs[0]));
    size_t nb = a_off.size();
    ba.resize(nb);
    bb.resize(nb);
    bc.resize(nb);
    for (size_t i = 0; i < nb; ++i) {
      ba[i] = ao + a_off[i];
      bb[i] = bo + b_off[i];
      bc[i] = co + i * c_step;
    }
    if (small) {
      cl_long total = static_cast<cl_long>(m * n * nb);
      cl_int e = set_args(small, total, cl_long(m), cl_long(n), cl_long(k), cl_int(ta), cl_int(tb),
                          meta, A, cl_long(ao), B, cl_long(bo), C, cl_long(co));
      if (e != CL_SUCCESS) return fail(e, "clSetKernelArg");
    }
    if (act >= 0) {
      const ctn_tensor_desc &bias = a.inputs[2];
      cl_long total = static_cast<cl_long>(m * n * nb), ncol = static_cast<cl_long>(n);
      cl_int e = set_args(epi, total, ncol, cl_int(act), C, cl_long(co), mem_of(bias),
                          cl_long(elem_off(bias)));
      if (e != CL_SUCCESS) return fail(e, "clSetKernelArg");
    }
    return CTN_OK;
  }

  ctn_status enqueue() override {
    if (m == 0 || n == 0) return CTN_OK;
    const size_t nb = a_off.size();
    if (k == 0) {
      const cl_uchar zero = 0;
      cl_int e = clEnqueueFillBuffer(be->queue, C, &zero, 1, co * dtype_size(dt),
                                     m * n * nb * dtype_size(dt), 0, nullptr, nullptr);
      if (e != CL_SUCCESS) return fail(e, "clEnqueueFillBuffer");
    } else if (small) {
      if (ctn_status st = launch(small, static_cast<int64_t>(m * n * nb)); st != CTN_OK) return st;
    } else {
      const CLBlastTranspose tA = ta ? CLBlastTransposeYes : CLBlastTransposeNo;
      const CLBlastTranspose tB = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
      const size_t lda = std::max<size_t>(1, ta ? m : k), ldb = std::max<size_t>(1, tb ? k : n);
      CLBlastStatusCode s;
      cl_command_queue q = be->queue;
      if (nb == 1) {
        s = dt == CTN_F32
                ? CLBlastSgemm(CLBlastLayoutRowMajor, tA, tB, m, n, k, 1.0f, A, ba[0], lda, B, bb[0],
                               ldb, 0.0f, C, bc[0], n, &q, nullptr)
                : CLBlastDgemm(CLBlastLayoutRowMajor, tA, tB, m, n, k, 1.0, A, ba[0], lda, B, bb[0],
                               ldb, 0.0, C, bc[0], n, &q, nullptr);
      } else if (dt == CTN_F32) {
        s = CLBlastSgemmBatched(CLBlastLayoutRowMajor, tA, tB, m, n, k, alph32.data(), A, ba.data(),
                                lda, B, bb.data(), ldb, beta32.data(), C, bc.data(), n, nb, &q,
                                nullptr);
      } else {
        s = CLBlastDgemmBatched(CLBlastLayoutRowMajor, tA, tB, m, n, k, alph64.data(), A, ba.data(),
                                lda, B, bb.data(), ldb, beta64.data(), C, bc.data(), n, nb, &q,
                                nullptr);
      }
      if (s != CLBlastSuccess)
        return be->host->set_error(CTN_ERR_INTERNAL, "opencl %s: CLBlast GEMM %zux%zux%zu (batch %zu) failed with status %d",
                                   op, m, n, k, nb, static_cast<int>(s));
    }
    if (act >= 0) return launch(epi, static_cast<int64_t>(m * n * nb));
    return CTN_OK;
  }
};

// GEMMs of at most this many multiply-adds (m*n*k*batches) run gemm_small; default 2^21
// (128^3), CHUTNEY_OPENCL_SMALL_GEMM=<n> overrides it (0: always CLBlast).
int64_t small_gemm_max() {
  const char *e = std::getenv("CHUTNEY_OPENCL_SMALL_GEMM");
  return e && *e ? std::max<int64_t>(0, std::atoll(e)) : int64_t{1} << 21;
}

}  // namespace

ctn_status make_matmul(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  bool fused = false;
  if (!is_matmul_op(sig->op, &fused)) return CTN_OK;
  *handled = true;
  const ctn_tensor_desc &a = sig->inputs[0];
  if (ctn_status s = need_float(be->host, "opencl", sig->op, a.dtype); s) return s;
  MatmulDims d = matmul_dims(sig);
  auto st = new_state<MatmulOp>(be, fused ? CTN_OP_MATMUL_BIAS_ACT : CTN_OP_MATMUL);
  st->dt = a.dtype;
  st->ta = d.ta;
  st->tb = d.tb;
  st->n = static_cast<size_t>(d.n);
  st->k = static_cast<size_t>(d.k);
  if (fused) {
    st->act = d.act;
    st->epi = st->make_kernel(a.dtype == CTN_F64 ? "bias_act_f64" : "bias_act_f32");
    if (!st->epi) return CTN_ERR_INTERNAL;
  }
  st->c_step = static_cast<size_t>(d.m * d.n);
  if (fold_batches(d)) st->c_step = static_cast<size_t>(d.m * d.n);
  batch_tables(d);
  st->m = static_cast<size_t>(d.m);
  st->a_off.assign(d.a_off.begin(), d.a_off.end());
  st->b_off.assign(d.b_off.begin(), d.b_off.end());
  // Small GEMMs use our own kernel: CLBlast builds its kernels once per process (~0.1-0.2 s on
  // PoCL, most of a warm start), ours come with the cached program. CLBlast takes the rest.
  const double work = static_cast<double>(st->m) * static_cast<double>(st->n) *
                      static_cast<double>(st->k) * static_cast<double>(st->a_off.size());
  if (st->k > 0 && work <= static_cast<double>(small_gemm_max())) {
    std::vector<int64_t> offs;
    for (size_t i = 0; i < st->a_off.size(); ++i) {
      offs.push_back(static_cast<int64_t>(st->a_off[i]));
      offs.push_back(static_cast<int64_t>(st->b_off[i]));
    }
    if (ctn_status e = st->set_meta(offs); e) return e;
    st->small = st->make_kernel(a.dtype == CTN_F64 ? "gemm_small_f64" : "gemm_small_f32");
    if (!st->small) return CTN_ERR_INTERNAL;
  }
  st->alph32.assign(st->a_off.size(), 1.0f);
  st->beta32.assign(st->a_off.size(), 0.0f);
  st->alph64.assign(st->a_off.size(), 1.0);
  st->beta64.assign(st->a_off.size(), 0.0);
  op_set(out, st.release());
  return CTN_OK;
}

// ---- optimizer updates -----------------------------------------------------------------------
namespace {

struct OptimOp : Op {
  cl_kernel k = nullptr;
  int32_t dt = CTN_F32;
  cl_int code = 0, flag = 0;
  cl_long n = 0;
  double f[4] = {0, 0, 0, 0};
  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    // Unused operand slots repeat the first input (never read by that op code).
    auto in = [&](uint32_t i) -> const ctn_tensor_desc & {
      return i < a.n_inputs ? a.inputs[i] : a.inputs[0];
    };
    const ctn_tensor_desc &y = a.outputs[0];
    const ctn_tensor_desc &lr = code == 1 ? in(3) : code == 4 ? in(3) : in(0);
    const ctn_tensor_desc &step = code == 4 ? in(4) : in(0);
    const ctn_tensor_desc &c = code == 2 || code == 3 ? in(0) : in(2);
    cl_long step_off = code == 4 ? elem_off(step) : 0;
    cl_int e = set_args(k, code, n, mem_of(in(0)), cl_long(elem_off(in(0))), mem_of(in(1)),
                        cl_long(elem_off(in(1))), mem_of(c), cl_long(elem_off(c)), mem_of(lr),
                        cl_long(elem_off(lr)), mem_of(step), step_off, mem_of(y),
                        cl_long(elem_off(y)));
    for (cl_uint i = 0; e == CL_SUCCESS && i < 4; ++i)
      e = dt == CTN_F64 ? set_arg(k, 14 + i, cl_double(f[i]))
                        : set_arg(k, 14 + i, cl_float(static_cast<float>(f[i])));
    if (e == CL_SUCCESS) e = set_arg(k, 18, flag);
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override { return launch(k, n); }
};

struct DropoutOp : Op {
  cl_kernel k = nullptr;
  int32_t dt = CTN_F32;
  cl_long n = 0;
  cl_ulong seed = 0;
  cl_uint thr = 0;
  double scale = 1;
  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    const ctn_tensor_desc &x = a.inputs[0], &st = a.inputs[1], &y = a.outputs[0];
    cl_int e = set_args(k, n, mem_of(x), cl_long(elem_off(x)), mem_of(st), cl_long(elem_off(st)),
                        mem_of(y), cl_long(elem_off(y)), seed, thr);
    if (e == CL_SUCCESS)
      e = dt == CTN_F64 ? set_arg(k, 9, cl_double(scale))
                        : set_arg(k, 9, cl_float(static_cast<float>(scale)));
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override { return launch(k, n); }
};

ctn_status make_dropout(Backend *be, const ctn_op_signature *sig, ctn_kernel *out) {
  const ctn_tensor_desc &x = sig->inputs[0];
  // f32/f64 only: a 16-bit x must not reach the f32 kernel (it would read 4-byte elements).
  if (ctn_status s = need_float(be->host, "opencl", sig->op, x.dtype); s) return s;
  double p = sig->attrs->f[0];
  auto st = new_state<DropoutOp>(be, "dropout");
  st->dt = x.dtype;
  st->n = desc_numel(x);
  st->seed = static_cast<cl_ulong>(sig->attrs->i[0]);
  st->thr = static_cast<cl_uint>(std::floor(p * 16777216.0));
  st->scale = 1.0 / (1.0 - p);
  return op_finish(std::move(st), x.dtype == CTN_F64 ? "dropout_f64" : "dropout_f32", out);
}

}  // namespace

ctn_status make_optim(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  static const char *const names[] = {"sgd_velocity", "sgd_apply", "adam_moment1", "adam_moment2",
                                      "adam_apply"};
  if (!std::strcmp(sig->op, "dropout")) {
    *handled = true;
    return make_dropout(be, sig, out);
  }
  int code = -1;
  for (int i = 0; i < 5; ++i)
    if (!std::strcmp(sig->op, names[i])) code = i;
  if (code < 0) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &w = sig->inputs[0], &y = *sig->output;
  if (ctn_status s = need_float(host, "opencl", sig->op, w.dtype); s) return s;
  auto st = new_state<OptimOp>(be, names[code]);
  st->dt = w.dtype;
  st->code = code;
  st->n = desc_numel(y);
  st->flag = static_cast<cl_int>(sig->attrs->i[0] != 0);
  for (int i = 0; i < 4; ++i) st->f[i] = sig->attrs->f[i];
  return op_finish(std::move(st), w.dtype == CTN_F64 ? "optim_f64" : "optim_f32", out, CTN_KERNEL_INPLACE_OK);
}

}  // namespace ctn_ocl
