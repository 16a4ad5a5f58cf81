// QDQ fusion at import (qdq.h): the float graph the converters built for DQ -> Conv/MatMul/Gemm
// -> Q, and for DQ + DQ -> Add -> Q (qlinear_add), is matched backwards from the QuantizeLinear
// and replaced by one integer op reading the quantized tensors. The float nodes stay in the graph; nothing reads them any more unless
// another consumer does, and a plan computes only what its outputs need.
#include "onnx/qdq.h"

#include <chutney/ops.h>

#include "onnx/lower.h"
#include "tensor/tensor.h"

#include <cmath>
#include <vector>

namespace ctn::onnx {
namespace {

using namespace lower;

bool is_op(const Graph &g, ctn_node n, const char *name) {
  const Node &nd = g.node(n);
  return nd.kind == NodeKind::Op && nd.op->name == name;
}

ctn_node through_reshapes(const Graph &g, ctn_node n) {
  while (is_op(g, n, CTN_OP_RESHAPE)) n = g.node(n).inputs[0];
  return n;
}

// The value of a constant or an initializer (a variable: its value at import), behind reshapes;
// nullptr for a computed value.
const Tensor *import_value(const Graph &g, ctn_node n) {
  const Node &nd = g.node(through_reshapes(g, n));
  const bool held = nd.kind == NodeKind::Constant || nd.kind == NodeKind::Variable;
  return held && nd.value ? nd.value.get() : nullptr;
}

template <class T>
std::vector<T> import_values(const Graph &g, ctn_node n, int32_t dt) {
  const Tensor *t = import_value(g, n);
  if (!t || t->dtype != dt) return {};
  std::vector<T> v(static_cast<size_t>(t->numel()));
  t->read(v.data());
  return v;
}

struct Dq {
  ctn_node q = CTN_NODE_NONE, scale = CTN_NODE_NONE, zp = CTN_NODE_NONE;
};

// n is dequantize_linear(q of dtype in `dts`, f32 scale, zp): its parts.
bool as_dq(const Graph &g, ctn_node n, std::initializer_list<int32_t> dts, Dq *d) {
  if (!is_op(g, n, CTN_OP_DEQUANTIZE_LINEAR)) return false;
  const std::vector<ctn_node> &in = g.node(n).inputs;
  bool dt_ok = false;
  for (int32_t dt : dts) dt_ok = dt_ok || g.info(in[0]).dtype == dt;
  if (!dt_ok || g.info(in[1]).dtype != CTN_F32) return false;
  *d = {in[0], in[1], in[2]};
  return true;
}

bool one_value(const Graph &g, ctn_node n) { return g.info(n).shape.numel() == 1; }

// The parameter as [] (one value) or [c] (one per channel), when it holds one value or has the
// shape `per_channel` (DequantizeLinear's per-axis form along the output-channel axis).
ctn_node channel_param(Graph &g, ctn_node p, int64_t c, const Shape &per_channel) {
  const Shape &s = g.info(p).shape;
  if (s.numel() == 1) return reshape(g, p, Shape{});
  if (s != per_channel) return CTN_NODE_NONE;
  return reshape(g, p, Shape::from(1, &c));
}

// The match: the core op (conv2d or matmul), an optional relu above it and an optional
// DQ(bias) added to it.
struct Match {
  ctn_node core = CTN_NODE_NONE;
  bool relu = false;
  Dq bias;
};

bool match_chain(const Graph &g, ctn_node n, Match *m) {
  if (is_op(g, n, CTN_OP_RELU)) {
    m->relu = true;
    n = g.node(n).inputs[0];
  }
  if (is_op(g, n, CTN_OP_ADD)) {
    const std::vector<ctn_node> &in = g.node(n).inputs;
    for (int k = 0; k < 2 && m->bias.q == CTN_NODE_NONE; ++k)
      if (as_dq(g, through_reshapes(g, in[static_cast<size_t>(k)]), {CTN_I32}, &m->bias)) n = in[1 - static_cast<size_t>(k)];
    if (m->bias.q == CTN_NODE_NONE) return false;
  }
  m->core = n;
  return is_op(g, n, CTN_OP_CONV2D) || (is_op(g, n, CTN_OP_MATMUL) && !m->relu);
}

// The bias input of the integer op: the quantized bias, checked to be quantized with scale
// x_scale * w_scale[c] and zero point 0 (constants or initializers, by their values at import),
// or zeros when there is none.
ctn_node bias_input(Graph &g, const Match &m, ctn_node xs, ctn_node ws, int64_t c) {
  if (m.bias.q == CTN_NODE_NONE) return g.add_constant(Tensor::empty(CTN_I32, Shape::from(1, &c)));
  const std::vector<float> sx = import_values<float>(g, xs, CTN_F32), sw = import_values<float>(g, ws, CTN_F32),
                           sb = import_values<float>(g, m.bias.scale, CTN_F32);
  const std::vector<int32_t> zb = import_values<int32_t>(g, m.bias.zp, CTN_I32);
  if (sx.size() != 1 || sw.empty() || sb.empty() || zb.empty()) return CTN_NODE_NONE;
  for (int32_t z : zb)
    if (z != 0) return CTN_NODE_NONE;
  for (int64_t o = 0; o < c; ++o) {
    const double want = static_cast<double>(sx[0]) * sw[sw.size() == 1 ? 0 : static_cast<size_t>(o)];
    const double got = sb[sb.size() == 1 ? 0 : static_cast<size_t>(o)];
    if (std::fabs(got - want) > 1e-6 * std::fabs(want)) return CTN_NODE_NONE;
  }
  const Shape &bs = g.info(m.bias.q).shape;
  if (bs.numel() != c) return CTN_NODE_NONE;
  return reshape(g, m.bias.q, Shape::from(1, &c));
}

ctn_node fuse_conv(Graph &g, const Match &m, ctn_node ys, ctn_node yzp) {
  const Node &conv = g.node(m.core);
  Dq dx, dw;
  if (!as_dq(g, conv.inputs[0], {CTN_U8, CTN_I8}, &dx) || !as_dq(g, conv.inputs[1], {CTN_U8, CTN_I8}, &dw)) return CTN_NODE_NONE;
  if (!one_value(g, dx.scale) || !one_value(g, dx.zp)) return CTN_NODE_NONE;
  const int64_t o = g.info(dw.q).shape[0];
  const int64_t pc[4] = {o, 1, 1, 1};
  const Shape per_o = Shape::from(4, pc);
  ctn_node sw = channel_param(g, dw.scale, o, per_o), zw = channel_param(g, dw.zp, o, per_o);
  if (sw == CTN_NODE_NONE || zw == CTN_NODE_NONE) return CTN_NODE_NONE;
  ctn_node bias = bias_input(g, m, dx.scale, dw.scale, o);
  if (bias == CTN_NODE_NONE) return CTN_NODE_NONE;
  ctn_attrs a = conv.attrs;
  a.i[7] = m.relu ? CTN_ACT_RELU : CTN_ACT_NONE;
  a.ni = 8;
  ctn_node in[9] = {dx.q, reshape(g, dx.scale, Shape{}), reshape(g, dx.zp, Shape{}), dw.q, sw, zw, ys, yzp, bias};
  return g.add_op(CTN_OP_QLINEAR_CONV2D, 9, in, &a);
}

ctn_node fuse_matmul(Graph &g, const Match &m, ctn_node ys, ctn_node yzp) {
  const Node &mm = g.node(m.core);
  const bool tb = mm.attrs.i[1] != 0;
  Dq da, db;
  if (mm.attrs.i[0] != 0 || !as_dq(g, mm.inputs[0], {CTN_U8, CTN_I8}, &da) || !as_dq(g, mm.inputs[1], {CTN_U8, CTN_I8}, &db))
    return CTN_NODE_NONE;
  if (!one_value(g, da.scale) || !one_value(g, da.zp)) return CTN_NODE_NONE;
  const Shape bs = g.info(db.q).shape;
  if (tb && bs.ndim != 2) return CTN_NODE_NONE;
  const int64_t n = tb ? bs[0] : bs[bs.ndim - 1];
  const int64_t pc[2] = {n, 1};
  const Shape per_n = tb ? Shape::from(2, pc) : Shape::from(1, &n);  // qparam's per-axis shapes
  ctn_node sb = channel_param(g, db.scale, n, per_n), zb = channel_param(g, db.zp, n, per_n);
  if (sb == CTN_NODE_NONE || zb == CTN_NODE_NONE) return CTN_NODE_NONE;
  ctn_node bias = bias_input(g, m, da.scale, db.scale, n);
  if (bias == CTN_NODE_NONE) return CTN_NODE_NONE;
  ctn_node bq = tb ? permute(g, db.q, {1, 0}) : db.q;
  ctn_node in[9] = {da.q, reshape(g, da.scale, Shape{}), reshape(g, da.zp, Shape{}), bq, sb, zb, ys, yzp, bias};
  return g.add_op(CTN_OP_QLINEAR_MATMUL, 9, in, nullptr);
}

// n is DQ(a) + DQ(b), a and b of one shape and of the Q's dtype, their scales and zero points
// one value each: the residual add of a QDQ model, which onnxruntime runs as QLinearAdd (the
// formula of qlinear_add; with operands of one shape only, where its kernel computes that).
bool match_add(const Graph &g, ctn_node n, int32_t qdt, Dq *da, Dq *db) {
  if (!is_op(g, n, CTN_OP_ADD)) return false;
  const std::vector<ctn_node> &in = g.node(n).inputs;
  return as_dq(g, in[0], {qdt}, da) && as_dq(g, in[1], {qdt}, db) && g.info(da->q).shape == g.info(db->q).shape &&
         one_value(g, da->scale) && one_value(g, da->zp) && one_value(g, db->scale) && one_value(g, db->zp);
}

}  // namespace

ctn_node qdq_fuse(NodeCtx &c, ctn_node y_scale, ctn_node y_zp, int32_t qdt) {
  Graph &g = c.g;
  Match m;
  Dq da, db;
  const bool add = match_add(g, c.in(0), qdt, &da, &db);
  if (!add && !match_chain(g, c.in(0), &m)) return CTN_NODE_NONE;
  if (g.info(y_scale).dtype != CTN_F32 || !one_value(g, y_scale) || (y_zp != CTN_NODE_NONE && !one_value(g, y_zp)))
    return CTN_NODE_NONE;
  ctn_node ys = reshape(g, y_scale, Shape{});
  ctn_node yzp = y_zp != CTN_NODE_NONE ? reshape(g, y_zp, Shape{}) : g.add_scalar(qdt, 0);
  if (add) {
    ctn_node in[8] = {da.q, reshape(g, da.scale, Shape{}), reshape(g, da.zp, Shape{}), db.q,
                      reshape(g, db.scale, Shape{}), reshape(g, db.zp, Shape{}), ys, yzp};
    return g.add_op(CTN_OP_QLINEAR_ADD, 8, in, nullptr);
  }
  return is_op(g, m.core, CTN_OP_CONV2D) ? fuse_conv(g, m, ys, yzp) : fuse_matmul(g, m, ys, yzp);
}

}  // namespace ctn::onnx
