// Neural-network ops (kernels/nn_ops.cl): conv2d, conv2d_grad_input, conv2d_grad_weight,
// conv_transpose2d, max/avg pooling and their gradients, batch norm (training, inference,
// gradients), layer norm (and gradients), embedding and embedding_grad. Shapes and attributes
// are checked exactly like the CPU backend (backends/cpu); every accumulating kernel is a gather
// (one work-item per output element), so results are deterministic.
#include <algorithm>

#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

std::string kname(const char *base, int32_t dt) {
  return std::string(base) + (dt == CTN_F64 ? "_f64" : "_f32");
}

// Conv and pooling: (total, meta, in0, in0 offset, in1, in1 offset, out, out offset).
struct GatherOp : Op {
  cl_kernel k = nullptr;
  cl_long total = 0;
  int in0 = 0, in1 = 1;  // argument slots of the two inputs (in1 == in0: unused)
  ctn_status bind(const ctn_kernel_args &a) override {
    const ctn_tensor_desc &x = a.inputs[in0], &z = a.inputs[in1], &y = a.outputs[0];
    for (const ctn_tensor_desc *d : {&x, &z, &y})
      if (ctn_status s = check_offset(be, op, *d); s) return s;
    cl_int e = set_args(k, total, meta, mem_of(x), cl_long(elem_off(x)), mem_of(z),
                        cl_long(elem_off(z)), mem_of(y), cl_long(elem_off(y)));
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override { return launch(k, total); }
};

// ---- convolution ------------------------------------------------------------------------------
enum class ConvKind { kForward, kGradInput, kGradWeight };

ctn_status make_conv(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, ConvKind kind) {
  const char *op = sig->op;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[1], &y = *sig->output;
  if (ctn_status s = need_float(host, "opencl", sig->op, a.dtype); s) return s;
  if (kind == ConvKind::kForward && sig->attrs->ni > 7 && sig->attrs->i[7] != 0)  // layout (since 1.7)
    return host->set_error(CTN_ERR_UNSUPPORTED, "opencl %s: layout 1 (NHWC) is not implemented", op);
  const int64_t *at = sig->attrs->i;
  const int64_t sh = at[0], sw = at[1], ph = at[2], pw = at[3], dh = at[4], dw = at[5], groups = at[6];
  // Input, weight and output of the underlying convolution.
  const ctn_tensor_desc *cx, *cw, *cy;
  switch (kind) {
    case ConvKind::kForward: cx = &a, cw = &b, cy = &y; break;
    case ConvKind::kGradInput: cx = &y, cw = &b, cy = &a; break;
    default: cx = &a, cw = &y, cy = &b; break;
  }
  const int64_t n = cx->shape[0], c = cx->shape[1], h = cx->shape[2], w = cx->shape[3];
  const int64_t o = cw->shape[0], kh = cw->shape[2], kw = cw->shape[3];
  const int64_t ho = cy->shape[2], wo = cy->shape[3];
  auto st = new_state<GatherOp>(be, op);
  st->total = desc_numel(y);
  if (ctn_status s = st->set_meta({n, c, h, w, o, kh, kw, ho, wo, sh, sw, ph, pw, dh, dw, groups,
                                   c / groups, o / groups});
      s)
    return s;
  const char *base = kind == ConvKind::kForward     ? "conv2d"
                     : kind == ConvKind::kGradInput ? "conv2d_grad_input"
                                                    : "conv2d_grad_weight";
  return op_finish(std::move(st), kname(base, a.dtype).c_str(), out);
}

// ---- pooling ----------------------------------------------------------------------------------
enum class PoolKind { kMax, kMaxGrad, kAvg, kAvgGrad };

ctn_status make_pool(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, PoolKind kind) {
  const char *op = sig->op;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &y = *sig->output;
  if (ctn_status s = need_float(host, "opencl", sig->op, y.dtype); s) return s;
  const uint32_t layout_slot = kind == PoolKind::kMax ? 6 : 7;  // layout (since 1.7): NCHW only
  if ((kind == PoolKind::kMax || kind == PoolKind::kAvg) && sig->attrs->ni > layout_slot && sig->attrs->i[layout_slot] != 0)
    return host->set_error(CTN_ERR_UNSUPPORTED, "opencl %s: layout 1 (NHWC) is not implemented", op);
  const bool grad = kind == PoolKind::kMaxGrad || kind == PoolKind::kAvgGrad;
  const ctn_tensor_desc &big = kind == PoolKind::kAvgGrad ? y : sig->inputs[0];
  const ctn_tensor_desc &small =
      kind == PoolKind::kAvgGrad ? sig->inputs[0] : grad ? sig->inputs[2] : y;
  const int64_t *at = sig->attrs->i;
  const int64_t kh = at[0], kw = at[1], sh = at[2], sw = at[3], ph = at[4], pw = at[5];
  const int64_t inc = (kind == PoolKind::kAvg || kind == PoolKind::kAvgGrad) && at[6] != 0;
  const int64_t planes = big.shape[0] * big.shape[1], h = big.shape[2], w = big.shape[3];
  const int64_t ho = small.shape[2], wo = small.shape[3];
  bool ok = kh >= 1 && kw >= 1 && sh >= 1 && sw >= 1 && ph >= 0 && pw >= 0 && 2 * ph <= kh &&
            2 * pw <= kw && small.shape[0] == big.shape[0] && small.shape[1] == big.shape[1] &&
            h + 2 * ph >= kh && w + 2 * pw >= kw && ho == (h + 2 * ph - kh) / sh + 1 &&
            wo == (w + 2 * pw - kw) / sw + 1;
  if (kind == PoolKind::kMaxGrad) ok = ok && same_shape(sig->inputs[1], small) && same_shape(y, big);
  auto st = new_state<GatherOp>(be, op);
  st->total = desc_numel(y);
  if (kind == PoolKind::kMaxGrad) st->in1 = 2;  // (x, y, dy): x and dy
  else st->in1 = 0;
  if (ctn_status s = st->set_meta({planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, inc}); s) return s;
  const char *base = kind == PoolKind::kMax      ? "max_pool2d"
                     : kind == PoolKind::kMaxGrad ? "max_pool2d_grad"
                     : kind == PoolKind::kAvg     ? "avg_pool2d"
                                                  : "avg_pool2d_grad";
  return op_finish(std::move(st), kname(base, y.dtype).c_str(), out);
}

// ---- normalisation ----------------------------------------------------------------------------
// Statistics accumulate in double where the device has fp64 (ACC in nn_ops.cl), else in T.
size_t acc_size(const Backend &be, int32_t dt) { return be.fp64 || dt == CTN_F64 ? 8 : 4; }
cl_int set_acc(const Backend &be, cl_kernel k, cl_uint i, int32_t dt, double v) {
  if (acc_size(be, dt) == 8) return set_arg(k, i, cl_double(v));
  return set_arg(k, i, cl_float(static_cast<float>(v)));
}

enum NormCode { kBn = 0, kBnGradInput = 1, kBnGradGamma = 2, kBnInference = 3 };

struct BatchNormOp : RowOp {
  cl_long outer = 0, ch = 0, inner = 0;
  double eps = 0;
  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    const ctn_tensor_desc &x = a.inputs[0], &y = a.outputs[0];
    // Slots a (gamma), b (beta), d (dy), rm, rv; unused ones repeat x (never read).
    const ctn_tensor_desc *ga = &x, *be_ = &x, *d = &x, *rm = &x, *rv = &x;
    switch (code) {
      case kBn: ga = &a.inputs[1], be_ = &a.inputs[2]; break;
      case kBnGradInput: ga = &a.inputs[1], d = &a.inputs[2]; break;
      case kBnGradGamma: d = &a.inputs[1]; break;
      default: ga = &a.inputs[1], be_ = &a.inputs[2], rm = &a.inputs[3], rv = &a.inputs[4]; break;
    }
    cl_int e = set_args(k, code, outer, ch, inner, mem_of(x), cl_long(elem_off(x)), mem_of(*ga),
                        cl_long(elem_off(*ga)), mem_of(*be_), cl_long(elem_off(*be_)), mem_of(*d),
                        cl_long(elem_off(*d)), mem_of(*rm), cl_long(elem_off(*rm)), mem_of(*rv),
                        cl_long(elem_off(*rv)), mem_of(y), cl_long(elem_off(y)));
    if (e == CL_SUCCESS) e = set_acc(*be, k, 18, dt, eps);
    if (e == CL_SUCCESS) e = set_arg(k, 19, LocalMem{local * acc_size(*be, dt)});
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override { return launch_rows(k, ch, local); }
};

struct LayerNormOp : RowOp {  // code: 0 forward, 1 grad input, 2 grad gamma (row statistics, then columns)
  cl_kernel cols = nullptr;
  cl_long rows = 0, len = 0;
  double eps = 0;
  cl_mem stats = nullptr;  // grad gamma: [rows][mean, rstd] in ACC
  ~LayerNormOp() override {
    if (stats) clReleaseMemObject(stats);
  }
  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    const ctn_tensor_desc &x = a.inputs[0], &y = a.outputs[0];
    const ctn_tensor_desc *ga = &x, *bt = &x, *d = &x;
    if (code == 0) ga = &a.inputs[1], bt = &a.inputs[2];
    else if (code == 1) ga = &a.inputs[1], d = &a.inputs[2];
    else d = &a.inputs[1];
    cl_mem st = stats ? stats : meta;
    cl_int e = set_args(k, code, rows, len, mem_of(x), cl_long(elem_off(x)), mem_of(*ga),
                        cl_long(elem_off(*ga)), mem_of(*bt), cl_long(elem_off(*bt)), mem_of(*d),
                        cl_long(elem_off(*d)), mem_of(y), cl_long(elem_off(y)), st);
    if (e == CL_SUCCESS) e = set_acc(*be, k, 14, dt, eps);
    if (e == CL_SUCCESS) e = set_arg(k, 15, LocalMem{local * acc_size(*be, dt)});
    if (e == CL_SUCCESS && cols)
      e = set_args(cols, rows, len, mem_of(x), cl_long(elem_off(x)), mem_of(*d),
                   cl_long(elem_off(*d)), stats, mem_of(y), cl_long(elem_off(y)));
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override {
    if (ctn_status s = launch_rows(k, rows, local); s) return s;
    if (cols) return launch(cols, len);
    return CTN_OK;
  }
};

ctn_status make_norm(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool ln, int code,
                     uint32_t n_in) {
  const char *op = sig->op;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  if (ctn_status s = need_float(host, "opencl", sig->op, x.dtype); s) return s;
  const double eps = sig->attrs->f[0];
  if (ln) {
    const int64_t a = sig->attrs->i[0];
    int64_t rows = 1, len = 1;
    for (uint32_t k = 0; k < x.ndim; ++k) (static_cast<int64_t>(k) < a ? rows : len) *= x.shape[k];
    const bool gg = code == 2;
    auto st = new_row_op<LayerNormOp>(be, op, x.dtype, code);
    st->rows = rows;
    st->len = len;
    st->eps = eps;
    if (ctn_status s = st->set_meta({0}); s) return s;
    if (!st->make_row_kernel(kname("layer_norm", x.dtype), acc_size(*be, x.dtype), len)) return CTN_ERR_INTERNAL;
    if (gg) {
      st->cols = st->make_kernel(kname("layer_norm_gamma_cols", x.dtype).c_str());
      if (!st->cols) return CTN_ERR_INTERNAL;
      cl_int e = CL_SUCCESS;
      size_t bytes = static_cast<size_t>(std::max<int64_t>(rows, 1)) * 2 * acc_size(*be, x.dtype);
      st->stats = clCreateBuffer(be->context, CL_MEM_READ_WRITE, bytes, nullptr, &e);
      if (e != CL_SUCCESS) return st->fail(e, "statistics buffer");
    }
    op_set(out, st.release());
    return CTN_OK;
  }
  const int64_t outer = x.shape[0], ch = x.shape[1];
  int64_t inner = 1;
  for (uint32_t k = 2; k < x.ndim; ++k) inner *= x.shape[k];
  bool ok = code == kBnGradGamma ? (y.ndim == 1 && y.shape[0] == ch && same_shape(sig->inputs[1], x))
                                 : same_shape(x, y);
  for (uint32_t i = 1; ok && i < n_in; ++i) {
    const ctn_tensor_desc &d = sig->inputs[i];
    const bool full = (code == kBnGradInput && i == 2) || (code == kBnGradGamma && i == 1);
    ok = full ? same_shape(d, x) : (d.ndim == 1 && d.shape[0] == ch);
  }
  auto st = new_row_op<BatchNormOp>(be, op, x.dtype, code);
  st->outer = outer;
  st->ch = ch;
  st->inner = inner;
  st->eps = eps;
  if (!st->make_row_kernel(kname("batch_norm", x.dtype), acc_size(*be, x.dtype), outer * inner))
    return CTN_ERR_INTERNAL;
  op_set(out, st.release());
  return CTN_OK;
}

// ---- embedding --------------------------------------------------------------------------------
struct EmbOp : Op {
  cl_kernel k = nullptr;
  bool grad = false;
  cl_long nids = 0, V = 0, D = 0;
  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    const ctn_tensor_desc &y = a.outputs[0];
    const ctn_tensor_desc &p = a.inputs[0], &q = a.inputs[1];
    cl_int e = set_args(k, nids, V, D, mem_of(p), cl_long(elem_off(p)), mem_of(q),
                        cl_long(elem_off(q)), mem_of(y), cl_long(elem_off(y)), be->err);
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override {
    be->err_armed = true;
    return launch(k, std::max<cl_long>(grad ? V * D : nids * D, grad ? nids : 0));
  }
};

ctn_status make_embedding(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool grad) {
  const char *op = sig->op;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &ids = sig->inputs[grad ? 0 : 1], &vals = sig->inputs[grad ? 1 : 0],
                        &y = *sig->output;
  if (ctn_status s = need_float(host, "opencl", sig->op, vals.dtype); s) return s;
  const ctn_tensor_desc &table = grad ? y : vals;
  auto st = new_state<EmbOp>(be, op);
  st->grad = grad;
  st->V = table.shape[0];
  st->D = table.shape[1];
  st->nids = desc_numel(ids);
  std::string kn = std::string(grad ? "embedding_grad_" : "embedding_") +
                   (ids.dtype == CTN_I32 ? "i32" : "i64") + (vals.dtype == CTN_F64 ? "_f64" : "_f32");
  return op_finish(std::move(st), kn.c_str(), out);
}

}  // namespace

ctn_status make_nn(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const char *op = sig->op;
  *handled = true;
  if (!std::strcmp(op, CTN_OP_CONV2D)) return make_conv(be, sig, out, ConvKind::kForward);
  if (!std::strcmp(op, CTN_OP_CONV2D_GRAD_INPUT) || !std::strcmp(op, CTN_OP_CONV_TRANSPOSE2D))
    return make_conv(be, sig, out, ConvKind::kGradInput);
  if (!std::strcmp(op, CTN_OP_CONV2D_GRAD_WEIGHT)) return make_conv(be, sig, out, ConvKind::kGradWeight);
  if (!std::strcmp(op, CTN_OP_MAX_POOL2D)) return make_pool(be, sig, out, PoolKind::kMax);
  if (!std::strcmp(op, CTN_OP_MAX_POOL2D_GRAD)) return make_pool(be, sig, out, PoolKind::kMaxGrad);
  if (!std::strcmp(op, CTN_OP_AVG_POOL2D)) return make_pool(be, sig, out, PoolKind::kAvg);
  if (!std::strcmp(op, CTN_OP_AVG_POOL2D_GRAD)) return make_pool(be, sig, out, PoolKind::kAvgGrad);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM)) return make_norm(be, sig, out, false, kBn, 3);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM_GRAD_INPUT)) return make_norm(be, sig, out, false, kBnGradInput, 3);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM_GRAD_GAMMA)) return make_norm(be, sig, out, false, kBnGradGamma, 2);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM_INFERENCE)) return make_norm(be, sig, out, false, kBnInference, 5);
  if (!std::strcmp(op, CTN_OP_LAYER_NORM)) return make_norm(be, sig, out, true, 0, 3);
  if (!std::strcmp(op, CTN_OP_LAYER_NORM_GRAD_INPUT)) return make_norm(be, sig, out, true, 1, 3);
  if (!std::strcmp(op, CTN_OP_LAYER_NORM_GRAD_GAMMA)) return make_norm(be, sig, out, true, 2, 2);
  if (!std::strcmp(op, CTN_OP_EMBEDDING)) return make_embedding(be, sig, out, false);
  if (!std::strcmp(op, CTN_OP_EMBEDDING_GRAD)) return make_embedding(be, sig, out, true);
  *handled = false;
  return CTN_OK;
}

}  // namespace ctn_ocl
