// An op library's own autodiff rules (ctn_op_def.grad / grad_ex, jvp_ex) as the rows of its ops
// hold them (OpDef::grad, OpDef::tangent): the autodiff drivers call them like any built-in rule,
// and these call the library through the host API and check what it returns.
#include "graph/graph.h"
#include "plugin/context.h"
#include "util/status.h"

#include <string>
#include <vector>

namespace ctn {

void ext_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx) {
  const Node f = g.node(node);  // a copy: the rule appends nodes
  std::vector<ctn_node> out(f.inputs.size(), CTN_NODE_NONE);
  const auto &x = static_cast<const ExtOpDef &>(*f.op);
  const auto n = static_cast<uint32_t>(f.inputs.size());
  OpLibCallScope scope(x.lib);  // its graph_op calls name ops as the library's program would
  ctn_status s = x.decl.grad_ex ? x.decl.grad_ex(host_api(), x.declared, x.decl.user_data, static_cast<ctn_graph *>(&g),
                                                 n, f.inputs.data(), node, dy, &f.attrs, out.data())
                                : x.decl.grad(host_api(), static_cast<ctn_graph *>(&g), n, f.inputs.data(), node, dy,
                                              &f.attrs, out.data());
  CTN_CHECK_PLUGIN(s, "gradient rule of " + f.op->name);
  for (size_t k = 0; k < out.size(); ++k) {
    if (!need[k] || out[k] == CTN_NODE_NONE) continue;
    g.check(out[k], f.op->name.c_str());
    const Shape &want = g.info(f.inputs[k]).shape;
    if (g.info(out[k]).shape != want)
      fail(CTN_ERR_SHAPE, "gradient rule of %s returned %s for input %zu of shape %s", f.op->name.c_str(),
           shape_str(g.info(out[k]).shape).c_str(), k, shape_str(want).c_str());
    dx[k] = out[k];
  }
}

ctn_node ext_tangent(Graph &g, ctn_node node, const ctn_node *t) {
  const Node f = g.node(node);  // a copy: the rule appends nodes
  const auto &x = static_cast<const ExtOpDef &>(*f.op);
  if (!x.decl.jvp_ex)
    fail(CTN_ERR_UNSUPPORTED, "ctn_jvp: op %s comes from op library \"%s\", which supplies no tangent rule "
         "(ctn_op_def.jvp_ex, oplib.h)", x.name.c_str(), x.lib ? x.lib->name.c_str() : "?");
  ctn_node r = CTN_NODE_NONE;
  take_plugin_error();
  ctn_status s;
  try {
    OpLibCallScope scope(x.lib);  // its graph_op calls name ops as the library's program would
    s = x.decl.jvp_ex(host_api(), x.declared, x.decl.user_data, static_cast<ctn_graph *>(&g),
                      static_cast<uint32_t>(f.inputs.size()), f.inputs.data(), node, t, &f.attrs, &r);
  } catch (...) {
    fail(CTN_ERR_PLUGIN, "tangent rule of %s (op library %s) threw", x.name.c_str(), x.lib->name.c_str());
  }
  if (s != CTN_OK) {
    std::string m = take_plugin_error();
    fail(s, "tangent rule of %s: %s", x.name.c_str(), m.empty() ? status_name(s) : m.c_str());
  }
  if (r == CTN_NODE_NONE) return r;
  g.check(r, x.name.c_str());
  if (g.info(r).shape != f.info.shape || g.info(r).dtype != f.info.dtype)
    fail(CTN_ERR_SHAPE, "tangent rule of %s returned %s%s for an output of %s%s", x.name.c_str(),
         dtype_name(g.info(r).dtype), shape_str(g.info(r).shape).c_str(), dtype_name(f.info.dtype),
         shape_str(f.info.shape).c_str());
  return r;
}

}  // namespace ctn
