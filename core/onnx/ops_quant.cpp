// ONNX quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul (QLinearConv and ConvInteger are in ops_nn.cpp, beside Conv). They map onto
// chutney's int8 ops (ops.h, "int8 quantization"): per-axis and blocked scales become tensors
// that broadcast against the data, absent zero points become zeros of the ONNX default dtype.
// QuantizeLinear also fuses onnxruntime's QDQ pattern, Q(op(DQ(x), DQ(w))), into the integer
// op (qdq.cpp).
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "onnx/qdq.h"
#include "tensor/tensor.h"
#include "util/status.h"

namespace ctn::onnx {
namespace {

using namespace lower;

// The zero point input i, or zeros of `dt` of shape `s`.
ctn_node zero_point(NodeCtx &c, size_t i, const Shape &s, int32_t dt) {
  if (c.has(i)) return c.in(i);
  return c.g.add_constant(Tensor::empty(dt, s));
}

// A scale or zero point as a tensor broadcasting against data of shape `xs`: one value -> [],
// per axis ([C]) -> [C, 1, ..., 1], blocked (x's rank, ceil(x[axis] / block) along axis) ->
// each value repeated `block` times along axis and cut to x[axis].
ctn_node qparam(NodeCtx &c, ctn_node p, const Shape &xs, int64_t axis_attr, int64_t block) {
  Graph &g = c.g;
  const Shape ps = g.info(p).shape;
  if (block <= 0) {
    if (ps.numel() == 1 && ps.ndim <= 1) return ps.ndim == 0 ? p : reshape(g, p, Shape{});
    const int32_t axis = c.axis(axis_attr, xs.ndim);
    if (ps.ndim != 1 || ps[0] != xs[static_cast<uint32_t>(axis)])
      c.invalid("scale / zero point of shape %s: per-axis parameters must be [%lld] (axis %d)", shape_str(ps).c_str(),
                static_cast<long long>(xs[static_cast<uint32_t>(axis)]), axis);
    Shape r;  // [C, 1, ..., 1]: the axis and the ones after it
    r[r.ndim++] = ps[0];
    for (uint32_t k = static_cast<uint32_t>(axis) + 1; k < xs.ndim; ++k) r[r.ndim++] = 1;
    return reshape(g, p, r);
  }
  const int32_t axis = c.axis(axis_attr, xs.ndim);
  const uint32_t ua = static_cast<uint32_t>(axis);
  const int64_t n = xs[ua], nb = (n + block - 1) / block;
  bool ok = ps.ndim == xs.ndim && ps[ua] == nb;
  for (uint32_t k = 0; ok && k < xs.ndim; ++k) ok = k == ua || ps[k] == xs[k];
  if (!ok)
    c.invalid("blocked scale / zero point %s must be %s with %lld along axis %d (block_size %lld)", shape_str(ps).c_str(),
              shape_str(xs).c_str(), static_cast<long long>(nb), axis, static_cast<long long>(block));
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = i / block;
  const int32_t dt = g.info(p).dtype;
  // take gathers floating rows: integer zero points go through f64 (exact for 8 and 32 bits).
  ctn_node pf = dtype_is_float(dt) ? p : cast(g, p, CTN_F64);
  ctn_node r = take(g, pf, const_i64(g, idx, Shape::from(1, &n)), axis);
  return cast(g, r, dt);
}

int32_t onnx_qtype(NodeCtx &c, const char *attr, int32_t def) {
  const int64_t t = c.attr_i(attr, 0);
  if (t == 0) return def;
  const int32_t dt = dtype_from_onnx(static_cast<int32_t>(t));
  if (dt != CTN_U8 && dt != CTN_I8) c.unsupported("%s %lld (uint8 and int8 only)", attr, static_cast<long long>(t));
  return dt;
}

void quantize_linear(NodeCtx &c) {
  Graph &g = c.g;
  c.ignore("saturate");  // float8 outputs only
  const int64_t axis = c.attr_i("axis", 1), block = c.attr_i("block_size", 0);
  const int32_t qdt = c.has(2) ? c.dtype(2) : onnx_qtype(c, "output_dtype", CTN_U8);
  if (c.has(2) && c.has_attr("output_dtype") && onnx_qtype(c, "output_dtype", qdt) != qdt)
    c.invalid("output_dtype differs from the zero point's dtype");
  ctn_node x = c.in(0), scale = c.in(1);
  if (!dtype_is_float(c.dtype(0))) c.unsupported("input dtype %s (floating only)", dtype_name(c.dtype(0)));
  if (ctn_node fused = qdq_fuse(c, scale, c.has(2) ? c.in(2) : CTN_NODE_NONE, qdt); fused != CTN_NODE_NONE) {
    c.outs = {fused};
    return;
  }
  const Shape xs = c.shape(0);
  ctn_node zp = zero_point(c, 2, g.info(scale).shape, qdt);
  scale = cast(g, scale, c.dtype(0));
  ctn_node in[3] = {x, qparam(c, scale, xs, axis, block), qparam(c, zp, xs, axis, block)};
  c.outs = {g.add_op(CTN_OP_QUANTIZE_LINEAR, 3, in, nullptr)};
}

void dequantize_linear(NodeCtx &c) {
  Graph &g = c.g;
  const int64_t axis = c.attr_i("axis", 1), block = c.attr_i("block_size", 0);
  const int32_t dt = c.dtype(0);
  if (dt != CTN_U8 && dt != CTN_I8 && dt != CTN_I32) c.unsupported("input dtype %s (uint8, int8, int32)", dtype_name(dt));
  if (c.has_attr("output_dtype")) {
    const int32_t od = dtype_from_onnx(static_cast<int32_t>(c.attr_i("output_dtype", 0)));
    if (od != c.dtype(1)) c.unsupported("output_dtype other than the scale's dtype");
  }
  const Shape xs = c.shape(0);
  ctn_node scale = c.in(1), zp = zero_point(c, 2, c.shape(1), dt);
  ctn_node in[3] = {c.in(0), qparam(c, scale, xs, axis, block), qparam(c, zp, xs, axis, block)};
  c.outs = {g.add_op(CTN_OP_DEQUANTIZE_LINEAR, 3, in, nullptr)};
}

// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = saturate(round(-min(x, 0) / y_scale)),
// y = quantize_linear(x, y_scale, y_zero_point), all u8.
void dynamic_quantize_linear(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = c.in(0);
  if (c.dtype(0) != CTN_F32) c.unsupported("input dtype %s (float only)", dtype_name(c.dtype(0)));
  ctn_node zero = scalar_like(g, x, 0.0);
  ctn_node mx = g.op2(CTN_OP_MAXIMUM, reduce(g, CTN_OP_MAX, x, 0, false), zero);
  ctn_node mn = g.op2(CTN_OP_MINIMUM, reduce_min(g, x, 0, false), zero);
  ctn_node scale = g.op2(CTN_OP_DIV, g.op2(CTN_OP_SUB, mx, mn), scalar_like(g, x, 255.0));
  ctn_node u8zero = g.add_scalar(CTN_U8, 0);
  ctn_node zin[3] = {g.op1(CTN_OP_NEG, mn), scale, u8zero};
  ctn_node zp = g.add_op(CTN_OP_QUANTIZE_LINEAR, 3, zin, nullptr);
  ctn_node yin[3] = {x, scale, zp};
  c.outs = {g.add_op(CTN_OP_QUANTIZE_LINEAR, 3, yin, nullptr), scale, zp};
}

// A 1-d operand of a matmul as a matrix (a: [1, K], b: [K, 1]); matmul_result removes the
// added axes from the product.
ctn_node as_matrix(Graph &g, ctn_node v, bool is_a) {
  const Shape s = g.info(v).shape;
  if (s.ndim != 1) return v;
  const int64_t d[2] = {is_a ? 1 : s[0], is_a ? s[0] : 1};
  return reshape(g, v, Shape::from(2, d));
}

ctn_node matmul_result(Graph &g, ctn_node y, bool a1, bool b1) {
  if (!a1 && !b1) return y;
  const Shape ys = g.info(y).shape;
  Shape r;
  for (uint32_t k = 0; k < ys.ndim; ++k) {
    if ((a1 && k == ys.ndim - 2) || (b1 && k == ys.ndim - 1)) continue;
    r[r.ndim++] = ys[k];
  }
  return reshape(g, y, r);
}

// A per-tensor parameter as [] and a per-column one as [N].
ctn_node flat_param(NodeCtx &c, ctn_node p, const char *what) {
  const Shape s = c.g.info(p).shape;
  if (s.numel() == 1) return s.ndim == 0 ? p : reshape(c.g, p, Shape{});
  int64_t n = s.numel();
  for (uint32_t k = 0; k + 1 < s.ndim; ++k)
    if (s[k] != 1) c.unsupported("%s of shape %s (one value or one per column)", what, shape_str(s).c_str());
  return s.ndim == 1 ? p : reshape(c.g, p, Shape::from(1, &n));
}

void matmul_integer(NodeCtx &c) {
  Graph &g = c.g;
  const bool a1 = c.shape(0).ndim == 1, b1 = c.shape(1).ndim == 1;
  ctn_node a = as_matrix(g, c.in(0), true), b = as_matrix(g, c.in(1), false);
  ctn_node za = zero_point(c, 2, Shape{}, c.dtype(0)), zb = zero_point(c, 3, Shape{}, c.dtype(1));
  if (g.info(za).shape.numel() != 1) c.unsupported("a_zero_point per row (one value only)");
  ctn_node in[4] = {a, b, flat_param(c, za, "a_zero_point"), flat_param(c, zb, "b_zero_point")};
  c.outs = {matmul_result(g, g.add_op(CTN_OP_MATMUL_INTEGER, 4, in, nullptr), a1, b1)};
}

void qlinear_matmul(NodeCtx &c) {
  Graph &g = c.g;
  const bool a1 = c.shape(0).ndim == 1, b1 = c.shape(3).ndim == 1;
  ctn_node in[9] = {as_matrix(g, c.in(0), true),
                    flat_param(c, cast(g, c.in(1), CTN_F32), "a_scale"),
                    flat_param(c, c.in(2), "a_zero_point"),
                    as_matrix(g, c.in(3), false),
                    flat_param(c, cast(g, c.in(4), CTN_F32), "b_scale"),
                    flat_param(c, c.in(5), "b_zero_point"),
                    flat_param(c, cast(g, c.in(6), CTN_F32), "y_scale"),
                    flat_param(c, c.in(7), "y_zero_point"),
                    CTN_NODE_NONE};
  const Shape bs = g.info(in[3]).shape;
  const int64_t n = bs[bs.ndim - 1];
  in[8] = g.add_constant(Tensor::empty(CTN_I32, Shape::from(1, &n)));
  c.outs = {matmul_result(g, g.add_op(CTN_OP_QLINEAR_MATMUL, 9, in, nullptr), a1, b1)};
}

const OpEntry kQuantOps[] = {
    {"QuantizeLinear", quantize_linear}, {"DequantizeLinear", dequantize_linear},
    {"DynamicQuantizeLinear", dynamic_quantize_linear}, {"MatMulInteger", matmul_integer},
    {"QLinearMatMul", qlinear_matmul},
};

}  // namespace

std::span<const OpEntry> quant_ops() { return kQuantOps; }

}  // namespace ctn::onnx
