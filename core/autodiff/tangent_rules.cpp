// The tangent (forward-mode) rules several built-in ops share: each op's row (ops/ops_*.cpp)
// names its rule in OpDef::tangent, and ctn_jvp (autodiff/jvp.cpp) calls it; an op's own formula
// is defined beside its row. Rules emit ordinary graph
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
//    own formula (in core/ops/), with ties broken as the reverse rules break them, so
//    <J v, w> = <v, J^T w>.
#include "autodiff/rules.h"

#include <chutney/ops.h>

#include "util/status.h"

#include <vector>

namespace ctn::rules {

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

}  // namespace ctn::rules
