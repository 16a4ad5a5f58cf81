// Shape ops: reshape (a buffer copy), permute / slice / broadcast_to (one gather kernel over an
// index table), slice_grad (clear + scatter), concat (rectangular buffer copies, no kernel).
// They move bits only, so kernels exist per element size, not per dtype.
#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

const char *size_suffix(size_t es) { return es == 1 ? "u8" : es == 4 ? "u32" : "u64"; }

struct WalkOp : Op {
  cl_kernel k = nullptr;
  bool scatter = false, plain_copy = false;
  cl_long n = 0, base = 0;
  cl_int nd = 1;
  size_t es = 4, clear_bytes = 0;
  cl_mem src = nullptr, dst = nullptr;
  size_t src_off = 0, dst_off = 0;
  ctn_status bind(const ctn_kernel_args &a) override {
    const ctn_tensor_desc &x = a.inputs[0], &y = a.outputs[0];
    if (ctn_status s = check_offset(be, name, x); s) return s;
    if (ctn_status s = check_offset(be, name, y); s) return s;
    src = mem_of(x);
    dst = mem_of(y);
    src_off = x.offset;
    dst_off = y.offset;
    if (plain_copy) return CTN_OK;
    cl_int e = set_args(k, n, nd, meta, base, src, cl_long(elem_off(x)), dst, cl_long(elem_off(y)));
    return e == CL_SUCCESS ? CTN_OK : fail(e, "clSetKernelArg");
  }
  ctn_status enqueue() override {
    cl_int e = CL_SUCCESS;
    if (plain_copy) {
      if (!clear_bytes || (src == dst && src_off == dst_off)) return CTN_OK;
      e = clEnqueueCopyBuffer(be->queue, src, dst, src_off, dst_off, clear_bytes, 0, nullptr, nullptr);
      return e == CL_SUCCESS ? CTN_OK : fail(e, "clEnqueueCopyBuffer");
    }
    if (scatter && clear_bytes) {
      const cl_uchar zero = 0;
      e = clEnqueueFillBuffer(be->queue, dst, &zero, 1, dst_off, clear_bytes, 0, nullptr, nullptr);
      if (e != CL_SUCCESS) return fail(e, "clEnqueueFillBuffer");
    }
    return launch(k, n);
  }
};

struct ConcatOp : Op {
  int64_t outer = 0, out_row = 0;
  std::vector<int64_t> chunk;
  std::vector<cl_mem> srcs;
  std::vector<size_t> src_offs;
  cl_mem dst = nullptr;
  size_t dst_off = 0;
  ctn_status bind(const ctn_kernel_args &a) override {
    srcs.clear();
    src_offs.clear();
    for (uint32_t i = 0; i < a.n_inputs; ++i) {
      if (!a.inputs[i].data) return check_offset(be, name, a.inputs[i]);
      srcs.push_back(mem_of(a.inputs[i]));
      src_offs.push_back(a.inputs[i].offset);
    }
    if (ctn_status s = check_offset(be, name, a.outputs[0]); s) return s;
    dst = mem_of(a.outputs[0]);
    dst_off = a.outputs[0].offset;
    return CTN_OK;
  }
  ctn_status enqueue() override {
    int64_t col = 0;
    for (size_t i = 0; i < chunk.size(); ++i) {
      const int64_t c = chunk[i];
      if (c > 0 && outer > 0) {
        // A 2-d copy: `outer` rows of c bytes, pitches c (source) and out_row (destination).
        size_t so[3] = {src_offs[i], 0, 0}, d[3] = {dst_off + static_cast<size_t>(col), 0, 0};
        size_t region[3] = {static_cast<size_t>(c), static_cast<size_t>(outer), 1};
        cl_int e = clEnqueueCopyBufferRect(be->queue, srcs[i], dst, so, d, region,
                                           static_cast<size_t>(c), 0,
                                           static_cast<size_t>(out_row), 0, 0, nullptr, nullptr);
        if (e != CL_SUCCESS) return fail(e, "clEnqueueCopyBufferRect");
      }
      col += c;
    }
    return CTN_OK;
  }
};

void coalesce(std::vector<int64_t> *shape, std::vector<int64_t> *str, uint32_t ndim,
              const int64_t *sh, const int64_t *st) {
  ctn_backend_util::DimWalk w;
  ctn_backend_util::coalesce(w, ndim, sh, st);
  shape->assign(w.shape, w.shape + w.nd);
  str->assign(w.str, w.str + w.nd);
}

}  // namespace

ctn_status make_shape(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const char *op = sig->op;
  enum { kReshape, kPermute, kSlice, kSliceGrad, kConcat, kBroadcast } kind;
  if (!std::strcmp(op, CTN_OP_RESHAPE)) kind = kReshape;
  else if (!std::strcmp(op, CTN_OP_PERMUTE)) kind = kPermute;
  else if (!std::strcmp(op, CTN_OP_SLICE)) kind = kSlice;
  else if (!std::strcmp(op, CTN_OP_SLICE_GRAD)) kind = kSliceGrad;
  else if (!std::strcmp(op, CTN_OP_CONCAT)) kind = kConcat;
  else if (!std::strcmp(op, CTN_OP_BROADCAST_TO)) kind = kBroadcast;
  else return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_attrs &at = *sig->attrs;
  const ctn_tensor_desc &y = *sig->output;
  if (sig->n_inputs < 1 || (kind != kConcat && sig->n_inputs != 1))
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl %s: wrong number of inputs", op);
  const ctn_tensor_desc &x = sig->inputs[0];
  for (uint32_t i = 0; i < sig->n_inputs; ++i)
    if (sig->inputs[i].dtype != y.dtype)
      return host->set_error(CTN_ERR_DTYPE, "opencl %s: input %u dtype differs from the output", op, i);
  const size_t es = dtype_size(y.dtype);
  auto bad_shape = [&](const ctn_tensor_desc &want) {
    return host->set_error(CTN_ERR_SHAPE, "opencl %s: output shape %s, expected %s", op,
                           shape_str(y).c_str(), shape_str(want).c_str());
  };
  if (kind == kConcat) {
    int64_t axis = at.i[0];
    if (axis < 0 || axis >= static_cast<int64_t>(x.ndim))
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl concat: axis out of range");
    auto cs = std::make_unique<ConcatOp>();
    cs->be = be;
    cs->name = CTN_OP_CONCAT;
    ctn_tensor_desc want = x;
    want.shape[axis] = 0;
    int64_t inner = static_cast<int64_t>(es);
    for (uint32_t k = static_cast<uint32_t>(axis) + 1; k < x.ndim; ++k) inner *= x.shape[k];
    for (uint32_t i = 0; i < sig->n_inputs; ++i) {
      const ctn_tensor_desc &in = sig->inputs[i];
      bool ok = in.ndim == x.ndim;
      for (uint32_t k = 0; ok && k < x.ndim; ++k)
        ok = k == static_cast<uint32_t>(axis) || in.shape[k] == x.shape[k];
      if (!ok) return host->set_error(CTN_ERR_SHAPE, "opencl concat: input %u does not match", i);
      want.shape[axis] += in.shape[axis];
      cs->chunk.push_back(in.shape[axis] * inner);
    }
    if (!same_shape(want, y)) return bad_shape(want);
    cs->outer = 1;
    for (int64_t k = 0; k < axis; ++k) cs->outer *= x.shape[k];
    cs->out_row = want.shape[axis] * inner;
    op_set(out, cs.release());
    return CTN_OK;
  }
  auto st = std::make_unique<WalkOp>();
  st->be = be;
  st->name = sig->op;
  st->es = es;
  int64_t istr[CTN_MAX_DIMS];
  contiguous_strides(x, istr);
  std::vector<int64_t> shape, str;
  ctn_tensor_desc want{};
  want.ndim = x.ndim;
  switch (kind) {
    case kReshape:
      if (desc_numel(x) != desc_numel(y))
        return host->set_error(CTN_ERR_SHAPE, "opencl reshape: %s -> %s changes the element count",
                               shape_str(x).c_str(), shape_str(y).c_str());
      st->plain_copy = true;
      st->clear_bytes = static_cast<size_t>(desc_numel(x)) * es;
      op_set(out, st.release(), CTN_KERNEL_INPLACE_OK);
      return CTN_OK;
    case kPermute: {
      int64_t pstr[CTN_MAX_DIMS];
      uint32_t seen = 0;
      if (at.ni != x.ndim) return bad_shape(x);
      for (uint32_t k = 0; k < x.ndim; ++k) {
        int64_t p = at.i[k];
        if (p < 0 || p >= static_cast<int64_t>(x.ndim) || ((seen >> p) & 1))
          return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl permute: bad permutation");
        seen |= 1u << p;
        want.shape[k] = x.shape[p];
        pstr[k] = istr[p];
      }
      if (!same_shape(want, y)) return bad_shape(want);
      st->n = desc_numel(y);
      coalesce(&shape, &str, y.ndim, y.shape, pstr);
      break;
    }
    case kSlice:
    case kSliceGrad: {
      const ctn_tensor_desc &full = kind == kSlice ? x : y;
      const ctn_tensor_desc &part = kind == kSlice ? y : x;
      int64_t axis = at.i[0], start = at.i[1], stop = at.i[2], step = at.i[3];
      if (axis < 0 || axis >= static_cast<int64_t>(full.ndim) || step <= 0 || start < 0 ||
          stop < start || stop > full.shape[axis] ||
          (kind == kSliceGrad && at.i[4] != full.shape[axis]))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl %s: bad axis/start/stop/step", op);
      want = full;
      want.shape[axis] = (stop - start + step - 1) / step;
      if (!same_shape(want, part)) return bad_shape(want);
      int64_t fstr[CTN_MAX_DIMS];
      contiguous_strides(full, fstr);
      st->base = start * fstr[axis];
      fstr[axis] *= step;
      st->n = desc_numel(part);
      st->scatter = kind == kSliceGrad;
      st->clear_bytes = static_cast<size_t>(desc_numel(full)) * es;
      coalesce(&shape, &str, part.ndim, part.shape, fstr);
      break;
    }
    case kBroadcast: {
      int64_t bstr[CTN_MAX_DIMS];
      if (!broadcast_strides(x, y, bstr))
        return host->set_error(CTN_ERR_SHAPE, "opencl broadcast_to: %s does not broadcast to %s",
                               shape_str(x).c_str(), shape_str(y).c_str());
      st->n = desc_numel(y);
      coalesce(&shape, &str, y.ndim, y.shape, bstr);
      break;
    }
    case kConcat: break;
  }
  st->nd = static_cast<cl_int>(shape.size());
  std::vector<int64_t> meta = shape;
  meta.insert(meta.end(), str.begin(), str.end());
  if (ctn_status s = st->set_meta(meta); s) return s;
  std::string kname = std::string(st->scatter ? "scatter_" : "gather_") + size_suffix(es);
  st->k = st->make_kernel(kname.c_str());
  if (!st->k) return CTN_ERR_INTERNAL;
  op_set(out, st.release());
  return CTN_OK;
}

}  // namespace ctn_ocl
