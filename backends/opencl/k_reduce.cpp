// Reductions (sum, mean, max), the softmax family and cross-entropy: one work-group per output
// element or row, tree reduction in local memory (at most 256 items, <= 2 KiB for f64).
#include <cmath>
#include <limits>

#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

ctn_status need_float(Backend *be, const char *op, int32_t dt) {
  return ctn_backend_util::need_float(be->host, "opencl", op, dt);
}
// Reductions and the softmax family take the 16-bit floats too (reduce_ops.cl: stored in 16
// bits, summed in f32).
ctn_status need_float_or_half(Backend *be, const char *op, int32_t dt) {
  return dt == CTN_F16 || dt == CTN_BF16 ? CTN_OK : need_float(be, op, dt);
}
// Bytes of one local-memory accumulator: f64 sums in double, every other float in float.
size_t acc_bytes(int32_t dt) { return dt == CTN_F64 ? 8 : 4; }

cl_int set_scalar(cl_kernel k, cl_uint idx, int32_t dt, double v) {
  if (dt == CTN_F64) return set_arg(k, idx, cl_double(v));
  return set_arg(k, idx, cl_float(static_cast<float>(v)));
}

struct ReduceOp : RowOp {
  cl_int nk = 0, nr = 0;
  cl_long nout = 0, R = 0;
  double scale = 1;
  ctn_status bind(const ctn_kernel_args &a) override {
    const ctn_tensor_desc &x = a.inputs[0], &y = a.outputs[0];
    if (ctn_status s = check_offset(be, op, x); s) return s;
    if (ctn_status s = check_offset(be, op, y); s) return s;
    cl_int e = set_args(k, code, nout, R, nk, nr, meta, mem_of(x), cl_long(elem_off(x)), mem_of(y),
                        cl_long(elem_off(y)));
    if (e == CL_SUCCESS) e = set_scalar(k, 10, dt, scale);
    if (e == CL_SUCCESS) e = set_arg(k, 11, LocalMem{local * acc_bytes(dt)});
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override { return launch_rows(k, nout, local); }
};

struct SoftmaxOp : RowOp {
  cl_long rows = 0, len = 0, inner = 1;
  ctn_status bind(const ctn_kernel_args &a) override {
    const ctn_tensor_desc &x = a.inputs[0], &y = a.outputs[0];
    const ctn_tensor_desc &dy = a.n_inputs > 1 ? a.inputs[1] : a.inputs[0];
    for (const ctn_tensor_desc *d : {&x, &dy, &y})
      if (ctn_status s = check_offset(be, op, *d); s) return s;
    cl_int e = set_args(k, code, rows, len, inner, mem_of(x), cl_long(elem_off(x)), mem_of(dy),
                        cl_long(elem_off(dy)), mem_of(y), cl_long(elem_off(y)),
                        LocalMem{local * acc_bytes(dt)});
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override { return launch_rows(k, rows, local); }
};

struct CeOp : Op {
  cl_kernel k = nullptr;
  bool grad = false;
  int32_t dt = CTN_F32;
  cl_long N = 0, C = 0;
  size_t local = 1;
  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    const ctn_tensor_desc &x = a.inputs[0], &lab = a.inputs[1], &y = a.outputs[0];
    cl_int e;
    if (!grad) {
      e = set_args(k, N, C, mem_of(x), cl_long(elem_off(x)), mem_of(lab), cl_long(elem_off(lab)),
                   mem_of(y), cl_long(elem_off(y)), be->err, LocalMem{local * dtype_size(dt)});
    } else {
      const ctn_tensor_desc &dy = a.inputs[2];
      e = set_args(k, N, C, mem_of(x), cl_long(elem_off(x)), mem_of(lab), cl_long(elem_off(lab)),
                   mem_of(dy), cl_long(elem_off(dy)), mem_of(y), cl_long(elem_off(y)), be->err);
    }
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override {
    be->err_armed = true;
    if (!grad) return launch_groups(k, 1, local);
    return launch(k, N);
  }
};

ctn_status make_reduce_op(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, int code) {
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  if (ctn_status s = need_float_or_half(be, sig->op, x.dtype); s) return s;
  const uint64_t mask = static_cast<uint64_t>(sig->attrs->i[0]);
  const int64_t count = reduce_count(sig);
  auto st = new_row_op<ReduceOp>(be, sig->op, x.dtype, code);
  st->nout = desc_numel(y);
  st->R = count;
  st->scale = count ? 1.0 / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
  // Kept and reduced dims (input strides), each in row-major order; size-1 dims dropped.
  std::vector<int64_t> ks, kst, rs, rst;
  int64_t s = 1, istr[CTN_MAX_DIMS];
  for (int k = static_cast<int>(x.ndim) - 1; k >= 0; --k) {
    istr[k] = s;
    s *= x.shape[k];
  }
  for (uint32_t k = 0; k < x.ndim; ++k) {
    if (x.shape[k] == 1) continue;
    if ((mask >> k) & 1) {
      rs.push_back(x.shape[k]);
      rst.push_back(istr[k]);
    } else {
      ks.push_back(x.shape[k]);
      kst.push_back(istr[k]);
    }
  }
  st->nk = static_cast<cl_int>(ks.size());
  st->nr = static_cast<cl_int>(rs.size());
  std::vector<int64_t> meta;
  for (auto *v : {&ks, &kst, &rs, &rst}) meta.insert(meta.end(), v->begin(), v->end());
  if (ctn_status e = st->set_meta(meta); e) return e;
  // Short reductions waste most of a wide group: shrink it to the reduced extent.
  if (!st->make_row_kernel(std::string("reduce_") + kernel_suffix(x.dtype), acc_bytes(x.dtype), count))
    return CTN_ERR_INTERNAL;
  op_set(out, st.release());
  return CTN_OK;
}

ctn_status make_softmax(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, int code) {
  const ctn_tensor_desc &x = sig->inputs[0];
  if (ctn_status s = need_float_or_half(be, sig->op, x.dtype); s) return s;
  auto st = new_row_op<SoftmaxOp>(be, sig->op, x.dtype, code);
  const AxisDims d = axis_dims(x, sig->attrs->i[0]);
  st->len = d.len;
  st->inner = d.inner;
  st->rows = d.outer * d.inner;
  if (!st->make_row_kernel(std::string("softmax_") + kernel_suffix(x.dtype), acc_bytes(x.dtype), st->len))
    return CTN_ERR_INTERNAL;
  op_set(out, st.release(), CTN_KERNEL_INPLACE_OK);
  return CTN_OK;
}

ctn_status make_ce(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool grad) {
  const ctn_tensor_desc &x = sig->inputs[0], &lab = sig->inputs[1];
  if (ctn_status s = need_float(be, sig->op, x.dtype); s) return s;
  auto st = new_state<CeOp>(be, sig->op);
  st->grad = grad;
  st->dt = x.dtype;
  st->N = x.shape[0];
  st->C = x.shape[1];
  std::string kname = std::string(grad ? "ce_grad_" : "ce_") + (lab.dtype == CTN_I32 ? "i32" : "i64") +
                      (x.dtype == CTN_F64 ? "_f64" : "_f32");
  st->k = st->make_kernel(kname.c_str());
  if (!st->k) return CTN_ERR_INTERNAL;
  st->local = st->group_size(st->k, dtype_size(x.dtype));
  op_set(out, st.release());
  return CTN_OK;
}

}  // namespace

ctn_status make_reduce(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  return dispatch_reduce(
      sig->op, handled, [&](int c) { return make_reduce_op(be, sig, out, c); },
      [&](int c) { return make_softmax(be, sig, out, c); },
      [&](bool grad) { return make_ce(be, sig, out, grad); });
}

}  // namespace ctn_ocl
