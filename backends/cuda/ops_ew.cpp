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
  auto st = new_state<EwState>(be, e->name);
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
      const int32_t to = o.dtype;
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
      st->dtype = sig->inputs[1].dtype;
      break;
    default: {
      const bool ok = e->kind == kCompare ||
                      is_float(dt) ||
                      ((e->kind == kUnaryInt || e->kind == kBinaryInt) && is_int);
      if (!ok)
        return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: dtype %s is not supported (%s)", op,
                               dtype_name(dt),
                               e->kind == kUnaryInt || e->kind == kBinaryInt
                                   ? "f32, f64, i32, i64 only"
                                   : "f32 and f64 only");
      if (e->kind != kCompare && same_shape(sig->inputs[0], o)) flags = CTN_KERNEL_INPLACE_OK;
      break;
    }
  }
  st->g = ew_walk(sig);
  kernel_set(out, ew_kernel, st.release(), flags);
  return CTN_OK;
}

}  // namespace ctn_cuda
