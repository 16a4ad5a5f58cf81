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
    for (uint32_t i = 0; i < a.n_inputs; ++i)
      if (ctn_status s = check_offset(be, name, a.inputs[i]); s) return s;
    if (ctn_status s = check_offset(be, name, a.outputs[0]); s) return s;
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
                                   name, m, n, k, nb, static_cast<int>(s));
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
  const char *op = sig->op;
  bool fused = !std::strcmp(op, CTN_OP_MATMUL_BIAS_ACT);
  if (!fused && std::strcmp(op, CTN_OP_MATMUL) != 0) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  uint32_t n_in = fused ? 3 : 2;
  if (sig->n_inputs != n_in)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl %s: expects %u inputs", op, n_in);
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[1], &y = *sig->output;
  if (a.dtype != CTN_F32 && a.dtype != CTN_F64)
    return host->set_error(CTN_ERR_UNSUPPORTED, "opencl %s: dtype %s is not supported (f32, f64 only)",
                           op, dtype_name(a.dtype));
  for (uint32_t i = 1; i <= sig->n_inputs; ++i) {
    const ctn_tensor_desc &d = i < sig->n_inputs ? sig->inputs[i] : y;
    if (d.dtype != a.dtype)
      return host->set_error(CTN_ERR_DTYPE, "opencl %s: operand %u dtype differs", op, i);
  }
  if (a.ndim < 2 || b.ndim < 2)
    return host->set_error(CTN_ERR_SHAPE, "opencl %s: operands must be at least 2-d", op);
  auto st = std::make_unique<MatmulOp>();
  st->be = be;
  st->name = fused ? CTN_OP_MATMUL_BIAS_ACT : CTN_OP_MATMUL;
  st->dt = a.dtype;
  st->ta = sig->attrs->i[0] != 0;
  st->tb = sig->attrs->i[1] != 0;
  const int64_t ar = a.shape[a.ndim - 2], ac = a.shape[a.ndim - 1];
  const int64_t br = b.shape[b.ndim - 2], bc = b.shape[b.ndim - 1];
  const int64_t m = st->ta ? ac : ar, k = st->ta ? ar : ac, kb = st->tb ? bc : br,
                n = st->tb ? br : bc;
  if (kb != k)
    return host->set_error(CTN_ERR_SHAPE, "opencl %s: inner dims differ: %s @ %s", op,
                           shape_str(a).c_str(), shape_str(b).c_str());
  st->m = static_cast<size_t>(m);
  st->n = static_cast<size_t>(n);
  st->k = static_cast<size_t>(k);
  ctn_tensor_desc ab{}, bb{}, yb{};
  ab.ndim = a.ndim - 2;
  bb.ndim = b.ndim - 2;
  yb.ndim = y.ndim >= 2 ? y.ndim - 2 : 0;
  for (uint32_t i = 0; i < ab.ndim; ++i) ab.shape[i] = a.shape[i];
  for (uint32_t i = 0; i < bb.ndim; ++i) bb.shape[i] = b.shape[i];
  for (uint32_t i = 0; i < yb.ndim; ++i) yb.shape[i] = y.shape[i];
  ctn_tensor_desc want{};
  want.ndim = std::max(ab.ndim, bb.ndim);
  for (uint32_t i = 0; i < want.ndim; ++i) {
    int64_t da = i + ab.ndim >= want.ndim ? ab.shape[i + ab.ndim - want.ndim] : 1;
    int64_t db = i + bb.ndim >= want.ndim ? bb.shape[i + bb.ndim - want.ndim] : 1;
    if (da != db && da != 1 && db != 1)
      return host->set_error(CTN_ERR_SHAPE, "opencl %s: batch dims do not broadcast", op);
    want.shape[i] = da == 1 ? db : da;
  }
  want.shape[want.ndim++] = m;
  want.shape[want.ndim++] = n;
  if (!same_shape(want, y)) return host->set_error(CTN_ERR_SHAPE, "opencl %s: output shape %s, expected %s",
                                                   op, shape_str(y).c_str(), shape_str(want).c_str());
  if (fused) {
    const ctn_tensor_desc &bias = sig->inputs[2];
    if (bias.ndim != 1 || bias.shape[0] != n)
      return host->set_error(CTN_ERR_SHAPE, "opencl %s: bias must be [%lld]", op, static_cast<long long>(n));
    int64_t act = sig->attrs->i[2];
    if (act < CTN_ACT_NONE || act > CTN_ACT_GELU)
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl %s: unknown activation", op);
    st->act = static_cast<int>(act);
    st->epi = st->make_kernel(a.dtype == CTN_F64 ? "bias_act_f64" : "bias_act_f32");
    if (!st->epi) return CTN_ERR_INTERNAL;
  }
  int64_t sa[CTN_MAX_DIMS] = {}, sb[CTN_MAX_DIMS] = {};
  broadcast_strides(ab, yb, sa);
  broadcast_strides(bb, yb, sb);
  int64_t batches = desc_numel(yb);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int d = static_cast<int>(yb.ndim) - 1; d >= 0; --d) {
      int64_t idx = rem % yb.shape[d];
      rem /= yb.shape[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    st->a_off.push_back(static_cast<size_t>(oa * m * k));
    st->b_off.push_back(static_cast<size_t>(ob * k * n));
  }
  st->c_step = static_cast<size_t>(m * n);
  // [B, M, K] @ [K, N] with one shared right operand: one GEMM of B*M rows.
  bool fold = batches > 1 && !st->ta;
  for (int64_t i = 0; fold && i < batches; ++i)
    fold = st->b_off[i] == st->b_off[0] && st->a_off[i] == static_cast<size_t>(i * m * k);
  if (fold) {
    st->m *= static_cast<size_t>(batches);
    st->a_off.assign(1, 0);
    st->b_off.assign(1, st->b_off[0]);
    st->c_step = st->m * st->n;
  }
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
    for (uint32_t i = 0; i < a.n_inputs; ++i)
      if (ctn_status s = check_offset(be, name, a.inputs[i]); s) return s;
    if (ctn_status s = check_offset(be, name, a.outputs[0]); s) return s;
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
    for (uint32_t i = 0; i < a.n_inputs; ++i)
      if (ctn_status s = check_offset(be, name, a.inputs[i]); s) return s;
    const ctn_tensor_desc &x = a.inputs[0], &st = a.inputs[1], &y = a.outputs[0];
    if (ctn_status s = check_offset(be, name, y); s) return s;
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
  const ctn_host_api *host = be->host;
  if (sig->n_inputs != 2)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl dropout: expects (x, step)");
  const ctn_tensor_desc &x = sig->inputs[0], &step = sig->inputs[1], &y = *sig->output;
  if ((x.dtype != CTN_F32 && x.dtype != CTN_F64) || step.dtype != CTN_I64 ||
      desc_numel(step) != 1 || !same_shape(x, y) || y.dtype != x.dtype)
    return host->set_error(CTN_ERR_SHAPE, "opencl dropout: expects (x f32|f64, step i64 one element) -> x's shape");
  double p = sig->attrs->f[0];
  if (!(p >= 0 && p < 1)) return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl dropout: p must be in [0, 1)");
  auto st = std::make_unique<DropoutOp>();
  st->be = be;
  st->name = "dropout";
  st->dt = x.dtype;
  st->n = desc_numel(x);
  st->seed = static_cast<cl_ulong>(sig->attrs->i[0]);
  st->thr = static_cast<cl_uint>(std::floor(p * 16777216.0));
  st->scale = 1.0 / (1.0 - p);
  st->k = st->make_kernel(x.dtype == CTN_F64 ? "dropout_f64" : "dropout_f32");
  if (!st->k) return CTN_ERR_INTERNAL;
  op_set(out, st.release());
  return CTN_OK;
}

}  // namespace

ctn_status make_optim(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  static const char *const names[] = {"sgd_velocity", "sgd_apply", "adam_moment1", "adam_moment2",
                                      "adam_apply"};
  static const uint32_t n_in[] = {3, 4, 2, 2, 5};
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
  if (sig->n_inputs != n_in[code])
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl %s: expects %u inputs", sig->op, n_in[code]);
  const ctn_tensor_desc &w = sig->inputs[0], &y = *sig->output;
  if (w.dtype != CTN_F32 && w.dtype != CTN_F64)
    return host->set_error(CTN_ERR_UNSUPPORTED, "opencl %s: f32 and f64 only", sig->op);
  uint32_t n_state = code == 1 || code == 4 ? 3 : n_in[code];
  for (uint32_t i = 0; i < n_state; ++i)
    if (!same_shape(sig->inputs[i], y) || sig->inputs[i].dtype != w.dtype)
      return host->set_error(CTN_ERR_SHAPE, "opencl %s: input %u must match the output", sig->op, i);
  if ((code == 1 || code == 4) && (desc_numel(sig->inputs[3]) != 1 || sig->inputs[3].dtype != w.dtype))
    return host->set_error(CTN_ERR_SHAPE, "opencl %s: lr must be a 0-d %s", sig->op, dtype_name(w.dtype));
  if (code == 4 && (desc_numel(sig->inputs[4]) != 1 || sig->inputs[4].dtype != CTN_I64))
    return host->set_error(CTN_ERR_SHAPE, "opencl %s: step must be a 0-d i64", sig->op);
  auto st = std::make_unique<OptimOp>();
  st->be = be;
  st->name = names[code];
  st->dt = w.dtype;
  st->code = code;
  st->n = desc_numel(y);
  st->flag = static_cast<cl_int>(sig->attrs->i[0] != 0);
  for (int i = 0; i < 4; ++i) st->f[i] = sig->attrs->f[i];
  st->k = st->make_kernel(w.dtype == CTN_F64 ? "optim_f64" : "optim_f32");
  if (!st->k) return CTN_ERR_INTERNAL;
  op_set(out, st.release(), CTN_KERNEL_INPLACE_OK);
  return CTN_OK;
}

}  // namespace ctn_ocl
