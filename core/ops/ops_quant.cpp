// int8 quantization op schemas (abi/chutney/ops.h, "int8 quantization"): quantize_linear,
// dequantize_linear, the integer matmul and convolution, plain (-> i32) and requantised
// (qlinear_*), and (since 1.7) qlinear_add. None has a gradient rule: ctn_grad along a path through a float operand fails
// naming the op; the integer results carry no gradient.
#include <chutney/ops.h>

#include "graph/op.h"
#include "util/status.h"

namespace ctn {

namespace {

const char *N(const OpDef &op) { return op.name.c_str(); }

bool is_q8(int32_t dt) { return dt == CTN_U8 || dt == CTN_I8; }

void need_q8(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t i, const char *which) {
  if (!is_q8(in[i].dtype))
    fail(CTN_ERR_DTYPE, "%s: %s must be u8 or i8: %s", N(op), which, values_str(in, n).c_str());
}

// Input i is one value ([] or [1]) of dtype `dt`.
void need_scalar(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t i, int32_t dt, const char *which) {
  if (in[i].dtype != dt || in[i].shape.ndim > 1 || in[i].shape.numel() != 1)
    fail(CTN_ERR_SHAPE, "%s: %s must be one %s value ([] or [1]): %s", N(op), which, dtype_name(dt),
         values_str(in, n).c_str());
}

// Input i is one value or one per output channel ([c]) of dtype `dt`.
void need_per_channel(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t i, int32_t dt, int64_t c,
                      const char *which) {
  const Shape &s = in[i].shape;
  const bool ok = s.ndim <= 1 && (s.numel() == 1 || (s.ndim == 1 && s[0] == c));
  if (in[i].dtype != dt || !ok)
    fail(CTN_ERR_SHAPE, "%s: %s must be %s [] or [%lld]: %s", N(op), which, dtype_name(dt),
         static_cast<long long>(c), values_str(in, n).c_str());
}

void need_bias(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t i, int64_t c) {
  if (in[i].dtype != CTN_I32 || in[i].shape.ndim != 1 || in[i].shape[0] != c)
    fail(CTN_ERR_SHAPE, "%s: bias must be i32 [%lld]: %s", N(op), static_cast<long long>(c), values_str(in, n).c_str());
}

// scale (input 1) and zero point (input 2) of quantize_linear / dequantize_linear: the same
// shape, broadcasting to the data's shape.
void need_qparams(const OpDef &op, const ValueInfo *in, uint32_t n) {
  Shape b;
  if (in[1].shape != in[2].shape || !broadcast_shapes(in[1].shape, in[0].shape, &b) || b != in[0].shape)
    fail(CTN_ERR_SHAPE, "%s: scale and zero point must have one shape that broadcasts to the data's: %s", N(op),
         values_str(in, n).c_str());
}

ValueInfo infer_quantize(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  if (!dtype_is_float(in[0].dtype) || in[1].dtype != in[0].dtype)
    fail(CTN_ERR_DTYPE, "%s: x must be floating and scale of x's dtype: %s", N(op), values_str(in, n).c_str());
  need_q8(op, in, n, 2, "the zero point");
  need_qparams(op, in, n);
  a.ni = a.nf = 0;
  return ValueInfo{in[2].dtype, in[0].shape};
}

ValueInfo infer_dequantize(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  if (!is_q8(in[0].dtype) && in[0].dtype != CTN_I32)
    fail(CTN_ERR_DTYPE, "%s: x must be u8, i8 or i32: %s", N(op), values_str(in, n).c_str());
  if (!dtype_is_float(in[1].dtype) || in[2].dtype != in[0].dtype)
    fail(CTN_ERR_DTYPE, "%s: scale must be floating and the zero point of x's dtype: %s", N(op),
         values_str(in, n).c_str());
  need_qparams(op, in, n);
  a.ni = a.nf = 0;
  return ValueInfo{in[1].dtype, in[0].shape};
}

// a [..., M, K] and b [..., K, N] (u8|i8, at least 2-d, batch dims broadcasting) -> [..., M, N].
Shape integer_matmul_shape(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t ia, uint32_t ib) {
  need_q8(op, in, n, ia, "a");
  need_q8(op, in, n, ib, "b");
  const Shape &a = in[ia].shape, &b = in[ib].shape;
  if (a.ndim < 2 || b.ndim < 2 || a[a.ndim - 1] != b[b.ndim - 2])
    fail(CTN_ERR_SHAPE, "%s: a must be [..., M, K] and b [..., K, N]: %s", N(op), values_str(in, n).c_str());
  Shape ba = a, bb = b, batch;
  ba.ndim -= 2;
  bb.ndim -= 2;
  if (!broadcast_shapes(ba, bb, &batch))
    fail(CTN_ERR_SHAPE, "%s: batch dimensions do not broadcast: %s", N(op), values_str(in, n).c_str());
  batch.ndim += 2;
  batch[batch.ndim - 2] = a[a.ndim - 2];
  batch[batch.ndim - 1] = b[b.ndim - 1];
  return batch;
}

// (a, b, a_zp, b_zp) -> i32.
ValueInfo infer_matmul_integer(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  Shape y = integer_matmul_shape(op, in, n, 0, 1);
  need_scalar(op, in, n, 2, in[0].dtype, "a_zero_point");
  need_per_channel(op, in, n, 3, in[1].dtype, y[y.ndim - 1], "b_zero_point");
  a.ni = a.nf = 0;
  return ValueInfo{CTN_I32, y};
}

// (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, bias) -> y_zp's dtype.
ValueInfo infer_qlinear_matmul(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  Shape y = integer_matmul_shape(op, in, n, 0, 3);
  const int64_t cols = y[y.ndim - 1];
  need_scalar(op, in, n, 1, CTN_F32, "a_scale");
  need_scalar(op, in, n, 2, in[0].dtype, "a_zero_point");
  need_per_channel(op, in, n, 4, CTN_F32, cols, "b_scale");
  need_per_channel(op, in, n, 5, in[3].dtype, cols, "b_zero_point");
  need_scalar(op, in, n, 6, CTN_F32, "y_scale");
  need_q8(op, in, n, 7, "y_zero_point");
  need_scalar(op, in, n, 7, in[7].dtype, "y_zero_point");
  need_bias(op, in, n, 8, cols);
  a.ni = a.nf = 0;
  return ValueInfo{in[7].dtype, y};
}

Shape integer_conv_shape(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t ix, uint32_t iw, ctn_attrs &a) {
  need_q8(op, in, n, ix, "x");
  need_q8(op, in, n, iw, "w");
  if (in[ix].shape.ndim != 4 || in[iw].shape.ndim != 4)
    fail(CTN_ERR_SHAPE, "%s: x must be [N, C, H, W] and w [O, C/groups, KH, KW]: %s", N(op), values_str(in, n).c_str());
  return conv2d_geometry(op, in[ix].shape, in[iw].shape, a);
}

// (x, w, x_zp, w_zp); conv2d attrs -> i32.
ValueInfo infer_conv2d_integer(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  Shape y = integer_conv_shape(op, in, n, 0, 1, a);
  need_scalar(op, in, n, 2, in[0].dtype, "x_zero_point");
  need_per_channel(op, in, n, 3, in[1].dtype, y[1], "w_zero_point");
  a.ni = 7;
  a.nf = 0;
  return ValueInfo{CTN_I32, y};
}

// (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias); conv2d attrs, i[7] act -> y_zp's dtype.
ValueInfo infer_qlinear_conv2d(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  const int64_t act = a.i[7];
  Shape y = integer_conv_shape(op, in, n, 0, 3, a);
  need_scalar(op, in, n, 1, CTN_F32, "x_scale");
  need_scalar(op, in, n, 2, in[0].dtype, "x_zero_point");
  need_per_channel(op, in, n, 4, CTN_F32, y[1], "w_scale");
  need_per_channel(op, in, n, 5, in[3].dtype, y[1], "w_zero_point");
  need_scalar(op, in, n, 6, CTN_F32, "y_scale");
  need_q8(op, in, n, 7, "y_zero_point");
  need_scalar(op, in, n, 7, in[7].dtype, "y_zero_point");
  need_bias(op, in, n, 8, y[1]);
  if (act != CTN_ACT_NONE && act != CTN_ACT_RELU)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: activation i[7] must be none (0) or relu (1), got %lld", N(op),
         static_cast<long long>(act));
  a.i[7] = act;
  a.ni = 8;
  a.nf = 0;
  return ValueInfo{in[7].dtype, y};
}

// (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) -> a's dtype, a and b broadcast.
ValueInfo infer_qlinear_add(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  need_q8(op, in, n, 0, "a");
  if (in[3].dtype != in[0].dtype)
    fail(CTN_ERR_DTYPE, "%s: b must have a's dtype: %s", N(op), values_str(in, n).c_str());
  need_scalar(op, in, n, 1, CTN_F32, "a_scale");
  need_scalar(op, in, n, 2, in[0].dtype, "a_zero_point");
  need_scalar(op, in, n, 4, CTN_F32, "b_scale");
  need_scalar(op, in, n, 5, in[0].dtype, "b_zero_point");
  need_scalar(op, in, n, 6, CTN_F32, "y_scale");
  need_scalar(op, in, n, 7, in[0].dtype, "y_zero_point");
  Shape y;
  if (!broadcast_shapes(in[0].shape, in[3].shape, &y))
    fail(CTN_ERR_SHAPE, "%s: a and b do not broadcast: %s", N(op), values_str(in, n).c_str());
  a.ni = a.nf = 0;
  return ValueInfo{in[0].dtype, y};
}

#define CONV_ATTRS "i[0..1] stride, i[2..3] padding, i[4..5] dilation, i[6] groups"

// Not differentiable: no .grad, no .tangent. The probes ask about the 8-bit dtype of the data
// (the integer ops) or the float dtype (quantize_linear's x, dequantize_linear's result).
const OpDef kQuantOps[] = {
    OpDef{.name = CTN_OP_QUANTIZE_LINEAR, .n_inputs = 3, .infer = infer_quantize, .probe = {.inputs = "D[2,3] D[] u8[]"}},
    OpDef{.name = CTN_OP_DEQUANTIZE_LINEAR, .n_inputs = 3, .infer = infer_dequantize, .probe = {.inputs = "u8[2,3] D[] u8[]"}},
    OpDef{.name = CTN_OP_MATMUL_INTEGER, .n_inputs = 4, .infer = infer_matmul_integer, .probe = {.inputs = "D[2,3] D[3,2] D[] D[2]"}},
    OpDef{.name = CTN_OP_QLINEAR_MATMUL, .n_inputs = 9, .infer = infer_qlinear_matmul, .probe = {.inputs = "D[2,3] f32[] D[] D[3,2] f32[2] D[2] f32[] D[] i32[2]"}},
    OpDef{.name = CTN_OP_CONV2D_INTEGER, .n_inputs = 4, .infer = infer_conv2d_integer, .attributes = CONV_ATTRS, .probe = {.inputs = "D[1,1,4,4] D[1,1,3,3] D[] D[1]", .ints = {1, 1, 0, 0, 1, 1, 1}, .ni = 7}},
    OpDef{.name = CTN_OP_QLINEAR_ADD, .n_inputs = 8, .infer = infer_qlinear_add, .probe = {.inputs = "D[2,3] f32[] D[] D[2,3] f32[] D[] f32[] D[]"}},
    OpDef{.name = CTN_OP_QLINEAR_CONV2D, .n_inputs = 9, .infer = infer_qlinear_conv2d, .attributes = CONV_ATTRS ", i[7] activation (none, relu)", .probe = {.inputs = "D[1,1,4,4] f32[] D[] D[2,1,3,3] f32[2] D[2] f32[] D[] i32[2]", .ints = {1, 1, 0, 0, 1, 1, 1, CTN_ACT_RELU}, .ni = 8}},
};

}  // namespace

OpTable quant_op_table() { return {kQuantOps, sizeof kQuantOps / sizeof kQuantOps[0]}; }

}  // namespace ctn
