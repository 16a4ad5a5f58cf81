// get_kernel for reductions (sum, mean, max), the softmax family and cross-entropy.
#include "cuda_backend.h"
#include "cuda_kernels.h"

namespace ctn_cuda {
namespace {

struct RedState : KernelBase {
  int kind = 0, dtype = 0;
  RedGeom g;
  bool identity = false;  // nothing reduced (0-d input, size-1 axes): a copy of `bytes`
  int64_t bytes = 0;
};

ctn_status reduce_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const RedState *>(state);
  void *o = dptr(args->outputs[0]);
  const void *x = dptr(args->inputs[0]);
  if (st->identity) {
    if (o != x && st->bytes) {
      cudaError_t e = cudaMemcpyAsync(o, x, static_cast<size_t>(st->bytes),
                                      cudaMemcpyDeviceToDevice, st->be->stream);
      if (e != cudaSuccess) return cuda_fail(st->be, e, st->op);
    }
    return CTN_OK;
  }
  launch_reduce(st->be->stream, st->kind, st->dtype, st->g, o, x);
  return check_launch(st->be, st->op);
}

// Splits the input's dims into kept and reduced groups, merging neighbours of the same group
// whose strides chain (so [N, C] summed over N is one kept and one reduced dim).
void build_geom(const ctn_tensor_desc &x, uint64_t mask, RedGeom &g) {
  int64_t strides[CTN_MAX_DIMS];
  int64_t s = 1;
  for (int k = static_cast<int>(x.ndim) - 1; k >= 0; --k) {
    strides[k] = s;
    s *= x.shape[k];
  }
  int last = -1;  // 0 kept, 1 reduced
  for (uint32_t k = 0; k < x.ndim; ++k) {
    if (x.shape[k] == 1) continue;
    const int grp = (mask >> k) & 1u ? 1 : 0;
    int64_t *shape = grp ? g.rshape : g.kshape;
    int64_t *str = grp ? g.rstr : g.kstr;
    int &nd = grp ? g.nr : g.nk;
    if (last == grp && nd > 0 && str[nd - 1] == strides[k] * x.shape[k]) {
      shape[nd - 1] *= x.shape[k];
      str[nd - 1] = strides[k];
    } else {
      shape[nd] = x.shape[k];
      str[nd] = strides[k];
      ++nd;
    }
    last = grp;
  }
  g.n_out = 1;
  for (int k = 0; k < g.nk; ++k) g.n_out *= g.kshape[k];
  g.n_red = 1;
  for (int k = 0; k < g.nr; ++k) g.n_red *= g.rshape[k];
}

struct SoftmaxState : KernelBase {
  int mode = 0, dtype = 0;
  int64_t outer = 1, len = 1, inner = 1;
};

ctn_status softmax_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const SoftmaxState *>(state);
  launch_softmax(st->be->stream, st->mode, st->dtype, st->outer, st->len, st->inner,
                 dptr(args->outputs[0]), dptr(args->inputs[0]),
                 args->n_inputs > 1 ? dptr(args->inputs[1]) : nullptr);
  return check_launch(st->be, st->op);
}

struct CeState : KernelBase {
  bool grad = false;
  int dtype = 0, label_dtype = 0;
  int64_t n = 0, c = 0;
};

ctn_status ce_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const CeState *>(state);
  Backend *be = st->be;
  if (st->grad)
    launch_cross_entropy_grad(be->stream, st->dtype, st->label_dtype, st->n, st->c,
                              dptr(args->inputs[0]), dptr(args->inputs[1]),
                              dptr(args->inputs[2]), dptr(args->outputs[0]), be->err_dev);
  else
    launch_cross_entropy(be->stream, st->dtype, st->label_dtype, st->n, st->c,
                         dptr(args->inputs[0]), dptr(args->inputs[1]), args->workspace,
                         dptr(args->outputs[0]), be->err_dev);
  return check_launch(be, st->op);
}

}  // namespace

ctn_status make_reduce_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                              bool *handled) {
  const char *op = sig->op;
  const ctn_host_api *host = be->host;
  int kind = -1;
  if (!std::strcmp(op, CTN_OP_SUM)) kind = 0;
  else if (!std::strcmp(op, CTN_OP_MEAN)) kind = 1;
  else if (!std::strcmp(op, CTN_OP_MAX)) kind = 2;
  if (kind >= 0) {
    *handled = true;
    const ctn_tensor_desc &x = sig->inputs[0];
    const bool ok = is_float(x.dtype) || (kind != 1 && (x.dtype == CTN_I32 || x.dtype == CTN_I64));
    if (!ok)
      return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: dtype %s is not supported", op,
                             dtype_name(x.dtype));
    auto st = new_state<RedState>(be, kind == 0 ? CTN_OP_SUM : kind == 1 ? CTN_OP_MEAN : CTN_OP_MAX);
    st->kind = kind;
    st->dtype = x.dtype;
    const uint64_t mask = static_cast<uint64_t>(sig->attrs->i[0]);
    if (mask == 0 || desc_numel(x) == desc_numel(*sig->output)) {
      // Nothing is reduced (0-d input or size-1 axes only): the identity.
      st->identity = true;
      st->bytes = desc_numel(x) * static_cast<int64_t>(dtype_size(x.dtype));
    } else {
      build_geom(x, mask, st->g);
      if (st->g.n_red == 0 && kind == 2)
        return host->set_error(CTN_ERR_UNSUPPORTED, "cuda max: a reduction over an empty axis is not supported");
    }
    kernel_set(out, reduce_kernel, st.release());
    return CTN_OK;
  }

  int mode = -1;
  if (!std::strcmp(op, CTN_OP_SOFTMAX)) mode = 0;
  else if (!std::strcmp(op, CTN_OP_LOG_SOFTMAX)) mode = 1;
  else if (!std::strcmp(op, CTN_OP_SOFTMAX_GRAD)) mode = 2;
  else if (!std::strcmp(op, CTN_OP_LOG_SOFTMAX_GRAD)) mode = 3;
  if (mode >= 0) {
    *handled = true;
    const ctn_tensor_desc &x = sig->inputs[0];
    if (ctn_status s = need_float(host, "cuda", sig->op, x.dtype); s) return s;
    const int64_t axis = sig->attrs->i[0];
    auto st = new_state<SoftmaxState>(be, mode == 0   ? CTN_OP_SOFTMAX
             : mode == 1 ? CTN_OP_LOG_SOFTMAX
             : mode == 2 ? CTN_OP_SOFTMAX_GRAD
                         : CTN_OP_LOG_SOFTMAX_GRAD);
    st->mode = mode;
    st->dtype = x.dtype;
    for (int64_t k = 0; k < axis; ++k) st->outer *= x.shape[k];
    st->len = x.shape[axis];
    for (int64_t k = axis + 1; k < static_cast<int64_t>(x.ndim); ++k) st->inner *= x.shape[k];
    kernel_set(out, softmax_kernel, st.release());
    return CTN_OK;
  }

  const bool grad = !std::strcmp(op, CTN_OP_CROSS_ENTROPY_GRAD);
  if (grad || !std::strcmp(op, CTN_OP_CROSS_ENTROPY)) {
    *handled = true;
    const ctn_tensor_desc &lg = sig->inputs[0], &lb = sig->inputs[1];
    if (ctn_status s = need_float(host, "cuda", sig->op, lg.dtype); s) return s;
    auto st = new_state<CeState>(be, grad ? CTN_OP_CROSS_ENTROPY_GRAD : CTN_OP_CROSS_ENTROPY);
    st->grad = grad;
    st->dtype = lg.dtype;
    st->label_dtype = lb.dtype;
    st->n = lg.shape[0];
    st->c = lg.shape[1];
    const uint64_t ws = grad ? 0 : static_cast<uint64_t>(st->n > 0 ? st->n : 1) * dtype_size(lg.dtype);
    kernel_set(out, ce_kernel, st.release(), 0, ws);
    return CTN_OK;
  }
  return CTN_OK;
}

}  // namespace ctn_cuda
