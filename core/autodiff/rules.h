// What the built-in ops' autodiff rules share: the signature of a gradient rule (CTN_GRAD_RULE;
// every op's rule is defined beside its row in core/ops/), the tangent rules several ops use
// (autodiff/tangent_rules.cpp) and the helpers of the rest. No list of ops: the rows are it.
#pragma once

#include "graph/graph.h"
#include "tensor/tensor.h"

#include <chutney/ops.h>

namespace ctn::rules {

#define CTN_GRAD_RULE(name)                                                                       \
  void name([[maybe_unused]] Graph &g, [[maybe_unused]] ctn_node node, [[maybe_unused]] ctn_node dy, \
            [[maybe_unused]] const bool *need, [[maybe_unused]] ctn_node *dx)
// Tangent (forward-mode) rules: OpDef::tangent. The shared ones (autodiff/tangent_rules.cpp)
// below; an op's own formula is defined beside its row in core/ops/, with these helpers.
#define CTN_TANGENT_RULE(name) ctn_node name(Graph &g, ctn_node node, const ctn_node *t)
CTN_TANGENT_RULE(self_adjoint_jvp);  // symmetric Jacobian in input 0: the gradient rule on the tangent
CTN_TANGENT_RULE(zero_jvp);          // zero (comparisons, sign)
CTN_TANGENT_RULE(linear_jvp);        // linear in input 0: the op itself on the tangent
CTN_TANGENT_RULE(bilinear_jvp);      // product rule (mul, matmul, conv2d, conv_transpose2d)
CTN_TANGENT_RULE(one_element_jvp);   // one output element: <VJP(1), v>
// a + b where either may be CTN_NODE_NONE (zero).
ctn_node add_tangents(Graph &g, ctn_node a, ctn_node b);

// Helpers of the tangent rules.
inline ctn_node zeros_like(Graph &g, ctn_node v) { return g.add_constant(Tensor::empty(g.info(v).dtype, g.info(v).shape)); }

inline ctn_node bcast(Graph &g, ctn_node v, const Shape &s) {
  if (g.info(v).shape == s) return v;
  ctn_attrs a{};
  for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
  return g.op1(CTN_OP_BROADCAST_TO, v, &a);
}

// The sum of every element, as a node of shape `s` (one element).
inline ctn_node sum_all(Graph &g, ctn_node v, const Shape &s) {
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


}  // namespace ctn::rules
