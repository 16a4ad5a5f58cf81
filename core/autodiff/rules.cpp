// The gradient rule table. Each rule reads its forward node from the graph and emits backward
// nodes with ordinary graph ops, so backends need no special support for autodiff beyond the
// *_grad ops of ops.h. Broadcasting binary ops reduce their gradients with sum_to.
#include "autodiff/rules.h"

#include <chutney/ops.h>

#include "util/status.h"

namespace ctn::rules {

namespace {
const Node &N(Graph &g, ctn_node n) { return g.node(n); }
ctn_node in(Graph &g, ctn_node n, int k) { return g.node(n).inputs[static_cast<size_t>(k)]; }
Shape shape_of(Graph &g, ctn_node n) { return g.info(n).shape; }
ctn_node scalar_like(Graph &g, ctn_node like, double v) { return g.add_scalar(g.info(like).dtype, v); }
ctn_node keepdims_shape(Graph &g, ctn_node dy, const Node &fwd) {
  // Reshape a reduction's gradient to the keepdims shape so that it broadcasts to the input.
  const Shape &x = g.info(fwd.inputs[0]).shape;
  uint64_t mask = static_cast<uint64_t>(fwd.attrs.i[0]);
  ctn_attrs a{};
  for (uint32_t k = 0; k < x.ndim; ++k) a.i[a.ni++] = ((mask >> k) & 1) ? 1 : x[k];
  return g.op1(CTN_OP_RESHAPE, dy, &a);
}
ctn_node bcast_to(Graph &g, ctn_node v, const Shape s) {
  if (g.info(v).shape == s) return v;
  ctn_attrs a{};
  for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
  return g.op1(CTN_OP_BROADCAST_TO, v, &a);
}
}  // namespace

CTN_GRAD_RULE(add) {
  (void)node;
  if (need[0]) dx[0] = sum_to(g, dy, shape_of(g, in(g, node, 0)));
  if (need[1]) dx[1] = sum_to(g, dy, shape_of(g, in(g, node, 1)));
}
CTN_GRAD_RULE(sub) {
  if (need[0]) dx[0] = sum_to(g, dy, shape_of(g, in(g, node, 0)));
  if (need[1]) dx[1] = sum_to(g, g.op1(CTN_OP_NEG, dy), shape_of(g, in(g, node, 1)));
}
CTN_GRAD_RULE(mul) {
  ctn_node a = in(g, node, 0), b = in(g, node, 1);
  if (need[0]) dx[0] = sum_to(g, g.op2(CTN_OP_MUL, dy, b), shape_of(g, a));
  if (need[1]) dx[1] = sum_to(g, g.op2(CTN_OP_MUL, dy, a), shape_of(g, b));
}
CTN_GRAD_RULE(div) {
  ctn_node a = in(g, node, 0), b = in(g, node, 1);
  if (need[0]) dx[0] = sum_to(g, g.op2(CTN_OP_DIV, dy, b), shape_of(g, a));
  if (need[1]) {  // d(a/b)/db = -y/b
    ctn_node t = g.op2(CTN_OP_DIV, g.op2(CTN_OP_MUL, dy, node), b);
    dx[1] = sum_to(g, g.op1(CTN_OP_NEG, t), shape_of(g, b));
  }
}
CTN_GRAD_RULE(pow) {
  ctn_node a = in(g, node, 0), b = in(g, node, 1);
  if (need[0]) {  // b * a^(b-1)
    ctn_node bm1 = g.op2(CTN_OP_SUB, b, scalar_like(g, b, 1.0));
    ctn_node t = g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, dy, b), g.op2(CTN_OP_POW, a, bm1));
    dx[0] = sum_to(g, t, shape_of(g, a));
  }
  if (need[1]) {  // y * log(a)
    ctn_node t = g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, dy, node), g.op1(CTN_OP_LOG, a));
    dx[1] = sum_to(g, t, shape_of(g, b));
  }
}
static void minmax(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx, const char *cmp) {
  // Ties send the gradient to a (the first operand).
  ctn_node a = in(g, node, 0), b = in(g, node, 1);
  ctn_node mask = g.op2(cmp, a, b);
  ctn_node z = scalar_like(g, dy, 0.0);
  ctn_node w[3];
  if (need[0]) {
    w[0] = mask, w[1] = dy, w[2] = z;
    dx[0] = sum_to(g, g.add_op(CTN_OP_WHERE, 3, w, nullptr), shape_of(g, a));
  }
  if (need[1]) {
    w[0] = mask, w[1] = z, w[2] = dy;
    dx[1] = sum_to(g, g.add_op(CTN_OP_WHERE, 3, w, nullptr), shape_of(g, b));
  }
}
CTN_GRAD_RULE(maximum) { minmax(g, node, dy, need, dx, CTN_OP_GE); }
CTN_GRAD_RULE(minimum) { minmax(g, node, dy, need, dx, CTN_OP_LE); }
CTN_GRAD_RULE(neg) { if (need[0]) dx[0] = g.op1(CTN_OP_NEG, dy); (void)node; }
CTN_GRAD_RULE(exp) { if (need[0]) dx[0] = g.op2(CTN_OP_MUL, dy, node); }
CTN_GRAD_RULE(log) { if (need[0]) dx[0] = g.op2(CTN_OP_DIV, dy, in(g, node, 0)); }
CTN_GRAD_RULE(sqrt) {
  if (need[0]) dx[0] = g.op2(CTN_OP_DIV, dy, g.op2(CTN_OP_MUL, node, scalar_like(g, node, 2.0)));
}
CTN_GRAD_RULE(abs) {  // abs'(0) = sign(0) = 0
  if (need[0]) dx[0] = g.op2(CTN_OP_MUL, dy, g.op1(CTN_OP_SIGN, in(g, node, 0)));
}
CTN_GRAD_RULE(tanh) { if (need[0]) dx[0] = g.op2(CTN_OP_TANH_GRAD, node, dy); }
CTN_GRAD_RULE(sigmoid) { if (need[0]) dx[0] = g.op2(CTN_OP_SIGMOID_GRAD, node, dy); }
// relu'(0) = 0. The rule reads the output (y > 0 exactly where x > 0), so the pre-activation
// value is not kept alive for backward and matmul+bias+relu still fuses in training graphs.
CTN_GRAD_RULE(relu) { if (need[0]) dx[0] = g.op2(CTN_OP_RELU_GRAD, node, dy); }
CTN_GRAD_RULE(leaky_relu) {
  ctn_attrs a = N(g, node).attrs;
  if (need[0]) dx[0] = g.op2(CTN_OP_LEAKY_RELU_GRAD, in(g, node, 0), dy, &a);
}
CTN_GRAD_RULE(gelu) { if (need[0]) dx[0] = g.op2(CTN_OP_GELU_GRAD, in(g, node, 0), dy); }
CTN_GRAD_RULE(clamp) {  // 1 on [lo, hi] inclusive
  ctn_attrs a = N(g, node).attrs;
  if (need[0]) dx[0] = g.op2(CTN_OP_CLAMP_GRAD, in(g, node, 0), dy, &a);
}
CTN_GRAD_RULE(cast) {
  int32_t src = g.info(in(g, node, 0)).dtype;
  if (need[0] && dtype_is_float(src) && dtype_is_float(g.info(node).dtype)) {
    ctn_attrs a = attrs_i({src});
    dx[0] = g.op1(CTN_OP_CAST, dy, &a);
  }
}
CTN_GRAD_RULE(copy) { (void)node; if (need[0]) dx[0] = dy; }
CTN_GRAD_RULE(where) {
  ctn_node c = in(g, node, 0);
  ctn_node z = scalar_like(g, dy, 0.0);
  ctn_node w[3];
  if (need[1]) {
    w[0] = c, w[1] = dy, w[2] = z;
    dx[1] = sum_to(g, g.add_op(CTN_OP_WHERE, 3, w, nullptr), shape_of(g, in(g, node, 1)));
  }
  if (need[2]) {
    w[0] = c, w[1] = z, w[2] = dy;
    dx[2] = sum_to(g, g.add_op(CTN_OP_WHERE, 3, w, nullptr), shape_of(g, in(g, node, 2)));
  }
}
CTN_GRAD_RULE(matmul) {
  // With A = op(a), B = op(b): dA = dy B^T, dB = A^T dy, then undo the operand transposes.
  ctn_node a = in(g, node, 0), b = in(g, node, 1);
  bool ta = N(g, node).attrs.i[0], tb = N(g, node).attrs.i[1];
  auto mm = [&](ctn_node x, ctn_node y, int tx, int ty) {
    ctn_attrs at = attrs_i({tx, ty});
    return g.op2(CTN_OP_MATMUL, x, y, &at);
  };
  if (need[0]) {
    ctn_node r = !ta ? (!tb ? mm(dy, b, 0, 1) : mm(dy, b, 0, 0)) : (!tb ? mm(b, dy, 0, 1) : mm(b, dy, 1, 1));
    dx[0] = sum_to(g, r, shape_of(g, a));
  }
  if (need[1]) {
    ctn_node r = !tb ? (!ta ? mm(a, dy, 1, 0) : mm(a, dy, 0, 0)) : (!ta ? mm(dy, a, 1, 0) : mm(dy, a, 1, 1));
    dx[1] = sum_to(g, r, shape_of(g, b));
  }
}
CTN_GRAD_RULE(sum) {
  if (!need[0]) return;
  const Node f = N(g, node);
  dx[0] = bcast_to(g, keepdims_shape(g, dy, f), shape_of(g, f.inputs[0]));
}
CTN_GRAD_RULE(mean) {
  if (!need[0]) return;
  const Node f = N(g, node);
  const Shape x = shape_of(g, f.inputs[0]);
  int64_t count = 1;
  for (uint32_t k = 0; k < x.ndim; ++k)
    if ((static_cast<uint64_t>(f.attrs.i[0]) >> k) & 1) count *= x[k];
  ctn_node s = g.op2(CTN_OP_DIV, dy, scalar_like(g, dy, static_cast<double>(count ? count : 1)));
  dx[0] = bcast_to(g, keepdims_shape(g, s, f), x);
}
CTN_GRAD_RULE(max) {
  // Every tied maximum shares the gradient equally.
  if (!need[0]) return;
  const Node f = N(g, node);
  ctn_node x = f.inputs[0];
  ctn_attrs ca = attrs_i({g.info(x).dtype});
  ctn_node mask = g.op1(CTN_OP_CAST, g.op2(CTN_OP_EQ, x, keepdims_shape(g, node, f)), &ca);
  ctn_attrs ra = attrs_i({f.attrs.i[0], 1});
  ctn_node count = g.op1(CTN_OP_SUM, mask, &ra);
  ctn_node share = g.op2(CTN_OP_DIV, keepdims_shape(g, dy, f), count);
  dx[0] = g.op2(CTN_OP_MUL, mask, share);
}
CTN_GRAD_RULE(reshape) {
  if (!need[0]) return;
  const Shape x = shape_of(g, in(g, node, 0));
  ctn_attrs a{};
  for (uint32_t k = 0; k < x.ndim; ++k) a.i[a.ni++] = x[k];
  dx[0] = g.op1(CTN_OP_RESHAPE, dy, &a);
}
CTN_GRAD_RULE(permute) {
  if (!need[0]) return;
  const ctn_attrs fa = N(g, node).attrs;
  ctn_attrs a{};
  a.ni = fa.ni;
  for (uint32_t k = 0; k < a.ni; ++k) a.i[fa.i[k]] = k;
  dx[0] = g.op1(CTN_OP_PERMUTE, dy, &a);
}
CTN_GRAD_RULE(slice) {
  if (!need[0]) return;
  const Node f = N(g, node);
  ctn_attrs a = f.attrs;
  a.i[4] = shape_of(g, f.inputs[0])[static_cast<uint32_t>(f.attrs.i[0])];
  a.ni = 5;
  dx[0] = g.op1(CTN_OP_SLICE_GRAD, dy, &a);
}
CTN_GRAD_RULE(slice_grad) {
  if (!need[0]) return;
  ctn_attrs a = N(g, node).attrs;
  a.i[4] = 0;
  a.ni = 4;
  dx[0] = g.op1(CTN_OP_SLICE, dy, &a);
}
CTN_GRAD_RULE(concat) {
  const Node f = N(g, node);
  int64_t ax = f.attrs.i[0], start = 0;
  for (size_t k = 0; k < f.inputs.size(); ++k) {
    int64_t len = shape_of(g, f.inputs[k])[static_cast<uint32_t>(ax)];
    if (need[k]) {
      ctn_attrs a = attrs_i({ax, start, start + len, 1});
      dx[k] = g.op1(CTN_OP_SLICE, dy, &a);
    }
    start += len;
  }
}
CTN_GRAD_RULE(broadcast_to) { if (need[0]) dx[0] = sum_to(g, dy, shape_of(g, in(g, node, 0))); }
CTN_GRAD_RULE(softmax) {
  ctn_attrs a = N(g, node).attrs;
  if (need[0]) dx[0] = g.op2(CTN_OP_SOFTMAX_GRAD, node, dy, &a);
}
CTN_GRAD_RULE(log_softmax) {
  ctn_attrs a = N(g, node).attrs;
  if (need[0]) dx[0] = g.op2(CTN_OP_LOG_SOFTMAX_GRAD, node, dy, &a);
}
CTN_GRAD_RULE(cross_entropy) {
  if (!need[0]) return;
  ctn_node w[3] = {in(g, node, 0), in(g, node, 1), dy};
  dx[0] = g.add_op(CTN_OP_CROSS_ENTROPY_GRAD, 3, w, nullptr);
}
CTN_GRAD_RULE(zero) { (void)g, (void)node, (void)dy, (void)need, (void)dx; }


}  // namespace ctn::rules
