// Elementwise ops: unary, binary with broadcasting, the backward helpers, comparisons, where,
// cast and copy. Broadcast index tables are computed at get_kernel time and uploaded once.
#include <algorithm>

#include "ocl_backend.h"
#include "ocl_ew_ops.h"

namespace ctn_ocl {
namespace {

enum Kind { kUnary, kBinary, kCompare, kWhere, kCast, kCopy };

struct Entry {
  const char *name;
  Kind kind;
  int code;   // CTN_EW_* op code inside the kernel's switch (ocl_ew_ops.h)
  bool grad;  // a backward helper: both inputs have the output's shape
};

// Unary, binary and compare ops come from the generated list; where, cast and copy have their
// own kernels.
bool find_entry(const char *op, Entry *e) {
  if (const ctn_ew::Op *o = ctn_ew::find(op)) {
    Kind k = o->group == ctn_ew::kUnary ? kUnary : o->group == ctn_ew::kCompare ? kCompare : kBinary;
    *e = {o->name, k, o->code, o->group == ctn_ew::kGrad};
    return true;
  }
  static const Entry kOther[] = {
      {CTN_OP_WHERE, kWhere, 0, false},
      {CTN_OP_CAST, kCast, 0, false},
      {CTN_OP_COPY, kCopy, 0, false},
  };
  for (const Entry &c : kOther)
    if (!std::strcmp(c.name, op)) {
      *e = c;
      return true;
    }
  return false;
}

// The float dtypes of the arithmetic ops: f32, f64, and the 16-bit floats (half_ops.cl).
bool is_float(int32_t dt) {
  return dt == CTN_F32 || dt == CTN_F64 || dt == CTN_F16 || dt == CTN_BF16;
}
// Dtypes the cast and comparison kernels cover: the six of 1.0 and the 16-bit floats (not i8,
// nor the 1.6 integers: those run on the CPU).
bool has_kernels(int32_t dt) { return dt < CTN_DTYPE_COUNT_V1 || dt == CTN_F16 || dt == CTN_BF16; }

struct EwOp : Op {
  Kind kind = kUnary;
  int code = 0;
  int32_t dt = CTN_F32;  // dtype of the first data operand
  cl_long n = 0;
  cl_int nd = 1;
  cl_int mode[3] = {0, 0, 0};
  double f0 = 0, f1 = 0;
  cl_kernel k = nullptr;
  // copy
  size_t bytes = 0;
  cl_mem src = nullptr, dst = nullptr;
  size_t src_off = 0, dst_off = 0;

  ctn_status bind(const ctn_kernel_args &a) override {
    if (ctn_status s = check_args(a); s) return s;
    const ctn_tensor_desc &y = a.outputs[0];
    if (kind == kCopy) {
      src = mem_of(a.inputs[0]);
      dst = mem_of(y);
      src_off = a.inputs[0].offset;
      dst_off = y.offset;
      return CTN_OK;
    }
    cl_int e = CL_SUCCESS;
    auto fl = [&](cl_uint idx) -> cl_int {
      if (dt == CTN_F64) {
        cl_double v0 = f0, v1 = f1;
        cl_int r = set_arg(k, idx, v0);
        return r == CL_SUCCESS ? set_arg(k, idx + 1, v1) : r;
      }
      cl_float v0 = static_cast<cl_float>(f0), v1 = static_cast<cl_float>(f1);
      cl_int r = set_arg(k, idx, v0);
      return r == CL_SUCCESS ? set_arg(k, idx + 1, v1) : r;
    };
    const ctn_tensor_desc *in = a.inputs;
    switch (kind) {
      case kUnary:
        e = set_args(k, cl_int(code), n, mem_of(in[0]), cl_long(elem_off(in[0])), mem_of(y),
                     cl_long(elem_off(y)));
        if (e == CL_SUCCESS) e = fl(6);
        break;
      case kBinary:
      case kCompare:  // the binary kernel's arguments without its scalar ones
        e = set_args(k, cl_int(code), n, nd, meta, mode[0], mode[1], mem_of(in[0]),
                     cl_long(elem_off(in[0])), mem_of(in[1]), cl_long(elem_off(in[1])), mem_of(y),
                     cl_long(elem_off(y)));
        if (e == CL_SUCCESS && kind == kBinary) e = fl(12);
        break;
      case kWhere:
        e = set_args(k, n, nd, meta, mode[0], mode[1], mode[2], mem_of(in[0]),
                     cl_long(elem_off(in[0])), mem_of(in[1]), cl_long(elem_off(in[1])),
                     mem_of(in[2]), cl_long(elem_off(in[2])), mem_of(y), cl_long(elem_off(y)));
        break;
      case kCast:
        e = set_args(k, n, mem_of(in[0]), cl_long(elem_off(in[0])), mem_of(y),
                     cl_long(elem_off(y)));
        break;
      case kCopy: break;
    }
    if (e != CL_SUCCESS) return fail(e, "clSetKernelArg");
    return CTN_OK;
  }

  ctn_status enqueue() override {
    if (kind == kCopy) {
      if (!bytes || (src == dst && src_off == dst_off)) return CTN_OK;
      cl_int e = clEnqueueCopyBuffer(be->queue, src, dst, src_off, dst_off, bytes, 0, nullptr, nullptr);
      return e == CL_SUCCESS ? CTN_OK : fail(e, "clEnqueueCopyBuffer");
    }
    return launch(k, n);
  }
};

}  // namespace

ctn_status make_elementwise(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                            bool *handled) {
  Entry entry;
  if (!find_entry(sig->op, &entry)) return CTN_OK;
  const Entry *ent = &entry;
  *handled = true;
  const ctn_host_api *host = be->host;
  const char *op = sig->op;
  const ctn_tensor_desc &y = *sig->output;
  const ctn_tensor_desc &a = sig->inputs[0];
  auto st = new_state<EwOp>(be, ent->name);
  st->kind = ent->kind;
  st->code = ent->code;
  st->dt = ent->kind == kWhere ? sig->inputs[1].dtype : a.dtype;
  st->f0 = sig->attrs->f[0];
  st->f1 = sig->attrs->f[1];
  st->n = desc_numel(y);
  std::string kname;
  uint32_t flags = 0;
  switch (ent->kind) {
    case kCopy:
    case kCast: {
      if (y.dtype == a.dtype) {
        st->kind = kCopy;
        st->bytes = static_cast<size_t>(st->n) * dtype_size(a.dtype);
        op_set(out, st.release(), CTN_KERNEL_INPLACE_OK);
        return CTN_OK;
      }
      if (!has_kernels(a.dtype) || !has_kernels(y.dtype))
        return host->set_error(CTN_ERR_UNSUPPORTED, "opencl %s: casts of %s are not implemented",
                               op, dtype_name(has_kernels(a.dtype) ? y.dtype : a.dtype));
      kname = std::string("cast_") + kernel_suffix(a.dtype) + "_" + kernel_suffix(y.dtype);
      break;
    }
    case kUnary:
    case kBinary:
    case kCompare: {
      if (ent->kind == kCompare ? !has_kernels(a.dtype) : !is_float(a.dtype))
        return host->set_error(CTN_ERR_UNSUPPORTED,
                               "opencl %s: dtype %s is not supported (%s only)", op,
                               dtype_name(a.dtype),
                               ent->kind == kCompare ? "f32, f64, f16, bf16, i32, i64, u8, bool" : "f32, f64, f16, bf16");
      const char *base = ent->kind == kUnary ? "unary_" : ent->kind == kBinary ? "binary_" : "compare_";
      kname = std::string(base) + kernel_suffix(a.dtype == CTN_BOOL ? CTN_U8 : a.dtype);
      if (ent->kind != kCompare && same_shape(a, y)) flags = CTN_KERNEL_INPLACE_OK;
      break;
    }
    case kWhere: {
      size_t es = dtype_size(sig->inputs[1].dtype);
      kname = es == 1 ? "where_u8" : es == 2 ? "where_u16" : es == 4 ? "where_u32" : "where_u64";
      break;
    }
  }
  if (ent->kind == kBinary || ent->kind == kCompare || ent->kind == kWhere) {
    // Index table: shape, then one stride row per input (element strides, 0 on broadcast axes).
    uint32_t nd = std::max<uint32_t>(y.ndim, 1);
    std::vector<int64_t> meta(static_cast<size_t>(nd) * (1 + sig->n_inputs), 0);
    for (uint32_t k = 0; k < nd; ++k) meta[k] = y.ndim ? y.shape[k] : 1;
    for (uint32_t i = 0; i < sig->n_inputs; ++i) {
      const ctn_tensor_desc &in = sig->inputs[i];
      int64_t str[CTN_MAX_DIMS] = {};
      broadcast_strides(in, y, str);
      for (uint32_t k = 0; k < y.ndim; ++k) meta[(i + 1) * nd + k] = str[k];
      int64_t numel = desc_numel(in);
      st->mode[i] = numel == st->n ? 0 : numel == 1 ? 1 : 2;
    }
    st->nd = static_cast<cl_int>(nd);
    if (ctn_status s = st->set_meta(meta); s) return s;
  }
  return op_finish(std::move(st), kname.c_str(), out, flags);
}

}  // namespace ctn_ocl
