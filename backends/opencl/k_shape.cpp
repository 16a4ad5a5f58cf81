// Shape ops: reshape (a buffer copy), permute / slice / broadcast_to (one gather kernel over an
// index table), slice_grad (clear + scatter), concat (rectangular buffer copies, no kernel).
// They move bits only, so kernels exist per element size, not per dtype.
#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

const char *size_suffix(size_t es) {
  return es == 1 ? "u8" : es == 2 ? "u16" : es == 4 ? "u32" : "u64";
}

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
    if (ctn_status s = check_offset(be, op, x); s) return s;
    if (ctn_status s = check_offset(be, op, y); s) return s;
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
      if (!a.inputs[i].data) return check_offset(be, op, a.inputs[i]);
      srcs.push_back(mem_of(a.inputs[i]));
      src_offs.push_back(a.inputs[i].offset);
    }
    if (ctn_status s = check_offset(be, op, a.outputs[0]); s) return s;
    dst = mem_of(a.outputs[0]);
    dst_off = a.outputs[0].offset;
    return CTN_OK;
  }
  // Input i's `outer` rows of c bytes to column byte `col` of the output's rows (pitch out_row).
  // One row, or the whole input when its rows are the output's (the same pitch), is a plain
  // copy. Otherwise a 2-d copy, unless source and destination are one buffer (operands in the
  // plan's arena): OpenCL refuses a rectangle copy within one buffer whose pitches differ
  // (CL_INVALID_VALUE), so those go row by row.
  ctn_status copy_chunk(size_t i, int64_t c, int64_t col) {
    const size_t rows = static_cast<size_t>(outer), bytes = static_cast<size_t>(c), pitch = static_cast<size_t>(out_row);
    if (rows == 1 || bytes == pitch || srcs[i] == dst) {
      const size_t runs = bytes == pitch ? 1 : rows, len = bytes == pitch ? bytes * rows : bytes;
      for (size_t r = 0; r < runs; ++r) {
        cl_int e = clEnqueueCopyBuffer(be->queue, srcs[i], dst, src_offs[i] + r * bytes,
                                       dst_off + static_cast<size_t>(col) + r * pitch, len, 0, nullptr, nullptr);
        if (e != CL_SUCCESS) return fail(e, "clEnqueueCopyBuffer");
      }
      return CTN_OK;
    }
    size_t so[3] = {src_offs[i], 0, 0}, d[3] = {dst_off + static_cast<size_t>(col), 0, 0};
    size_t region[3] = {bytes, rows, 1};
    cl_int e = clEnqueueCopyBufferRect(be->queue, srcs[i], dst, so, d, region, bytes, 0, pitch, 0, 0, nullptr, nullptr);
    if (e != CL_SUCCESS) return fail(e, "clEnqueueCopyBufferRect");
    return CTN_OK;
  }
  ctn_status enqueue() override {
    int64_t col = 0;
    for (size_t i = 0; i < chunk.size(); ++i) {
      const int64_t c = chunk[i];
      if (c > 0 && outer > 0) {
        if (ctn_status s = copy_chunk(i, c, col); s) return s;
      }
      col += c;
    }
    return CTN_OK;
  }
};

}  // namespace

ctn_status make_shape(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const ShapeKind kind = shape_kind(sig->op);
  if (kind == ShapeKind::kNone) return CTN_OK;
  *handled = true;
  const ctn_tensor_desc &y = *sig->output;
  const size_t es = dtype_size(y.dtype);
  if (kind == ShapeKind::kConcat) {
    const ConcatPlan plan = concat_plan(sig);
    auto cs = new_state<ConcatOp>(be, CTN_OP_CONCAT);
    cs->outer = plan.outer;
    cs->out_row = plan.row * static_cast<int64_t>(es);
    for (int64_t c : plan.chunk) cs->chunk.push_back(c * static_cast<int64_t>(es));
    op_set(out, cs.release());
    return CTN_OK;
  }
  auto st = new_state<WalkOp>(be, sig->op);
  st->es = es;
  const ShapeWalk w = shape_walk(sig, kind);
  if (kind == ShapeKind::kReshape) {
    st->plain_copy = true;
    st->clear_bytes = static_cast<size_t>(w.n) * es;
    op_set(out, st.release(), CTN_KERNEL_INPLACE_OK);
    return CTN_OK;
  }
  st->n = w.n;
  st->base = w.base;
  st->scatter = w.scatter;
  st->clear_bytes = static_cast<size_t>(w.full) * es;
  st->nd = static_cast<cl_int>(w.walk.nd);
  std::vector<int64_t> meta(w.walk.shape, w.walk.shape + w.walk.nd);
  meta.insert(meta.end(), w.walk.str, w.walk.str + w.walk.nd);
  if (ctn_status s = st->set_meta(meta); s) return s;
  std::string kname = std::string(st->scatter ? "scatter_" : "gather_") + size_suffix(es);
  return op_finish(std::move(st), kname.c_str(), out);
}

}  // namespace ctn_ocl
