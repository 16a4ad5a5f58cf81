// get_kernel for elementwise ops: the broadcast walk is computed here once (EwGeom) and the
// kernel call is a pointer fetch plus one launch.
#include <algorithm>

#include "cuda_backend.h"
#include "cuda_ew_ops.h"
#include "cuda_kernels.h"

namespace ctn_cuda {
namespace {

enum Kind { kUnary, kUnaryInt, kBinary, kBinaryInt, kGrad, kCompare, kWhere, kCast, kCopy };

struct OpEntry {
  const char *name;
  Kind kind;
  int code;
};

// Unary, binary, backward-helper and compare ops come from the generated list (cuda_ew_ops.h);
// where, cast and copy have their own kernels.
bool find_entry(const char *op, OpEntry *e) {
  if (const ctn_ew::Op *o = ctn_ew::find(op)) {
    Kind k = kCompare;
    switch (o->group) {
      case ctn_ew::kUnary: k = o->ints ? kUnaryInt : kUnary; break;
      case ctn_ew::kBinary: k = o->ints ? kBinaryInt : kBinary; break;
      case ctn_ew::kGrad: k = kGrad; break;
      default: k = kCompare; break;
    }
    *e = {o->name, k, o->code};
    return true;
  }
  static const OpEntry kOther[] = {
      {CTN_OP_WHERE, kWhere, 0}, {CTN_OP_CAST, kCast, 0}, {CTN_OP_COPY, kCopy, 0}};
  for (const OpEntry &c : kOther)
    if (!std::strcmp(c.name, op)) {
      *e = c;
      return true;
    }
  return false;
}

struct EwState : KernelBase {
  Kind kind = kUnary;
  int code = 0;
  int dtype = 0, to = 0;
  double f0 = 0, f1 = 0;
  int64_t bytes = 0;  // copy
  EwGeom g;
};

ctn_status ew_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const EwState *>(state);
  Backend *be = st->be;
  cudaStream_t s = be->stream;
  void *o = dptr(args->outputs[0]);
  const void *a = dptr(args->inputs[0]);
  switch (st->kind) {
    case kCopy:
      if (o != a && st->bytes) {
        cudaError_t e = cudaMemcpyAsync(o, a, static_cast<size_t>(st->bytes),
                                        cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess) return cuda_fail(be, e, st->op);
      }
      return CTN_OK;
    case kCast: launch_cast(s, st->dtype, st->to, st->g.n, o, a); break;
    case kUnary:
    case kUnaryInt: launch_unary(s, st->code, st->dtype, st->g, o, a, st->f0, st->f1, be->err_dev); break;
    case kBinary:
    case kBinaryInt:
    case kGrad:
      launch_binary(s, st->code, st->dtype, st->g, o, a, dptr(args->inputs[1]), st->f0, st->f1,
                    be->err_dev);
      break;
    case kCompare:
      launch_compare(s, st->code, st->dtype, st->g, o, a, dptr(args->inputs[1]), be->err_dev);
      break;
    case kWhere:
      launch_where(s, static_cast<int>(dtype_size(st->dtype)), st->g, o, a,
                   dptr(args->inputs[1]), dptr(args->inputs[2]));
      break;
  }
  return check_launch(be, st->op);
}

// Broadcast walk: flat when every input is the output's size or one element, otherwise the
// output's dims with size-1 dims dropped and chained neighbours merged.
ctn_status setup_geom(Backend *be, EwGeom &g, const ctn_op_signature *sig) {
  const ctn_tensor_desc &out = *sig->output;
  g.nin = static_cast<int>(sig->n_inputs);
  g.n = desc_numel(out);
  int64_t full[3][CTN_MAX_DIMS] = {};
  for (int j = 0; j < g.nin; ++j) {
    const ctn_tensor_desc &in = sig->inputs[j];
    if (!broadcast_strides(in, out, full[j]))
      return be->host->set_error(CTN_ERR_SHAPE, "cuda %s: input %d %s does not broadcast to %s",
                                 sig->op, j, shape_str(in).c_str(), shape_str(out).c_str());
    int64_t numel = desc_numel(in);
    g.mode[j] = numel == g.n ? 0 : numel == 1 ? 1 : 2;
    if (g.mode[j] == 2) g.general = true;
  }
  if (!g.general) return CTN_OK;
  int nd = 0;
  for (uint32_t k = 0; k < out.ndim; ++k) {
    if (out.shape[k] == 1) continue;
    bool merge = nd > 0;
    for (int j = 0; merge && j < g.nin; ++j) merge = g.str[j][nd - 1] == full[j][k] * out.shape[k];
    if (merge) {
      g.shape[nd - 1] *= out.shape[k];
      for (int j = 0; j < g.nin; ++j) g.str[j][nd - 1] = full[j][k];
    } else {
      g.shape[nd] = out.shape[k];
      for (int j = 0; j < g.nin; ++j) g.str[j][nd] = full[j][k];
      ++nd;
    }
  }
  if (nd == 0) {
    g.shape[0] = 1;
    nd = 1;
  }
  g.nd = nd;
  return CTN_OK;
}

}  // namespace

ctn_status make_elementwise_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                                   bool *handled) {
  OpEntry entry;
  if (!find_entry(sig->op, &entry)) return CTN_OK;
  const OpEntry *e = &entry;
  *handled = true;
  const ctn_host_api *host = be->host;
  const char *op = sig->op;
  const ctn_tensor_desc &o = *sig->output;
  const uint32_t want_in = e->kind == kWhere ? 3
                           : (e->kind == kUnary || e->kind == kUnaryInt || e->kind == kCast ||
                              e->kind == kCopy)
                               ? 1
                               : 2;
  if (sig->n_inputs != want_in)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cuda %s: expects %u inputs, got %u", op,
                           want_in, sig->n_inputs);
  auto st = std::make_unique<EwState>();
  st->be = be;
  st->op = e->name;
  st->kind = e->kind;
  st->code = e->code;
  st->f0 = sig->attrs->f[0];
  st->f1 = sig->attrs->f[1];
  const int32_t dt = sig->inputs[0].dtype;
  st->dtype = dt;
  const bool is_int = dt == CTN_I32 || dt == CTN_I64;
  uint32_t flags = 0;
  switch (e->kind) {
    case kCopy:
    case kCast: {
      if (!same_shape(sig->inputs[0], o))
        return host->set_error(CTN_ERR_SHAPE, "cuda %s: output %s differs from input %s", op,
                               shape_str(o).c_str(), shape_str(sig->inputs[0]).c_str());
      const int32_t to = e->kind == kCast ? static_cast<int32_t>(sig->attrs->i[0]) : dt;
      if (o.dtype != to)
        return host->set_error(CTN_ERR_DTYPE, "cuda %s: output dtype %s, expected %s", op,
                               dtype_name(o.dtype), dtype_name(to));
      st->to = to;
      st->g.n = desc_numel(o);
      if (to == dt) {
        st->kind = kCopy;
        st->bytes = st->g.n * static_cast<int64_t>(dtype_size(dt));
        flags = CTN_KERNEL_INPLACE_OK;
      }
      kernel_set(out, ew_kernel, st.release(), flags);
      return CTN_OK;
    }
    case kWhere:
      if (dt != CTN_BOOL)
        return host->set_error(CTN_ERR_DTYPE, "cuda where: condition must be bool, got %s",
                               dtype_name(dt));
      st->dtype = sig->inputs[1].dtype;
      if (sig->inputs[2].dtype != st->dtype || o.dtype != st->dtype)
        return host->set_error(CTN_ERR_DTYPE, "cuda where: a, b and output dtypes differ");
      break;
    default: {
      if (sig->n_inputs == 2 && sig->inputs[1].dtype != dt)
        return host->set_error(CTN_ERR_DTYPE, "cuda %s: input dtypes differ (%s vs %s)", op,
                               dtype_name(dt), dtype_name(sig->inputs[1].dtype));
      const int32_t want_out = e->kind == kCompare ? CTN_BOOL : dt;
      if (o.dtype != want_out)
        return host->set_error(CTN_ERR_DTYPE, "cuda %s: output dtype %s, expected %s", op,
                               dtype_name(o.dtype), dtype_name(want_out));
      const bool ok = e->kind == kCompare ||
                      is_float(dt) ||
                      ((e->kind == kUnaryInt || e->kind == kBinaryInt) && is_int);
      if (!ok)
        return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: dtype %s is not supported (%s)", op,
                               dtype_name(dt),
                               e->kind == kUnaryInt || e->kind == kBinaryInt
                                   ? "f32, f64, i32, i64 only"
                                   : "f32 and f64 only");
      if (e->kind == kUnary || e->kind == kUnaryInt || e->kind == kGrad)
        for (uint32_t i = 0; i < sig->n_inputs; ++i)
          if (!same_shape(sig->inputs[i], o))
            return host->set_error(CTN_ERR_SHAPE, "cuda %s: input %u %s must have the output shape %s",
                                   op, i, shape_str(sig->inputs[i]).c_str(), shape_str(o).c_str());
      if (e->kind != kCompare && same_shape(sig->inputs[0], o)) flags = CTN_KERNEL_INPLACE_OK;
      break;
    }
  }
  if (ctn_status s = setup_geom(be, st->g, sig); s) return s;
  kernel_set(out, ew_kernel, st.release(), flags);
  return CTN_OK;
}

}  // namespace ctn_cuda
