// Kernel-maker scaffolding shared by the backends (see kernel_util.h).
#include "kernel_util.h"

#include <sys/stat.h>

#include <cstdlib>

#include <algorithm>
#include <cstring>

namespace ctn_backend_util {

ctn_status need_float(const ctn_host_api *host, const char *backend, const char *op, int32_t dt) {
  if (is_float(dt)) return CTN_OK;
  return host->set_error(CTN_ERR_UNSUPPORTED, "%s %s: dtype %s is not supported (f32, f64 only)",
                         backend, op, dtype_name(dt));
}

EwWalk ew_walk(const ctn_op_signature *sig) {
  const ctn_tensor_desc &out = *sig->output;
  EwWalk w;
  w.nin = static_cast<int>(sig->n_inputs < kEwMaxIn ? sig->n_inputs : kEwMaxIn);
  w.n = desc_numel(out);
  int64_t full[kEwMaxIn][CTN_MAX_DIMS] = {};
  for (int j = 0; j < w.nin; ++j) {
    const ctn_tensor_desc &in = sig->inputs[j];
    broadcast_strides(in, out, full[j]);
    const int64_t numel = desc_numel(in);
    w.mode[j] = numel == w.n ? 0 : numel == 1 ? 1 : 2;
    if (w.mode[j] == 2) w.general = true;
  }
  if (!w.general) return w;
  int nd = 0;
  for (uint32_t k = 0; k < out.ndim; ++k) {
    if (out.shape[k] == 1) continue;
    bool merge = nd > 0;
    for (int j = 0; merge && j < w.nin; ++j) merge = w.str[j][nd - 1] == full[j][k] * out.shape[k];
    if (merge) {
      w.shape[nd - 1] *= out.shape[k];
      for (int j = 0; j < w.nin; ++j) w.str[j][nd - 1] = full[j][k];
    } else {
      w.shape[nd] = out.shape[k];
      for (int j = 0; j < w.nin; ++j) w.str[j][nd] = full[j][k];
      ++nd;
    }
  }
  if (nd == 0) {
    w.shape[0] = 1;
    nd = 1;
  }
  w.nd = nd;
  return w;
}

MatmulDims matmul_dims(const ctn_op_signature *sig) {
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[1], &y = *sig->output;
  MatmulDims d;
  d.ta = sig->attrs->i[0] != 0;
  d.tb = sig->attrs->i[1] != 0;
  d.act = !std::strcmp(sig->op, CTN_OP_MATMUL_BIAS_ACT) ? static_cast<int>(sig->attrs->i[2]) : 0;
  const int64_t ar = a.shape[a.ndim - 2], ac = a.shape[a.ndim - 1];
  const int64_t br = b.shape[b.ndim - 2], bc = b.shape[b.ndim - 1];
  d.m = d.ta ? ac : ar;
  d.k = d.ta ? ar : ac;
  d.n = d.tb ? br : bc;
  d.a_batch.ndim = a.ndim - 2;
  d.b_batch.ndim = b.ndim - 2;
  d.y_batch.ndim = y.ndim - 2;
  std::copy(a.shape, a.shape + d.a_batch.ndim, d.a_batch.shape);
  std::copy(b.shape, b.shape + d.b_batch.ndim, d.b_batch.shape);
  std::copy(y.shape, y.shape + d.y_batch.ndim, d.y_batch.shape);
  d.batches = desc_numel(d.y_batch);
  broadcast_strides(d.a_batch, d.y_batch, d.sa);
  broadcast_strides(d.b_batch, d.y_batch, d.sb);
  return d;
}

bool fold_batches(MatmulDims &d) {
  // b broadcast over every batch dim, a's batches contiguous: offsets(i) would be (i*m*k, 0).
  bool fold = d.batches > 1 && !d.ta;
  int64_t run = 1;
  for (int k = static_cast<int>(d.y_batch.ndim) - 1; fold && k >= 0; --k) {
    if (d.y_batch.shape[k] == 1) continue;
    fold = d.sb[k] == 0 && d.sa[k] == run;
    run *= d.y_batch.shape[k];
  }
  if (!fold) return false;
  d.m *= d.batches;
  d.batches = 1;
  d.y_batch.ndim = 0;
  return true;
}

void batch_tables(MatmulDims &d) {
  d.a_off.resize(static_cast<size_t>(d.batches));
  d.b_off.resize(static_cast<size_t>(d.batches));
  for (int64_t i = 0; i < d.batches; ++i) d.offsets(i, &d.a_off[static_cast<size_t>(i)], &d.b_off[static_cast<size_t>(i)]);
}

ShapeKind shape_kind(const char *op) {
  static const struct {
    const char *name;
    ShapeKind kind;
  } kOps[] = {
      {CTN_OP_RESHAPE, ShapeKind::kReshape},     {CTN_OP_PERMUTE, ShapeKind::kPermute},
      {CTN_OP_SLICE, ShapeKind::kSlice},         {CTN_OP_SLICE_GRAD, ShapeKind::kSliceGrad},
      {CTN_OP_CONCAT, ShapeKind::kConcat},       {CTN_OP_BROADCAST_TO, ShapeKind::kBroadcast},
  };
  const auto *o = find_entry(kOps, op);
  return o ? o->kind : ShapeKind::kNone;
}

ShapeWalk shape_walk(const ctn_op_signature *sig, ShapeKind kind) {
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  const ctn_attrs &at = *sig->attrs;
  ShapeWalk w;
  int64_t str[CTN_MAX_DIMS] = {};
  switch (kind) {
    case ShapeKind::kPermute: {
      int64_t istr[CTN_MAX_DIMS];
      contiguous_strides(x, istr);
      for (uint32_t k = 0; k < x.ndim; ++k) str[k] = istr[at.i[k]];
      w.n = desc_numel(y);
      coalesce(w.walk, y.ndim, y.shape, str);
      break;
    }
    case ShapeKind::kSlice:
    case ShapeKind::kSliceGrad: {
      // For slice_grad the "source" is the output and dy plays the sliced tensor.
      const bool grad = kind == ShapeKind::kSliceGrad;
      const ctn_tensor_desc &full = grad ? y : x, &part = grad ? x : y;
      const int64_t axis = at.i[0], start = at.i[1];
      int64_t step = at.i[3];
      if (step > full.shape[axis]) step = full.shape[axis] > 0 ? full.shape[axis] : 1;
      contiguous_strides(full, str);
      w.base = start * str[axis];
      str[axis] *= step;
      w.n = desc_numel(part);
      w.scatter = grad;
      w.full = desc_numel(full);
      if (w.n > 0) coalesce(w.walk, part.ndim, part.shape, str);
      else w.walk.nd = 1, w.walk.shape[0] = 1, w.walk.str[0] = 0;
      break;
    }
    case ShapeKind::kBroadcast:
      broadcast_strides(x, y, str);
      w.n = desc_numel(y);
      coalesce(w.walk, y.ndim, y.shape, str);
      break;
    default:  // reshape, concat: no walk
      w.n = desc_numel(y);
      break;
  }
  return w;
}

ConcatPlan concat_plan(const ctn_op_signature *sig) {
  const ctn_tensor_desc &x = sig->inputs[0];
  const int64_t axis = sig->attrs->i[0];
  ConcatPlan p;
  int64_t inner = 1;
  for (uint32_t k = static_cast<uint32_t>(axis) + 1; k < x.ndim; ++k) inner *= x.shape[k];
  for (int64_t k = 0; k < axis; ++k) p.outer *= x.shape[k];
  for (uint32_t i = 0; i < sig->n_inputs; ++i) {
    p.chunk.push_back(sig->inputs[i].shape[axis] * inner);
    p.row += p.chunk.back();
  }
  return p;
}

ReduceFamily reduce_family(const char *op, int *code) {
  static const struct {
    const char *name;
    ReduceFamily family;
    int code;
  } kOps[] = {
      {CTN_OP_SUM, ReduceFamily::kReduce, 0}, {CTN_OP_MEAN, ReduceFamily::kReduce, 1},
      {CTN_OP_MAX, ReduceFamily::kReduce, 2}, {CTN_OP_SOFTMAX, ReduceFamily::kSoftmax, 0},
      {CTN_OP_LOG_SOFTMAX, ReduceFamily::kSoftmax, 1},
      {CTN_OP_SOFTMAX_GRAD, ReduceFamily::kSoftmax, 2},
      {CTN_OP_LOG_SOFTMAX_GRAD, ReduceFamily::kSoftmax, 3},
      {CTN_OP_CROSS_ENTROPY, ReduceFamily::kCrossEntropy, 0},
      {CTN_OP_CROSS_ENTROPY_GRAD, ReduceFamily::kCrossEntropy, 1},
  };
  const auto *o = find_entry(kOps, op);
  if (!o) return ReduceFamily::kNone;
  *code = o->code;
  return o->family;
}

int64_t reduce_count(const ctn_op_signature *sig) {
  const ctn_tensor_desc &x = sig->inputs[0];
  const uint64_t mask = static_cast<uint64_t>(sig->attrs->i[0]);
  int64_t count = 1;
  for (uint32_t k = 0; k < x.ndim; ++k)
    if ((mask >> k) & 1) count *= x.shape[k];
  return count;
}

AxisDims axis_dims(const ctn_tensor_desc &x, int64_t axis) {
  AxisDims d;
  for (int64_t k = 0; k < axis; ++k) d.outer *= x.shape[k];
  d.len = x.shape[axis];
  for (uint32_t k = static_cast<uint32_t>(axis) + 1; k < x.ndim; ++k) d.inner *= x.shape[k];
  return d;
}

std::string cache_directory() {
  if (const char *d = std::getenv("CHUTNEY_CACHE_DIR"); d && *d) return d;
  auto is_dir = [](const char *p) {
    struct stat st {};
    return p && *p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
  };
  if (const char *x = std::getenv("XDG_CACHE_HOME"); is_dir(x)) return std::string(x) + "/chutney";
  if (const char *h = std::getenv("HOME"); is_dir(h)) return std::string(h) + "/.cache/chutney";
  return "";
}

}  // namespace ctn_backend_util
