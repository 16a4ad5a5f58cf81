// get_kernel for shape ops. Every one is a strided copy (CopyGeom) or a device memcpy: reshape
// and copy-like cases move bytes, permute/slice/broadcast_to read through strides, concat and
// slice_grad write through them.
#include "cuda_backend.h"
#include "cuda_kernels.h"

namespace ctn_cuda {
namespace {

struct CopyPart {
  CopyGeom g;
  int64_t src_off = 0, dst_off = 0;  // bytes
  uint32_t input = 0;
};

struct ShapeState : KernelBase {
  int elem = 1;
  int64_t memcpy_bytes = -1;  // >= 0: plain copy of input 0
  int64_t zero_bytes = 0;     // memset of the output first (slice_grad)
  std::vector<CopyPart> parts;
};

ctn_status shape_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const ShapeState *>(state);
  cudaStream_t s = st->be->stream;
  char *o = dptr<char>(args->outputs[0]);
  if (st->memcpy_bytes >= 0) {
    const char *x = dptr<const char>(args->inputs[0]);
    if (o != x && st->memcpy_bytes) {
      cudaError_t e = cudaMemcpyAsync(o, x, static_cast<size_t>(st->memcpy_bytes),
                                      cudaMemcpyDeviceToDevice, s);
      if (e != cudaSuccess) return cuda_fail(st->be, e, st->op);
    }
    return CTN_OK;
  }
  if (st->zero_bytes) {
    cudaError_t e = cudaMemsetAsync(o, 0, static_cast<size_t>(st->zero_bytes), s);
    if (e != cudaSuccess) return cuda_fail(st->be, e, st->op);
  }
  for (const CopyPart &p : st->parts)
    launch_strided_copy(s, st->elem, p.g, o + p.dst_off,
                        dptr<const char>(args->inputs[p.input]) + p.src_off);
  return check_launch(st->be, st->op);
}

// Drops size-1 dims and merges neighbours whose source and destination strides both chain.
CopyGeom make_geom(uint32_t nd, const int64_t *shape, const int64_t *sstr, const int64_t *dstr) {
  CopyGeom g;
  g.n = 1;
  for (uint32_t k = 0; k < nd; ++k) {
    g.n *= shape[k];
    if (shape[k] == 1) continue;
    if (g.nd > 0 && g.sstr[g.nd - 1] == sstr[k] * shape[k] && g.dstr[g.nd - 1] == dstr[k] * shape[k]) {
      g.shape[g.nd - 1] *= shape[k];
      g.sstr[g.nd - 1] = sstr[k];
      g.dstr[g.nd - 1] = dstr[k];
    } else {
      g.shape[g.nd] = shape[k];
      g.sstr[g.nd] = sstr[k];
      g.dstr[g.nd] = dstr[k];
      ++g.nd;
    }
  }
  if (g.nd == 0) {
    g.nd = 1;
    g.shape[0] = 1;
    g.sstr[0] = g.dstr[0] = 0;
  }
  return g;
}

}  // namespace

ctn_status make_shape_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                             bool *handled) {
  const char *op = sig->op;
  static const char *const names[] = {CTN_OP_RESHAPE, CTN_OP_PERMUTE, CTN_OP_SLICE,
                                      CTN_OP_SLICE_GRAD, CTN_OP_CONCAT, CTN_OP_BROADCAST_TO};
  const char *name = nullptr;
  for (const char *n : names)
    if (!std::strcmp(n, op)) name = n;
  if (!name) return CTN_OK;
  *handled = true;
  const ctn_tensor_desc &o = *sig->output;
  auto st = new_state<ShapeState>(be, name);
  st->elem = static_cast<int>(dtype_size(o.dtype));
  const int64_t es = st->elem;
  const ctn_tensor_desc &x = sig->inputs[0];
  const ctn_attrs &at = *sig->attrs;
  int64_t xs[CTN_MAX_DIMS], os[CTN_MAX_DIMS];
  contiguous_strides(x, xs);
  contiguous_strides(o, os);

  if (!std::strcmp(name, CTN_OP_RESHAPE)) {
    st->memcpy_bytes = desc_numel(o) * es;
    kernel_set(out, shape_kernel, st.release(), CTN_KERNEL_INPLACE_OK);
    return CTN_OK;
  }
  CopyPart p;
  if (!std::strcmp(name, CTN_OP_PERMUTE)) {
    int64_t sstr[CTN_MAX_DIMS];
    for (uint32_t k = 0; k < o.ndim; ++k) sstr[k] = xs[at.i[k]];
    p.g = make_geom(o.ndim, o.shape, sstr, os);
  } else if (!std::strcmp(name, CTN_OP_BROADCAST_TO)) {
    int64_t sstr[CTN_MAX_DIMS];
    broadcast_strides(x, o, sstr);
    p.g = make_geom(o.ndim, o.shape, sstr, os);
  } else if (!std::strcmp(name, CTN_OP_SLICE) || !std::strcmp(name, CTN_OP_SLICE_GRAD)) {
    const int64_t axis = at.i[0], start = at.i[1], step = at.i[3];
    const bool grad = !std::strcmp(name, CTN_OP_SLICE_GRAD);
    const ctn_tensor_desc &big = grad ? o : x;
    const ctn_tensor_desc &small = grad ? x : o;
    int64_t bs[CTN_MAX_DIMS], ss[CTN_MAX_DIMS];
    contiguous_strides(big, bs);
    contiguous_strides(small, ss);
    int64_t view[CTN_MAX_DIMS];  // the slice as a view of the big tensor
    for (uint32_t k = 0; k < big.ndim; ++k) view[k] = bs[k];
    view[axis] = bs[axis] * step;
    const int64_t base = (small.shape[axis] > 0 ? start : 0) * bs[axis] * es;
    if (grad) {
      st->zero_bytes = desc_numel(o) * es;
      p.g = make_geom(small.ndim, small.shape, ss, view);
      p.dst_off = base;
    } else {
      p.g = make_geom(small.ndim, small.shape, view, ss);
      p.src_off = base;
    }
  } else {  // concat
    const int64_t axis = at.i[0];
    int64_t at_axis = 0;
    for (uint32_t i = 0; i < sig->n_inputs; ++i) {
      const ctn_tensor_desc &in = sig->inputs[i];
      int64_t is[CTN_MAX_DIMS];
      contiguous_strides(in, is);
      CopyPart q;
      q.input = i;
      q.g = make_geom(in.ndim, in.shape, is, os);
      q.dst_off = at_axis * os[axis] * es;
      at_axis += in.shape[axis];
      if (q.g.n) st->parts.push_back(q);
    }
    kernel_set(out, shape_kernel, st.release());
    return CTN_OK;
  }
  if (p.g.n) st->parts.push_back(p);
  kernel_set(out, shape_kernel, st.release());
  return CTN_OK;
}

}  // namespace ctn_cuda
