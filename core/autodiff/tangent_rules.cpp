// The tangent (forward-mode) rules of the built-in ops: each op's row (ops/ops_*.cpp) names its
// rule in OpDef::tangent, and ctn_jvp (autodiff/jvp.cpp) calls it. Rules emit ordinary graph
// nodes, so the result compiles, plans and runs like any graph (and composes with ctn_grad: a
// JVP of gradients is a Hessian-vector product).
//
// Where a rule comes from:
//  - Ops whose Jacobian is symmetric (elementwise unary ops: a diagonal Jacobian; softmax;
//    dropout) reuse the reverse rule (self_adjoint_jvp): J v = J^T v, so the VJP rule applied
//    to the tangent is exact.
//  - Linear ops (reshape, permute, slice, broadcast_to, sum, mean, cast, avg pooling: linear_jvp;
//    add, sub, concat, where in its value inputs, embedding in its table) apply themselves to
//    the tangents.
//  - Bilinear ops (mul, matmul, conv2d, conv_transpose2d) use the product rule (bilinear_jvp).
//  - Ops with one output element (cross_entropy) take <VJP(1), v> (one_element_jvp).
//  - div, pow, maximum/minimum, log_softmax, max (reduction), batch_norm's gamma/beta have their
//    own formula, with ties broken as the reverse rules break them, so <J v, w> = <v, J^T w>.
#include "autodiff/rules.h"

#include <chutney/ops.h>

#include "util/status.h"

#include <vector>

namespace ctn::rules {

namespace {

ctn_node zeros_like(Graph &g, ctn_node v) { return g.add_constant(Tensor::empty(g.info(v).dtype, g.info(v).shape)); }

ctn_node bcast(Graph &g, ctn_node v, const Shape &s) {
  if (g.info(v).shape == s) return v;
  ctn_attrs a{};
  for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
  return g.op1(CTN_OP_BROADCAST_TO, v, &a);
}

// The sum of every element, as a node of shape `s` (one element).
ctn_node sum_all(Graph &g, ctn_node v, const Shape &s) {
  const uint32_t nd = g.info(v).shape.ndim;
  ctn_node r = v;
  if (nd) {
    ctn_attrs a{};
    a.i[a.ni++] = static_cast<int64_t>((nd >= 64 ? ~0ull : (1ull << nd) - 1));
    a.i[a.ni++] = 0;
    r = g.op1(CTN_OP_SUM, v, &a);
  }
  if (g.info(r).shape == s) return r;
  ctn_attrs a{};
  for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
  return g.op1(CTN_OP_RESHAPE, r, &a);
}

// The forward node's parts, copied: rules append nodes, which may move the graph's storage.
struct Fwd {
  Node f;
  const ctn_node *t;
  Fwd(Graph &g, ctn_node node, const ctn_node *tan) : f(g.node(node)), t(tan) {}
  ctn_node in(size_t i) const { return f.inputs[i]; }
  size_t k() const { return f.inputs.size(); }
  const Shape &out() const { return f.info.shape; }
  bool none(size_t i) const { return t[i] == CTN_NODE_NONE; }
  ctn_node tz(Graph &g, size_t i) const { return none(i) ? zeros_like(g, in(i)) : t[i]; }
};

}  // namespace

ctn_node add_tangents(Graph &g, ctn_node a, ctn_node b) {
  if (a == CTN_NODE_NONE) return b;
  if (b == CTN_NODE_NONE) return a;
  return g.op2(CTN_OP_ADD, a, b);
}

CTN_TANGENT_RULE(self_adjoint_jvp) {
  Fwd x(g, node, t);
  for (size_t i = 1; i < x.k(); ++i)
    if (!x.none(i))
      fail(CTN_ERR_UNSUPPORTED, "ctn_jvp: op %s has no tangent rule for its input %zu (only input 0 carries one)",
           x.f.op->name.c_str(), i);
  if (x.none(0)) return CTN_NODE_NONE;
  bool nb[8] = {true, false, false, false, false, false, false, false};
  std::vector<ctn_node> dx(x.k(), CTN_NODE_NONE);
  x.f.op->grad(g, node, t[0], nb, dx.data());
  return dx[0];
}

CTN_TANGENT_RULE(zero_jvp) {
  (void)g, (void)node, (void)t;
  return CTN_NODE_NONE;
}

CTN_TANGENT_RULE(linear_jvp) {  // linear in its (single differentiable) input 0
  Fwd x(g, node, t);
  if (x.none(0) || !dtype_is_float(x.f.info.dtype)) return CTN_NODE_NONE;  // cast to an integer: zero
  return g.add_op(*x.f.op, 1, &t[0], x.f.attrs);
}

CTN_TANGENT_RULE(bilinear_jvp) {  // product rule
  Fwd x(g, node, t);
  const char *op = x.f.op->name.c_str();
  ctn_node r = CTN_NODE_NONE;
  if (!x.none(0)) r = g.op2(op, t[0], x.in(1), &x.f.attrs);
  if (!x.none(1)) r = add_tangents(g, r, g.op2(op, x.in(0), t[1], &x.f.attrs));
  return r == CTN_NODE_NONE ? r : bcast(g, r, x.out());
}

CTN_TANGENT_RULE(one_element_jvp) {  // one output element: the tangent is <VJP(1), v>, exact
  Fwd x(g, node, t);
  bool any = false;
  bool need[8] = {};
  for (size_t i = 0; i < x.k() && i < 8; ++i) {
    need[i] = !x.none(i) && dtype_is_float(g.info(x.in(i)).dtype);
    any = any || need[i];
  }
  if (!any) return CTN_NODE_NONE;
  ctn_node seed = bcast(g, g.add_scalar(x.f.info.dtype, 1.0), x.out());
  std::vector<ctn_node> dx(x.k(), CTN_NODE_NONE);
  x.f.op->grad(g, node, seed, need, dx.data());
  ctn_node r = CTN_NODE_NONE;
  for (size_t i = 0; i < x.k(); ++i)
    if (need[i] && dx[i] != CTN_NODE_NONE) r = add_tangents(g, r, sum_all(g, g.op2(CTN_OP_MUL, dx[i], t[i]), x.out()));
  return r;
}

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

CTN_TANGENT_RULE(embedding_jvp) {  // linear in the table
  Fwd x(g, node, t);
  return x.none(0) ? CTN_NODE_NONE : g.op2(CTN_OP_EMBEDDING, t[0], x.in(1), &x.f.attrs);
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

CTN_TANGENT_RULE(batch_norm_jvp) {
  // x: the per-channel Jacobian block is symmetric, so the reverse rule applies to tx; gamma
  // and beta: y = x_hat * gamma + beta per channel, x_hat = batch_norm(x, 1, 0).
  Fwd x(g, node, t);
  ctn_node r = CTN_NODE_NONE;
  if (!x.none(0)) {
    ctn_node ins[3] = {x.in(0), x.in(1), t[0]};
    r = g.add_op(CTN_OP_BATCH_NORM_GRAD_INPUT, 3, ins, &x.f.attrs);
  }
  const Shape &xs = g.info(x.in(0)).shape;
  ctn_attrs ca{};  // [1, C, 1, ...]
  for (uint32_t d = 0; d < xs.ndim; ++d) ca.i[ca.ni++] = d == 1 ? xs[1] : 1;
  if (!x.none(1)) {
    Tensor one = Tensor::empty(g.info(x.in(1)).dtype, g.info(x.in(1)).shape);
    ctn_node ones = g.op2(CTN_OP_ADD, g.add_constant(one), g.add_scalar(one.dtype, 1.0));
    ctn_node ins[3] = {x.in(0), ones, zeros_like(g, x.in(2))};
    ctn_node xhat = g.add_op(CTN_OP_BATCH_NORM, 3, ins, &x.f.attrs);
    r = add_tangents(g, r, g.op2(CTN_OP_MUL, xhat, g.op1(CTN_OP_RESHAPE, t[1], &ca)));
  }
  if (!x.none(2)) r = add_tangents(g, r, bcast(g, g.op1(CTN_OP_RESHAPE, t[2], &ca), x.out()));
  return r;
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
