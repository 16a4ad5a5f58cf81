// Forward-mode autodiff (ctn_jvp): tangents propagated in creation order (a topological order)
// from the inputs to the outputs. Each op's rule is its row's OpDef::tangent (the built-in ones:
// autodiff/tangent_rules.cpp); op-library ops use the library's own rule (ctn_op_def.jvp_ex), its
// result checked. An op without one (max pooling, layer norm, most *_grad ops, optimizer steps,
// library ops without jvp_ex) fails with CTN_ERR_UNSUPPORTED naming it.
#include "autodiff/rules.h"
#include "graph/graph.h"
#include "util/status.h"

#include <chutney/ops.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace ctn {

namespace {

ctn_node zeros_like(Graph &g, ctn_node v) { return g.add_constant(Tensor::empty(g.info(v).dtype, g.info(v).shape)); }
using rules::add_tangents;

// The tangent of `node` given its inputs' tangents (CTN_NODE_NONE: zero). Returns CTN_NODE_NONE
// when the tangent is zero.
ctn_node tangent(Graph &g, ctn_node node, const std::vector<ctn_node> &t) {
  const OpDef &op = *g.node(node).op;
  if (!op.tangent)
    fail(CTN_ERR_UNSUPPORTED, "ctn_jvp: op %s has no tangent rule (the ops forward mode covers: chutney.h, "
         "ctn_jvp)", op.name.c_str());
  return op.tangent(g, node, t.data());
}

}  // namespace

void build_jvp(Graph &g, uint32_t n_out, const ctn_node *outs, uint32_t n_in, const ctn_node *ins,
               const ctn_node *tangents, ctn_node *out_tangents) {
  if (n_out && (!outs || !out_tangents)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_jvp: outputs or out_tangents is NULL");
  if (n_in && (!ins || !tangents)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_jvp: inputs or tangents is NULL");
  for (uint32_t i = 0; i < n_out; ++i) g.check(outs[i], "ctn_jvp");
  for (uint32_t i = 0; i < n_in; ++i) {
    g.check(ins[i], "ctn_jvp");
    g.check(tangents[i], "ctn_jvp");
    const ValueInfo &a = g.info(ins[i]), &b = g.info(tangents[i]);
    if (!dtype_is_float(a.dtype))
      fail(CTN_ERR_DTYPE, "ctn_jvp: input %u is %s; forward mode needs f32 or f64 inputs", i, dtype_name(a.dtype));
    if (a.dtype != b.dtype || a.shape != b.shape)
      fail(CTN_ERR_SHAPE, "ctn_jvp: tangent %u is %s%s, its input is %s%s", i, dtype_name(b.dtype),
           shape_str(b.shape).c_str(), dtype_name(a.dtype), shape_str(a.shape).c_str());
  }
  ctn_node last = 0;
  for (uint32_t i = 0; i < n_out; ++i) last = std::max(last, outs[i]);
  const size_t count = n_out ? static_cast<size_t>(last) + 1 : 0;
  std::vector<ctn_node> tan(count, CTN_NODE_NONE);
  for (uint32_t i = 0; i < n_in; ++i)
    if (ins[i] < count) tan[ins[i]] = add_tangents(g, tan[ins[i]], tangents[i]);
  // Only nodes that some output depends on.
  std::vector<char> live(count, 0);
  for (uint32_t i = 0; i < n_out; ++i) live[outs[i]] = 1;
  for (size_t v = count; v-- > 0;)
    if (live[v] && g.node(static_cast<ctn_node>(v)).kind == NodeKind::Op)
      for (ctn_node in : g.node(static_cast<ctn_node>(v)).inputs) live[in] = 1;
  std::vector<ctn_node> t;
  for (size_t v = 0; v < count; ++v) {
    const Node &nd = g.node(static_cast<ctn_node>(v));
    if (!live[v] || nd.kind != NodeKind::Op || tan[v] != CTN_NODE_NONE) continue;
    t.clear();
    bool any = false;
    for (ctn_node in : nd.inputs) {
      t.push_back(in < count ? tan[in] : CTN_NODE_NONE);
      any = any || t.back() != CTN_NODE_NONE;
    }
    if (!any) continue;
    tan[v] = tangent(g, static_cast<ctn_node>(v), t);
  }
  for (uint32_t i = 0; i < n_out; ++i) {
    ctn_node r = tan[outs[i]];
    if (r == CTN_NODE_NONE) r = zeros_like(g, outs[i]);
    out_tangents[i] = r;
  }
}

}  // namespace ctn
