// Optimizer update ops (SGD, Adam, AdamW) as graph ops, so they run where the weights live.
// Each computes the new value of one state tensor; the caller ctn_assign's it into the variable
// (the core may then write straight into the variable's storage). lr and step are inputs, not
// attributes, so a learning-rate schedule never forces a recompile. Not differentiable.
#include <chutney/ops.h>

#include "graph/op.h"
#include "tensor/tensor.h"
#include "util/status.h"

namespace ctn {

namespace {

const char *N(const OpDef &op) { return op.name.c_str(); }

// Inputs [0, n) are same-dtype floating tensors of one shape: the per-element state.
void check_elementwise(const OpDef &op, const ValueInfo *in, uint32_t n, const char *const *names) {
  if (!dtype_is_float(in[0].dtype))
    fail(CTN_ERR_DTYPE, "%s: %s has dtype %s; optimizer ops need f32 or f64", N(op), names[0],
         dtype_name(in[0].dtype));
  for (uint32_t k = 1; k < n; ++k) {
    if (in[k].dtype != in[0].dtype)
      fail(CTN_ERR_DTYPE, "%s: %s is %s but %s is %s (they must match)", N(op), names[k], dtype_name(in[k].dtype),
           names[0], dtype_name(in[0].dtype));
    if (in[k].shape != in[0].shape)
      fail(CTN_ERR_SHAPE, "%s: %s has shape %s but %s has %s (they must match)", N(op), names[k],
           shape_str(in[k].shape).c_str(), names[0], shape_str(in[0].shape).c_str());
  }
}

void check_scalar(const OpDef &op, const ValueInfo &v, int32_t dtype, const char *name) {
  if (v.dtype != dtype)
    fail(CTN_ERR_DTYPE, "%s: %s must be a 0-d %s value, got %s%s", N(op), name, dtype_name(dtype),
         dtype_name(v.dtype), shape_str(v.shape).c_str());
  if (v.shape.ndim != 0)
    fail(CTN_ERR_SHAPE, "%s: %s must be 0-d, got shape %s", N(op), name, shape_str(v.shape).c_str());
}

void check_range(const OpDef &op, double v, double lo, double hi, bool hi_open, const char *name) {
  bool ok = v >= lo && (hi_open ? v < hi : v <= hi);  // false for NaN
  if (!ok)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: %s = %g is outside [%g, %g%c", N(op), name, v, lo, hi, hi_open ? ')' : ']');
}

constexpr double kInf = 1e308;

ValueInfo infer_sgd_velocity(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  static const char *const names[] = {"v", "g", "w"};
  check_elementwise(op, in, 3, names);
  check_range(op, a.f[0], 0, kInf, false, "momentum");
  check_range(op, a.f[1], 0, kInf, false, "weight_decay");
  a.nf = 2;
  a.ni = 0;
  return in[0];
}

ValueInfo infer_sgd_apply(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  static const char *const names[] = {"w", "v'", "g"};
  check_elementwise(op, in, 3, names);
  check_scalar(op, in[3], in[0].dtype, "lr");
  check_range(op, a.f[0], 0, kInf, false, "momentum");
  check_range(op, a.f[1], 0, kInf, false, "weight_decay");
  if (a.i[0] != 0 && a.i[0] != 1)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: nesterov (i[0]) must be 0 or 1, got %lld", N(op), static_cast<long long>(a.i[0]));
  if (a.i[0] && !(a.f[0] > 0))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: Nesterov momentum needs momentum > 0 (got %g)", N(op), a.f[0]);
  a.nf = 2;
  a.ni = 1;
  return in[0];
}

ValueInfo infer_adam_moment(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  static const char *const m1[] = {"m", "g"};
  static const char *const m2[] = {"v", "g"};
  bool first = op.name == CTN_OP_ADAM_MOMENT1;
  check_elementwise(op, in, 2, first ? m1 : m2);
  check_range(op, a.f[0], 0, 1, true, first ? "beta1" : "beta2");
  a.nf = 1;
  a.ni = 0;
  return in[0];
}

ValueInfo infer_adam_apply(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  static const char *const names[] = {"w", "m'", "v'"};
  check_elementwise(op, in, 3, names);
  check_scalar(op, in[3], in[0].dtype, "lr");
  check_scalar(op, in[4], CTN_I64, "step");
  check_range(op, a.f[0], 0, 1, true, "beta1");
  check_range(op, a.f[1], 0, 1, true, "beta2");
  check_range(op, a.f[2], 0, kInf, false, "eps");
  check_range(op, a.f[3], 0, kInf, false, "weight_decay");
  if (a.i[0] != 0 && a.i[0] != 1)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: decoupled (i[0]) must be 0 or 1, got %lld", N(op), static_cast<long long>(a.i[0]));
  a.nf = 4;
  a.ni = 1;
  return in[0];
}

// OP_NO_FOLD: an update is never a constant worth precomputing (and folding would bake one
// step's lr into the plan).
const OpDef kOps[] = {
    OpDef{.name = CTN_OP_SGD_VELOCITY, .n_inputs = 3, .infer = infer_sgd_velocity, .flags = OP_ELEMENTWISE | OP_NO_FOLD, .attributes = "f[0] momentum, f[1] weight_decay", .probe = {.inputs = "D[2,3] D[2,3] D[2,3]", .floats = {0.9, 0}, .nf = 2}},
    OpDef{.name = CTN_OP_SGD_APPLY, .n_inputs = 4, .infer = infer_sgd_apply, .flags = OP_NO_FOLD, .attributes = "f[0] momentum, f[1] weight_decay, i[0] nesterov", .probe = {.inputs = "D[2,3] D[2,3] D[2,3] D[]", .ints = {0}, .ni = 1, .floats = {0.9, 0}, .nf = 2}},
    OpDef{.name = CTN_OP_ADAM_MOMENT1, .n_inputs = 2, .infer = infer_adam_moment, .flags = OP_ELEMENTWISE | OP_NO_FOLD, .attributes = "f[0] beta1", .probe = {.inputs = "D[2,3] D[2,3]", .floats = {0.9}, .nf = 1}},
    OpDef{.name = CTN_OP_ADAM_MOMENT2, .n_inputs = 2, .infer = infer_adam_moment, .flags = OP_ELEMENTWISE | OP_NO_FOLD, .attributes = "f[0] beta2", .probe = {.inputs = "D[2,3] D[2,3]", .floats = {0.999}, .nf = 1}},
    OpDef{.name = CTN_OP_ADAM_APPLY, .n_inputs = 5, .infer = infer_adam_apply, .flags = OP_NO_FOLD, .attributes = "f[0] beta1, f[1] beta2, f[2] eps, f[3] weight_decay, i[0] decoupled", .probe = {.inputs = "D[2,3] D[2,3] D[2,3] D[] i64[]", .ints = {0}, .ni = 1, .floats = {0.9, 0.999, 1e-8, 0}, .nf = 4}},
};

}  // namespace

OpTable optim_op_table() { return {kOps, sizeof kOps / sizeof kOps[0]}; }

}  // namespace ctn
