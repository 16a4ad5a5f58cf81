// Built-in op schemas: shape/dtype inference (with attribute normalisation), the gradient and
// tangent rules, and the table that ties each op name to them.
#include <chutney/ops.h>

#include "autodiff/rules.h"
#include "graph/op.h"
#include "tensor/tensor.h"
#include "util/status.h"

#include <cstring>
#include <vector>

// Gradient rules of the ops below (OpDef::grad), kept beside their rows.
// The gradient rule table. Each rule reads its forward node from the graph and emits backward
// nodes with ordinary graph ops, so backends need no special support for autodiff beyond the
// *_grad ops of ops.h. Broadcasting binary ops reduce their gradients with sum_to.
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



// Tangent rules of the ops below with a formula of their own (OpDef::tangent).
CTN_TANGENT_RULE(add_jvp) {
  Fwd x(g, node, t);
  return bcast(g, add_tangents(g, t[0], t[1]), x.out());
}

CTN_TANGENT_RULE(sub_jvp) {
  Fwd x(g, node, t);
  if (x.none(1)) return bcast(g, t[0], x.out());
  const ctn_node r = x.none(0) ? g.op1(CTN_OP_NEG, t[1]) : g.op2(CTN_OP_SUB, t[0], t[1]);
  return bcast(g, r, x.out());
}

CTN_TANGENT_RULE(div_jvp) {  // (ta - y tb) / b
  Fwd x(g, node, t);
  ctn_node num = t[0];
  if (!x.none(1)) {
    ctn_node yt = g.op2(CTN_OP_MUL, node, t[1]);
    num = num == CTN_NODE_NONE ? g.op1(CTN_OP_NEG, yt) : g.op2(CTN_OP_SUB, num, yt);
  }
  return num == CTN_NODE_NONE ? num : bcast(g, g.op2(CTN_OP_DIV, num, x.in(1)), x.out());
}

CTN_TANGENT_RULE(pow_jvp) {  // ta b a^(b-1) + tb y log(a)
  Fwd x(g, node, t);
  ctn_node r = CTN_NODE_NONE;
  if (!x.none(0)) {
    ctn_node bm1 = g.op2(CTN_OP_SUB, x.in(1), g.add_scalar(g.info(x.in(1)).dtype, 1.0));
    r = g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, t[0], x.in(1)), g.op2(CTN_OP_POW, x.in(0), bm1));
  }
  if (!x.none(1))
    r = add_tangents(g, r, g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, t[1], node), g.op1(CTN_OP_LOG, x.in(0))));
  return r == CTN_NODE_NONE ? r : bcast(g, r, x.out());
}

CTN_TANGENT_RULE(minmax_jvp) {  // maximum, minimum: ties follow a, as the reverse rule
  Fwd x(g, node, t);
  if (x.none(0) && x.none(1)) return CTN_NODE_NONE;
  ctn_node mask = g.op2(x.f.op->name == CTN_OP_MAXIMUM ? CTN_OP_GE : CTN_OP_LE, x.in(0), x.in(1));
  ctn_node w[3] = {mask, bcast(g, x.tz(g, 0), x.out()), bcast(g, x.tz(g, 1), x.out())};
  return g.add_op(CTN_OP_WHERE, 3, w, nullptr);
}

CTN_TANGENT_RULE(where_jvp) {
  Fwd x(g, node, t);
  if (x.none(1) && x.none(2)) return CTN_NODE_NONE;
  ctn_node w[3] = {x.in(0), x.tz(g, 1), x.tz(g, 2)};
  return bcast(g, g.add_op(CTN_OP_WHERE, 3, w, nullptr), x.out());
}

CTN_TANGENT_RULE(concat_jvp) {
  Fwd x(g, node, t);
  bool any = false;
  std::vector<ctn_node> ins;
  for (size_t i = 0; i < x.k(); ++i) {
    any = any || !x.none(i);
    ins.push_back(x.tz(g, i));
  }
  return any ? g.add_op(*x.f.op, static_cast<uint32_t>(x.k()), ins.data(), x.f.attrs) : CTN_NODE_NONE;
}

CTN_TANGENT_RULE(log_softmax_jvp) {  // ta - sum(softmax * ta) along the axis
  Fwd x(g, node, t);
  if (x.none(0)) return CTN_NODE_NONE;
  ctn_attrs a = attrs_i({static_cast<int64_t>(1ull << x.f.attrs.i[0]), 1});
  ctn_node s = g.op1(CTN_OP_SUM, g.op2(CTN_OP_MUL, g.op1(CTN_OP_EXP, node), t[0]), &a);
  return g.op2(CTN_OP_SUB, t[0], s);
}

CTN_TANGENT_RULE(max_jvp) {  // every tied maximum shares equally, as the reverse rule
  Fwd x(g, node, t);
  if (x.none(0)) return CTN_NODE_NONE;
  const Shape &xs = g.info(x.in(0)).shape;
  const uint64_t mask_axes = static_cast<uint64_t>(x.f.attrs.i[0]);
  ctn_attrs ka{};
  for (uint32_t d = 0; d < xs.ndim; ++d) ka.i[ka.ni++] = ((mask_axes >> d) & 1) ? 1 : xs[d];
  ctn_node yk = g.op1(CTN_OP_RESHAPE, node, &ka);
  ctn_attrs ca = attrs_i({g.info(x.in(0)).dtype});
  ctn_node mask = g.op1(CTN_OP_CAST, g.op2(CTN_OP_EQ, x.in(0), yk), &ca);
  ctn_node num = g.op1(CTN_OP_SUM, g.op2(CTN_OP_MUL, mask, t[0]), &x.f.attrs);
  ctn_node cnt = g.op1(CTN_OP_SUM, mask, &x.f.attrs);
  return g.op2(CTN_OP_DIV, num, cnt);
}

// Backward ops, so that forward over reverse (Hessian-vector products) works.
CTN_TANGENT_RULE(masked_grad_jvp) {  // relu/leaky_relu/clamp_grad (x, dy): linear in dy
  Fwd x(g, node, t);
  return x.none(1) ? CTN_NODE_NONE : g.op2(x.f.op->name.c_str(), x.in(0), t[1], &x.f.attrs);
}

CTN_TANGENT_RULE(output_grad_jvp) {
  // tanh_grad, sigmoid_grad (y, dy). tanh: dy (1 - y^2) -> tdy (1 - y^2) - 2 y dy ty;
  // sigmoid: dy y (1 - y) -> ... + dy (1 - 2y) ty
  Fwd x(g, node, t);
  const bool is_tanh = x.f.op->name == CTN_OP_TANH_GRAD;
  ctn_node r = x.none(1) ? CTN_NODE_NONE : g.op2(x.f.op->name.c_str(), x.in(0), t[1], &x.f.attrs);
  if (!x.none(0)) {
    const int32_t dt = g.info(x.in(0)).dtype;
    ctn_node d = is_tanh ? g.op2(CTN_OP_MUL, g.add_scalar(dt, -2.0), x.in(0))
                         : g.op2(CTN_OP_SUB, g.add_scalar(dt, 1.0), g.op2(CTN_OP_MUL, g.add_scalar(dt, 2.0), x.in(0)));
    r = add_tangents(g, r, g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, d, x.in(1)), t[0]));
  }
  return r == CTN_NODE_NONE ? r : bcast(g, r, x.out());
}

CTN_TANGENT_RULE(cross_entropy_grad_jvp) {
  // (logits [N, C], labels, dy) -> dy (softmax(logits) - onehot) / N: linear in dy; in the
  // logits, dy / N times softmax's (symmetric) Jacobian.
  Fwd x(g, node, t);
  ctn_node r = CTN_NODE_NONE;
  if (!x.none(2)) {
    ctn_node w[3] = {x.in(0), x.in(1), t[2]};
    r = g.add_op(CTN_OP_CROSS_ENTROPY_GRAD, 3, w, &x.f.attrs);
  }
  if (!x.none(0)) {
    const int32_t dt = g.info(x.in(0)).dtype;
    const int64_t nrows = g.info(x.in(0)).shape[0];
    ctn_attrs ax = attrs_i({1});
    ctn_node sm = g.op1(CTN_OP_SOFTMAX, x.in(0), &ax);
    ctn_node j = g.op2(CTN_OP_SOFTMAX_GRAD, sm, t[0], &ax);
    ctn_node scale = g.op2(CTN_OP_DIV, x.in(2), g.add_scalar(dt, static_cast<double>(nrows)));
    r = add_tangents(g, r, g.op2(CTN_OP_MUL, j, scale));
  }
  return r;
}

}  // namespace ctn::rules

namespace ctn {

std::string values_str(const ValueInfo *in, uint32_t n) {
  std::string s;
  for (uint32_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += dtype_name(in[i].dtype);
    s += shape_str(in[i].shape);
  }
  return s;
}

namespace {

const char *N(const OpDef &op) { return op.name.c_str(); }

void need_float(const OpDef &op, const ValueInfo &v, const char *which) {
  if (!dtype_is_float(v.dtype))
    fail(CTN_ERR_DTYPE, "%s: %s has dtype %s; this op needs f32 or f64", N(op), which, dtype_name(v.dtype));
}

void same_dtype(const OpDef &op, const ValueInfo *in, uint32_t a, uint32_t b) {
  if (in[a].dtype != in[b].dtype)
    fail(CTN_ERR_DTYPE, "%s: operand dtypes differ: %s", N(op), values_str(in, 2).c_str());
}

ValueInfo infer_unary_float(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &) {
  need_float(op, in[0], "the input");
  return in[0];
}

ValueInfo infer_leaky(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  a.nf = 1;
  return infer_unary_float(op, in, n, a);
}

ValueInfo infer_clamp(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  if (a.f[0] > a.f[1]) fail(CTN_ERR_INVALID_ARGUMENT, "%s: lo (%g) is greater than hi (%g)", N(op), a.f[0], a.f[1]);
  a.nf = 2;
  return infer_unary_float(op, in, n, a);
}

ValueInfo infer_cast(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  if (!dtype_valid(static_cast<int32_t>(a.i[0])))
    fail(CTN_ERR_DTYPE, "%s: unknown target dtype %lld", N(op), static_cast<long long>(a.i[0]));
  a.ni = 1;
  return ValueInfo{static_cast<int32_t>(a.i[0]), in[0].shape};
}

ValueInfo infer_identity(const OpDef &, const ValueInfo *in, uint32_t, ctn_attrs &) { return in[0]; }

ValueInfo bcast(const OpDef &op, const ValueInfo *in, uint32_t n) {
  Shape s = in[0].shape;
  for (uint32_t i = 1; i < n; ++i)
    if (!broadcast_shapes(s, in[i].shape, &s))
      fail(CTN_ERR_SHAPE, "%s: shapes do not broadcast: %s", N(op), values_str(in, n).c_str());
  return ValueInfo{in[0].dtype, s};
}

ValueInfo infer_binary_float(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &) {
  same_dtype(op, in, 0, 1);
  need_float(op, in[0], "operand a");
  return bcast(op, in, n);
}

ValueInfo infer_compare(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &) {
  same_dtype(op, in, 0, 1);
  ValueInfo r = bcast(op, in, n);
  r.dtype = CTN_BOOL;
  return r;
}

ValueInfo infer_where(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &) {
  if (in[0].dtype != CTN_BOOL)
    fail(CTN_ERR_DTYPE, "%s: the condition must be bool, got %s", N(op), dtype_name(in[0].dtype));
  if (in[1].dtype != in[2].dtype)
    fail(CTN_ERR_DTYPE, "%s: a and b dtypes differ: %s", N(op), values_str(in, 3).c_str());
  ValueInfo r = bcast(op, in, n);
  r.dtype = in[1].dtype;
  return r;
}

// (x or y, dy) -> dx, same shape.
ValueInfo infer_elem_grad(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &) {
  same_dtype(op, in, 0, 1);
  need_float(op, in[0], "the input");
  if (in[0].shape != in[1].shape)
    fail(CTN_ERR_SHAPE, "%s: shapes differ: %s", N(op), values_str(in, 2).c_str());
  return in[0];
}

ValueInfo infer_matmul_common(const OpDef &op, const ValueInfo *in) {
  same_dtype(op, in, 0, 1);
  need_float(op, in[0], "operand a");
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.ndim < 2 || b.ndim < 2)
    fail(CTN_ERR_SHAPE, "%s: operands must be at least 2-d: %s", N(op), values_str(in, 2).c_str());
  return ValueInfo{in[0].dtype, {}};
}

ValueInfo infer_matmul(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &at) {
  infer_matmul_common(op, in);
  const Shape &a = in[0].shape, &b = in[1].shape;
  bool ta = at.i[0] != 0, tb = at.i[1] != 0;
  at.i[0] = ta;
  at.i[1] = tb;
  at.ni = op.n_inputs == 3 ? 3 : 2;
  int64_t m = ta ? a[a.ndim - 1] : a[a.ndim - 2];
  int64_t ka = ta ? a[a.ndim - 2] : a[a.ndim - 1];
  int64_t kb = tb ? b[b.ndim - 1] : b[b.ndim - 2];
  int64_t nn = tb ? b[b.ndim - 2] : b[b.ndim - 1];
  if (ka != kb)
    fail(CTN_ERR_SHAPE, "%s: inner dimensions differ (%lld vs %lld): a %s%s, b %s%s", N(op), static_cast<long long>(ka),
         static_cast<long long>(kb), shape_str(a).c_str(), ta ? " transposed" : "", shape_str(b).c_str(),
         tb ? " transposed" : "");
  Shape ba, bb, batch;
  ba.ndim = a.ndim - 2;
  for (uint32_t i = 0; i < ba.ndim; ++i) ba[i] = a[i];
  bb.ndim = b.ndim - 2;
  for (uint32_t i = 0; i < bb.ndim; ++i) bb[i] = b[i];
  if (!broadcast_shapes(ba, bb, &batch))
    fail(CTN_ERR_SHAPE, "%s: batch dimensions do not broadcast: a %s, b %s", N(op), shape_str(a).c_str(),
         shape_str(b).c_str());
  ValueInfo r{in[0].dtype, batch};
  r.shape.ndim = batch.ndim + 2;
  r.shape[batch.ndim] = m;
  r.shape[batch.ndim + 1] = nn;
  return r;
}

ValueInfo infer_matmul_bias_act(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &at) {
  ValueInfo r = infer_matmul(op, in, n, at);
  if (in[2].dtype != in[0].dtype || in[2].shape.ndim != 1 || in[2].shape[0] != r.shape[r.shape.ndim - 1])
    fail(CTN_ERR_SHAPE, "%s: bias must be [N] with N = %lld: %s", N(op),
         static_cast<long long>(r.shape[r.shape.ndim - 1]), values_str(in, 3).c_str());
  if (at.i[2] < CTN_ACT_NONE || at.i[2] > CTN_ACT_GELU)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: unknown activation %lld", N(op), static_cast<long long>(at.i[2]));
  return r;
}

ValueInfo infer_reduce(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &at) {
  need_float(op, in[0], "the input");
  const Shape &x = in[0].shape;
  uint64_t mask = static_cast<uint64_t>(at.i[0]);
  uint64_t all = x.ndim ? ((1ull << x.ndim) - 1) : 0;
  if (mask & ~all)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: axis mask 0x%llx names axes beyond a %u-d input %s", N(op),
         static_cast<unsigned long long>(mask), x.ndim, shape_str(x).c_str());
  if (mask == 0) mask = all;
  bool keep = at.i[1] != 0;
  at.i[0] = static_cast<int64_t>(mask);
  at.i[1] = keep;
  at.ni = 2;
  ValueInfo r{in[0].dtype, {}};
  for (uint32_t k = 0; k < x.ndim; ++k) {
    bool red = (mask >> k) & 1;
    if (red && x[k] == 0 && op.name == CTN_OP_MAX)
      fail(CTN_ERR_SHAPE, "%s: cannot take the max over an empty axis %u of %s", N(op), k, shape_str(x).c_str());
    if (!red) r.shape[r.shape.ndim++] = x[k];
    else if (keep) r.shape[r.shape.ndim++] = 1;
  }
  return r;
}

ValueInfo infer_reshape(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &at) {
  Shape s = resolve_reshape(N(op), in[0].shape, at.ni, at.i);
  for (uint32_t k = 0; k < s.ndim; ++k) at.i[k] = s[k];
  return ValueInfo{in[0].dtype, s};
}

ValueInfo infer_permute(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &at) {
  const Shape &x = in[0].shape;
  bool seen[CTN_MAX_DIMS] = {};
  ValueInfo r{in[0].dtype, x};
  for (uint32_t k = 0; k < x.ndim; ++k) {
    int64_t p = at.i[k];
    if (p < 0) p += x.ndim;
    if (p < 0 || p >= static_cast<int64_t>(x.ndim) || seen[p])
      fail(CTN_ERR_INVALID_ARGUMENT, "%s: the permutation is not a permutation of the %u axes of %s", N(op), x.ndim,
           shape_str(x).c_str());
    seen[p] = true;
    at.i[k] = p;
    r.shape[k] = x[static_cast<uint32_t>(p)];
  }
  at.ni = x.ndim;
  return r;
}

ValueInfo infer_slice(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &at) {
  const Shape &x = in[0].shape;
  int32_t ax = normalize_axis(N(op), at.i[0], x.ndim);
  if (at.i[3] <= 0) fail(CTN_ERR_INVALID_ARGUMENT, "%s: step must be > 0, got %lld", N(op), static_cast<long long>(at.i[3]));
  int64_t len = normalize_slice(x[ax], &at.i[1], &at.i[2], at.i[3]);
  // A step past the axis takes one element at most: capped, so that no backend multiplies a
  // stride by a step near 2^63.
  if (at.i[3] > x[ax]) at.i[3] = x[ax] > 0 ? x[ax] : 1;
  at.i[0] = ax;
  at.ni = 4;
  ValueInfo r{in[0].dtype, x};
  r.shape[ax] = len;
  return r;
}

ValueInfo infer_slice_grad(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &at) {
  const Shape &dy = in[0].shape;
  int32_t ax = normalize_axis(N(op), at.i[0], dy.ndim);
  int64_t size = at.i[4];
  if (size < 0 || at.i[3] <= 0) fail(CTN_ERR_INVALID_ARGUMENT, "%s: bad source size or step", N(op));
  int64_t len = normalize_slice(size, &at.i[1], &at.i[2], at.i[3]);
  if (at.i[3] > size) at.i[3] = size > 0 ? size : 1;  // as in infer_slice
  if (len != dy[ax])
    fail(CTN_ERR_SHAPE, "%s: the slice has %lld elements along axis %d but dy %s has %lld", N(op),
         static_cast<long long>(len), ax, shape_str(dy).c_str(), static_cast<long long>(dy[ax]));
  at.i[0] = ax;
  at.ni = 5;
  ValueInfo r{in[0].dtype, dy};
  r.shape[ax] = size;
  return r;
}

ValueInfo infer_concat(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &at) {
  const Shape &x = in[0].shape;
  if (x.ndim == 0) fail(CTN_ERR_SHAPE, "%s: cannot concatenate 0-d values", N(op));
  int32_t ax = normalize_axis(N(op), at.i[0], x.ndim);
  ValueInfo r = in[0];
  for (uint32_t k = 1; k < n; ++k) {
    if (in[k].dtype != in[0].dtype) fail(CTN_ERR_DTYPE, "%s: dtypes differ: %s", N(op), values_str(in, n).c_str());
    bool ok = in[k].shape.ndim == x.ndim;
    for (uint32_t d = 0; ok && d < x.ndim; ++d)
      if (d != static_cast<uint32_t>(ax) && in[k].shape[d] != x[d]) ok = false;
    if (!ok)
      fail(CTN_ERR_SHAPE, "%s: shapes differ outside axis %d: %s", N(op), ax, values_str(in, n).c_str());
    r.shape[ax] += in[k].shape[ax];
  }
  at.i[0] = ax;
  at.ni = 1;
  return r;
}

ValueInfo infer_broadcast_to(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &at) {
  Shape t = Shape::from(at.ni, at.i);
  Shape r;
  if (!broadcast_shapes(in[0].shape, t, &r) || r != t)
    fail(CTN_ERR_SHAPE, "%s: %s cannot be broadcast to %s", N(op), shape_str(in[0].shape).c_str(), shape_str(t).c_str());
  return ValueInfo{in[0].dtype, t};
}

ValueInfo infer_softmax(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &at) {
  for (uint32_t k = 0; k < n; ++k) need_float(op, in[k], k ? "dy" : "the input");
  if (n == 2) infer_elem_grad(op, in, n, at);
  if (in[0].shape.ndim == 0) fail(CTN_ERR_SHAPE, "%s: the input must be at least 1-d", N(op));
  at.i[0] = normalize_axis(N(op), at.i[0], in[0].shape.ndim);
  at.ni = 1;
  return in[0];
}

void check_ce(const OpDef &op, const ValueInfo *in) {
  need_float(op, in[0], "logits");
  if (in[0].shape.ndim != 2)
    fail(CTN_ERR_SHAPE, "%s: logits must be [N, C], got %s", N(op), shape_str(in[0].shape).c_str());
  if (in[1].dtype != CTN_I32 && in[1].dtype != CTN_I64)
    fail(CTN_ERR_DTYPE, "%s: labels must be i32 or i64, got %s", N(op), dtype_name(in[1].dtype));
  if (in[1].shape.ndim != 1 || in[1].shape[0] != in[0].shape[0])
    fail(CTN_ERR_SHAPE, "%s: labels must be [N] with N = %lld: %s", N(op), static_cast<long long>(in[0].shape[0]),
         values_str(in, 2).c_str());
}

ValueInfo infer_cross_entropy(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &) {
  check_ce(op, in);
  return ValueInfo{in[0].dtype, {}};
}

ValueInfo infer_cross_entropy_grad(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &) {
  check_ce(op, in);
  if (in[2].dtype != in[0].dtype || in[2].shape.numel() != 1)
    fail(CTN_ERR_SHAPE, "%s: dy must be a one-element %s value: %s", N(op), dtype_name(in[0].dtype),
         values_str(in, 3).c_str());
  return in[0];
}

ValueInfo infer_leaky_grad(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  a.nf = 1;
  return infer_elem_grad(op, in, n, a);
}

ValueInfo infer_clamp_grad(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  a.nf = 2;
  return infer_elem_grad(op, in, n, a);
}

// erf: dx = dy 2/sqrt(pi) e^(-x^2).
void erf_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (!need[0]) return;
  const ctn_node x = g.node(node).inputs[0];
  const ctn_node e = g.op1(CTN_OP_EXP, g.op1(CTN_OP_NEG, g.op2(CTN_OP_MUL, x, x)));
  dx[0] = g.op2(CTN_OP_MUL, dy, g.op2(CTN_OP_MUL, e, g.add_scalar(g.info(x).dtype, 1.12837916709551257390)));
}

// atan: dx = dy / (1 + x^2).
void atan_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (!need[0]) return;
  const ctn_node x = g.node(node).inputs[0];
  dx[0] = g.op2(CTN_OP_DIV, dy, g.op2(CTN_OP_ADD, g.add_scalar(g.info(x).dtype, 1.0), g.op2(CTN_OP_MUL, x, x)));
}

// sin: dx = dy cos x; cos: dx = -dy sin x; tan: dx = dy (1 + y^2), y the output.
void sin_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0]) dx[0] = g.op2(CTN_OP_MUL, dy, g.op1(CTN_OP_COS, g.node(node).inputs[0]));
}
void cos_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0]) dx[0] = g.op1(CTN_OP_NEG, g.op2(CTN_OP_MUL, dy, g.op1(CTN_OP_SIN, g.node(node).inputs[0])));
}
void tan_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (!need[0]) return;
  ctn_node one = g.add_scalar(g.info(node).dtype, 1.0);
  dx[0] = g.op2(CTN_OP_MUL, dy, g.op2(CTN_OP_ADD, one, g.op2(CTN_OP_MUL, node, node)));
}

// The inverse and hyperbolic functions (x the input): asin dx = dy / sqrt(1 - x^2), acos its
// negative, sinh dx = dy cosh x, cosh dx = dy sinh x, asinh dx = dy / sqrt(x^2 + 1), acosh dx =
// dy / sqrt(x^2 - 1), atanh dx = dy / (1 - x^2).
ctn_node one_minus_sq(Graph &g, ctn_node x, double sign) {  // sign (1 - x^2) with sign = +-1
  ctn_node sq = g.op2(CTN_OP_MUL, x, x), one = g.add_scalar(g.info(x).dtype, 1.0);
  return sign > 0 ? g.op2(CTN_OP_SUB, one, sq) : g.op2(CTN_OP_SUB, sq, one);
}
void asin_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0]) dx[0] = g.op2(CTN_OP_DIV, dy, g.op1(CTN_OP_SQRT, one_minus_sq(g, g.node(node).inputs[0], 1)));
}
void acos_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0])
    dx[0] = g.op1(CTN_OP_NEG, g.op2(CTN_OP_DIV, dy, g.op1(CTN_OP_SQRT, one_minus_sq(g, g.node(node).inputs[0], 1))));
}
void sinh_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0]) dx[0] = g.op2(CTN_OP_MUL, dy, g.op1(CTN_OP_COSH, g.node(node).inputs[0]));
}
void cosh_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0]) dx[0] = g.op2(CTN_OP_MUL, dy, g.op1(CTN_OP_SINH, g.node(node).inputs[0]));
}
void asinh_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (!need[0]) return;
  ctn_node x = g.node(node).inputs[0];
  ctn_node r = g.op1(CTN_OP_SQRT, g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, x, x), g.add_scalar(g.info(x).dtype, 1.0)));
  dx[0] = g.op2(CTN_OP_DIV, dy, r);
}
void acosh_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0]) dx[0] = g.op2(CTN_OP_DIV, dy, g.op1(CTN_OP_SQRT, one_minus_sq(g, g.node(node).inputs[0], -1)));
}
void atanh_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  if (need[0]) dx[0] = g.op2(CTN_OP_DIV, dy, one_minus_sq(g, g.node(node).inputs[0], 1));
}

// One row per op: inference, gradient and tangent rules, attributes, and the probe node of
// ctn_context_op_support (OpDef, graph/op.h). Elementwise ops' kernels are generated from their
// formula in backends/common/ew_ops.py.
const OpDef kOps[] = {
    OpDef{.name = CTN_OP_NEG, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::neg, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_EXP, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::exp, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_LOG, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::log, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_SQRT, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::sqrt, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ABS, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::abs, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_SIGN, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::zero, .flags = OP_ELEMENTWISE, .tangent = rules::zero_jvp},
    OpDef{.name = CTN_OP_TANH, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::tanh, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_SIGMOID, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::sigmoid, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_RELU, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::relu, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_GELU, .n_inputs = 1, .infer = infer_unary_float, .grad = rules::gelu, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_LEAKY_RELU, .n_inputs = 1, .infer = infer_leaky, .grad = rules::leaky_relu, .flags = OP_ELEMENTWISE, .attributes = "f[0] slope", .tangent = rules::self_adjoint_jvp, .probe = {.floats = {0.1}, .nf = 1}},
    OpDef{.name = CTN_OP_CLAMP, .n_inputs = 1, .infer = infer_clamp, .grad = rules::clamp, .flags = OP_ELEMENTWISE, .attributes = "f[0] lo, f[1] hi", .tangent = rules::self_adjoint_jvp, .probe = {.floats = {-1, 1}, .nf = 2}},
    OpDef{.name = CTN_OP_CAST, .n_inputs = 1, .infer = infer_cast, .grad = rules::cast, .flags = OP_ELEMENTWISE, .attributes = "i[0] target dtype", .tangent = rules::linear_jvp, .probe = {.inputs = "D[2,3]", .ints = {}, .ni = 1}},
    OpDef{.name = CTN_OP_ERF, .n_inputs = 1, .infer = infer_unary_float, .grad = erf_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ATAN, .n_inputs = 1, .infer = infer_unary_float, .grad = atan_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_SIN, .n_inputs = 1, .infer = infer_unary_float, .grad = sin_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_COS, .n_inputs = 1, .infer = infer_unary_float, .grad = cos_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_TAN, .n_inputs = 1, .infer = infer_unary_float, .grad = tan_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ASIN, .n_inputs = 1, .infer = infer_unary_float, .grad = asin_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ACOS, .n_inputs = 1, .infer = infer_unary_float, .grad = acos_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_SINH, .n_inputs = 1, .infer = infer_unary_float, .grad = sinh_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_COSH, .n_inputs = 1, .infer = infer_unary_float, .grad = cosh_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ASINH, .n_inputs = 1, .infer = infer_unary_float, .grad = asinh_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ACOSH, .n_inputs = 1, .infer = infer_unary_float, .grad = acosh_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ATANH, .n_inputs = 1, .infer = infer_unary_float, .grad = atanh_grad, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_COPY, .n_inputs = 1, .infer = infer_identity, .grad = rules::copy, .flags = OP_ELEMENTWISE, .tangent = rules::self_adjoint_jvp},
    OpDef{.name = CTN_OP_ADD, .n_inputs = 2, .infer = infer_binary_float, .grad = rules::add, .flags = OP_ELEMENTWISE, .tangent = rules::add_jvp},
    OpDef{.name = CTN_OP_SUB, .n_inputs = 2, .infer = infer_binary_float, .grad = rules::sub, .flags = OP_ELEMENTWISE, .tangent = rules::sub_jvp},
    OpDef{.name = CTN_OP_MUL, .n_inputs = 2, .infer = infer_binary_float, .grad = rules::mul, .flags = OP_ELEMENTWISE, .tangent = rules::bilinear_jvp},
    OpDef{.name = CTN_OP_DIV, .n_inputs = 2, .infer = infer_binary_float, .grad = rules::div, .flags = OP_ELEMENTWISE, .tangent = rules::div_jvp},
    OpDef{.name = CTN_OP_POW, .n_inputs = 2, .infer = infer_binary_float, .grad = rules::pow, .flags = OP_ELEMENTWISE, .tangent = rules::pow_jvp},
    OpDef{.name = CTN_OP_MAXIMUM, .n_inputs = 2, .infer = infer_binary_float, .grad = rules::maximum, .flags = OP_ELEMENTWISE, .tangent = rules::minmax_jvp},
    OpDef{.name = CTN_OP_MINIMUM, .n_inputs = 2, .infer = infer_binary_float, .grad = rules::minimum, .flags = OP_ELEMENTWISE, .tangent = rules::minmax_jvp},
    OpDef{.name = CTN_OP_EQ, .n_inputs = 2, .infer = infer_compare, .grad = rules::zero, .flags = OP_ELEMENTWISE, .tangent = rules::zero_jvp},
    OpDef{.name = CTN_OP_NE, .n_inputs = 2, .infer = infer_compare, .grad = rules::zero, .flags = OP_ELEMENTWISE, .tangent = rules::zero_jvp},
    OpDef{.name = CTN_OP_LT, .n_inputs = 2, .infer = infer_compare, .grad = rules::zero, .flags = OP_ELEMENTWISE, .tangent = rules::zero_jvp},
    OpDef{.name = CTN_OP_LE, .n_inputs = 2, .infer = infer_compare, .grad = rules::zero, .flags = OP_ELEMENTWISE, .tangent = rules::zero_jvp},
    OpDef{.name = CTN_OP_GT, .n_inputs = 2, .infer = infer_compare, .grad = rules::zero, .flags = OP_ELEMENTWISE, .tangent = rules::zero_jvp},
    OpDef{.name = CTN_OP_GE, .n_inputs = 2, .infer = infer_compare, .grad = rules::zero, .flags = OP_ELEMENTWISE, .tangent = rules::zero_jvp},
    OpDef{.name = CTN_OP_WHERE, .n_inputs = 3, .infer = infer_where, .grad = rules::where, .flags = OP_ELEMENTWISE, .tangent = rules::where_jvp, .probe = {.inputs = "bool[2,3] D[2,3] D[2,3]"}},
    OpDef{.name = CTN_OP_RELU_GRAD, .n_inputs = 2, .infer = infer_elem_grad, .flags = OP_ELEMENTWISE, .tangent = rules::masked_grad_jvp},
    OpDef{.name = CTN_OP_GELU_GRAD, .n_inputs = 2, .infer = infer_elem_grad, .flags = OP_ELEMENTWISE},
    OpDef{.name = CTN_OP_TANH_GRAD, .n_inputs = 2, .infer = infer_elem_grad, .flags = OP_ELEMENTWISE, .tangent = rules::output_grad_jvp},
    OpDef{.name = CTN_OP_SIGMOID_GRAD, .n_inputs = 2, .infer = infer_elem_grad, .flags = OP_ELEMENTWISE, .tangent = rules::output_grad_jvp},
    OpDef{.name = CTN_OP_LEAKY_RELU_GRAD, .n_inputs = 2, .infer = infer_leaky_grad, .flags = OP_ELEMENTWISE, .attributes = "f[0] slope", .tangent = rules::masked_grad_jvp, .probe = {.floats = {0.1}, .nf = 1}},
    OpDef{.name = CTN_OP_CLAMP_GRAD, .n_inputs = 2, .infer = infer_clamp_grad, .flags = OP_ELEMENTWISE, .attributes = "f[0] lo, f[1] hi", .tangent = rules::masked_grad_jvp, .probe = {.floats = {-1, 1}, .nf = 2}},
    OpDef{.name = CTN_OP_MATMUL, .n_inputs = 2, .infer = infer_matmul, .grad = rules::matmul, .attributes = "i[0] trans_a, i[1] trans_b", .tangent = rules::bilinear_jvp, .probe = {.inputs = "D[2,3] D[3,2]", .ints = {0, 0}, .ni = 2}},
    OpDef{.name = CTN_OP_MATMUL_BIAS_ACT, .n_inputs = 3, .infer = infer_matmul_bias_act, .attributes = "i[0] trans_a, i[1] trans_b, i[2] activation", .probe = {.inputs = "D[2,3] D[3,2] D[2]", .ints = {0, 0, 1}, .ni = 3}},
    OpDef{.name = CTN_OP_SUM, .n_inputs = 1, .infer = infer_reduce, .grad = rules::sum, .attributes = "i[0] axis mask, i[1] keepdims", .tangent = rules::linear_jvp, .probe = {.inputs = "D[2,3]", .ints = {3, 0}, .ni = 2}},
    OpDef{.name = CTN_OP_MEAN, .n_inputs = 1, .infer = infer_reduce, .grad = rules::mean, .attributes = "i[0] axis mask, i[1] keepdims", .tangent = rules::linear_jvp, .probe = {.inputs = "D[2,3]", .ints = {3, 0}, .ni = 2}},
    OpDef{.name = CTN_OP_MAX, .n_inputs = 1, .infer = infer_reduce, .grad = rules::max, .attributes = "i[0] axis mask, i[1] keepdims", .tangent = rules::max_jvp, .probe = {.inputs = "D[2,3]", .ints = {3, 0}, .ni = 2}},
    OpDef{.name = CTN_OP_RESHAPE, .n_inputs = 1, .infer = infer_reshape, .grad = rules::reshape, .flags = OP_VIEW_RESHAPE, .attributes = "i[0..ni-1] shape", .tangent = rules::linear_jvp, .probe = {.inputs = "D[2,3]", .ints = {3, 2}, .ni = 2}},
    OpDef{.name = CTN_OP_PERMUTE, .n_inputs = 1, .infer = infer_permute, .grad = rules::permute, .attributes = "i[0..ndim-1] perm", .tangent = rules::linear_jvp, .probe = {.inputs = "D[2,3]", .ints = {1, 0}, .ni = 2}},
    OpDef{.name = CTN_OP_SLICE, .n_inputs = 1, .infer = infer_slice, .grad = rules::slice, .attributes = "i[0] axis, i[1] start, i[2] stop, i[3] step", .tangent = rules::linear_jvp, .probe = {.inputs = "D[2,3]", .ints = {1, 0, 2, 1}, .ni = 4}},
    OpDef{.name = CTN_OP_SLICE_GRAD, .n_inputs = 1, .infer = infer_slice_grad, .grad = rules::slice_grad, .attributes = "i[0] axis, i[1] start, i[2] stop, i[3] step, i[4] source size", .probe = {.inputs = "D[2,2]", .ints = {1, 0, 2, 1, 3}, .ni = 5}},
    OpDef{.name = CTN_OP_CONCAT, .n_inputs = -1, .infer = infer_concat, .grad = rules::concat, .attributes = "i[0] axis", .tangent = rules::concat_jvp, .probe = {.inputs = "D[2,3] D[2,3]", .ints = {0}, .ni = 1}},
    OpDef{.name = CTN_OP_BROADCAST_TO, .n_inputs = 1, .infer = infer_broadcast_to, .grad = rules::broadcast_to, .attributes = "i[0..ni-1] shape", .tangent = rules::linear_jvp, .probe = {.inputs = "D[3]", .ints = {2, 3}, .ni = 2}},
    OpDef{.name = CTN_OP_SOFTMAX, .n_inputs = 1, .infer = infer_softmax, .grad = rules::softmax, .attributes = "i[0] axis", .tangent = rules::self_adjoint_jvp, .probe = {.inputs = "D[2,3]", .ints = {1}, .ni = 1}},
    OpDef{.name = CTN_OP_LOG_SOFTMAX, .n_inputs = 1, .infer = infer_softmax, .grad = rules::log_softmax, .attributes = "i[0] axis", .tangent = rules::log_softmax_jvp, .probe = {.inputs = "D[2,3]", .ints = {1}, .ni = 1}},
    OpDef{.name = CTN_OP_SOFTMAX_GRAD, .n_inputs = 2, .infer = infer_softmax, .attributes = "i[0] axis", .probe = {.inputs = "D[2,3] D[2,3]", .ints = {1}, .ni = 1}},
    OpDef{.name = CTN_OP_LOG_SOFTMAX_GRAD, .n_inputs = 2, .infer = infer_softmax, .attributes = "i[0] axis", .probe = {.inputs = "D[2,3] D[2,3]", .ints = {1}, .ni = 1}},
    OpDef{.name = CTN_OP_CROSS_ENTROPY, .n_inputs = 2, .infer = infer_cross_entropy, .grad = rules::cross_entropy, .tangent = rules::one_element_jvp, .probe = {.inputs = "D[2,3] i64[2]"}},
    OpDef{.name = CTN_OP_CROSS_ENTROPY_GRAD, .n_inputs = 3, .infer = infer_cross_entropy_grad, .tangent = rules::cross_entropy_grad_jvp, .probe = {.inputs = "D[2,3] i64[2] D[]"}},
};

}  // namespace

OpTable core_op_table() { return {kOps, sizeof kOps / sizeof kOps[0]}; }

namespace {
// Every built-in op table: the core's own plus those of other areas (nn, optimizers), each in
// its own file so that adding an op never touches another area's table.
const std::vector<const OpDef *> &all_builtin() {
  static const std::vector<const OpDef *> all = [] {
    std::vector<const OpDef *> v;
    for (OpTable t : {core_op_table(), nn_op_table(), optim_op_table(), composite_op_table(), dynamic_op_table(),
                      quant_op_table()})
      for (size_t i = 0; i < t.n; ++i) v.push_back(&t.ops[i]);
    return v;
  }();
  return all;
}
}  // namespace

const OpDef *find_builtin_op(const char *name) {
  if (!name) return nullptr;
  for (const OpDef *op : all_builtin())
    if (op->name == name) return op;
  return nullptr;
}

const OpDef *const *builtin_ops(size_t *count) {
  *count = all_builtin().size();
  return all_builtin().data();
}

}  // namespace ctn
