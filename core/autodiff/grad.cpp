// Reverse-mode autodiff over the recorded graph: walk the nodes between the wrt set and the loss
// in reverse creation order (creation order is a topological order), apply each op's rule, and
// sum the contributions of values used more than once.
#include "graph/graph.h"
#include "util/status.h"

#include <vector>

namespace ctn {

namespace {

void append_grad(Graph &g, ctn_node loss, uint32_t n, const ctn_node *wrt, ctn_node *out) {
  g.check(loss, "ctn_grad");
  if (n && (!wrt || !out)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_grad: wrt or out_grads is NULL");
  const ValueInfo li = g.info(loss);
  if (!dtype_is_float(li.dtype)) fail(CTN_ERR_DTYPE, "ctn_grad: the loss must be a float (f32, f64, f16, bf16), got %s", dtype_name(li.dtype));
  if (li.shape.numel() != 1)
    fail(CTN_ERR_SHAPE, "ctn_grad: the loss must have one element, got %s", shape_str(li.shape).c_str());
  for (uint32_t i = 0; i < n; ++i) g.check(wrt[i], "ctn_grad");

  const size_t count = loss + 1;  // nodes after the loss cannot influence it
  // needs[v]: v depends on some wrt node (so its gradient is wanted).
  std::vector<char> needs(count, 0);
  for (uint32_t i = 0; i < n; ++i)
    if (wrt[i] < count) needs[wrt[i]] = 1;
  for (size_t v = 0; v < count; ++v) {
    const Node &nd = g.node(static_cast<ctn_node>(v));
    if (nd.kind != NodeKind::Op) continue;
    for (ctn_node in : nd.inputs)
      if (needs[in]) needs[v] = 1;
  }
  // live[v]: loss depends on v.
  std::vector<char> live(count, 0);
  live[loss] = 1;
  for (size_t v = count; v-- > 0;) {
    if (!live[v]) continue;
    const Node &nd = g.node(static_cast<ctn_node>(v));
    if (nd.kind == NodeKind::Op)
      for (ctn_node in : nd.inputs) live[in] = 1;
  }

  std::vector<ctn_node> grad(count, CTN_NODE_NONE);
  {
    ctn_node seed = g.add_scalar(li.dtype, 1.0);
    if (li.shape.ndim) {
      ctn_attrs a{};
      for (uint32_t k = 0; k < li.shape.ndim; ++k) a.i[a.ni++] = 1;
      seed = g.op1("reshape", seed, &a);
    }
    grad[loss] = seed;
  }
  std::vector<ctn_node> dx;
  std::vector<char> need_in;
  for (size_t v = count; v-- > 0;) {
    if (!live[v] || !needs[v] || grad[v] == CTN_NODE_NONE) continue;
    if (g.node(static_cast<ctn_node>(v)).kind != NodeKind::Op) continue;
    // Copy what we need: rules append nodes, which may move the node storage.
    const OpDef *op = g.node(static_cast<ctn_node>(v)).op;
    const std::vector<ctn_node> ins = g.node(static_cast<ctn_node>(v)).inputs;
    const size_t k = ins.size();
    need_in.assign(k, 0);
    bool any = false;
    for (size_t i = 0; i < k; ++i) {
      need_in[i] = needs[ins[i]] && dtype_is_float(g.info(ins[i]).dtype);
      any = any || need_in[i];
    }
    if (!any) continue;
    if (!op->grad)
      fail(CTN_ERR_UNSUPPORTED, "ctn_grad: op %s has no gradient rule (it is not differentiable)", op->name.c_str());
    dx.assign(k, CTN_NODE_NONE);
    // need_in is char; rules take bool.
    bool need_b[64];
    std::unique_ptr<bool[]> need_big;
    bool *need = need_b;
    if (k > 64) {
      need_big.reset(new bool[k]);
      need = need_big.get();
    }
    for (size_t i = 0; i < k; ++i) need[i] = need_in[i];
    op->grad(g, static_cast<ctn_node>(v), grad[v], need, dx.data());
    for (size_t i = 0; i < k; ++i) {
      if (dx[i] == CTN_NODE_NONE || !need[i]) continue;
      ctn_node in = ins[i];
      grad[in] = grad[in] == CTN_NODE_NONE ? dx[i] : g.op2("add", grad[in], dx[i]);
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    ctn_node w = wrt[i];
    ctn_node r = w < count ? grad[w] : CTN_NODE_NONE;
    if (r == CTN_NODE_NONE) {
      // The loss does not depend on w: a zero scalar broadcast to w's shape, computed only if a
      // plan asks for it. (A zero tensor made here allocated the whole shape at once: 16 GB for
      // an input declared [2^31, 2], found by the graph fuzz target.)
      const ValueInfo wi = g.info(w);
      r = g.add_scalar(wi.dtype, 0);
      if (wi.shape.ndim) {
        ctn_attrs at{};
        for (uint32_t k = 0; k < wi.shape.ndim; ++k) at.i[k] = wi.shape[k];
        at.ni = wi.shape.ndim;
        r = g.op1("broadcast_to", r, &at);
      }
    }
    out[i] = r;
  }
  for (uint32_t i = 0; i < n; ++i) g.node(out[i]).grad_uses_from = static_cast<uint32_t>(g.size());
}

}  // namespace

// A failed ctn_grad changes no state: a rule that fails (an op with no gradient rule, found
// after the seed and the later ops' gradients were appended) left those nodes in the graph.
void build_grad(Graph &g, ctn_node loss, uint32_t n, const ctn_node *wrt, ctn_node *out) {
  const size_t before = g.size();
  try {
    append_grad(g, loss, n, wrt, out);
  } catch (...) {
    g.truncate(before);
    throw;
  }
}

}  // namespace ctn
