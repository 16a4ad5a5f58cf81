// Compile stage elide_assignments (compile/compile.h): an assignment's value computed directly into the variable.
// Legal when the value is an op with no other consumer, on the variable's device, that reads
// the variable only as input 0 through an in-place-capable kernel (or not at all), and every
// other reader of the variable runs before it (order_nodes arranges that), and the variable
// itself is scheduled before it: writing into the variable is a dependency the graph's edges
// do not have. (Without dead-code elimination the schedule follows creation order, so a
// variable created after the op computing its new value came after it, and the planner found
// no storage to write into: CTN_ERR_INTERNAL "map::at", found by a graph fuzzer.)
#include "compile/compile.h"

namespace ctn {

void elide_assignments(CompileState &cs) {
  const Graph &g = cs.g;
  const std::vector<ctn_node> &order = cs.order;
  cs.elision.elided.assign(g.size(), 0);
  if (!cs.enabled(CTN_PASS_MEMORY_REUSE)) return;
  std::vector<uint32_t> consumers(g.size(), 0), pos(g.size(), 0), assigns_of(g.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    pos[order[i]] = static_cast<uint32_t>(i);
    for (ctn_node in : g.node(order[i]).inputs) ++consumers[in];
    if (g.node(order[i]).kind == NodeKind::Assign) ++assigns_of[g.node(order[i]).inputs[0]];
  }
  for (size_t i = 0; i < cs.n_user_outputs; ++i) ++consumers[cs.roots[i]];
  for (ctn_node a : order) {
    const Node &an = g.node(a);
    if (an.kind != NodeKind::Assign) continue;
    const ctn_node var = an.inputs[0], x = an.inputs[1];
    const Node &xn = g.node(x);
    if (xn.kind != NodeKind::Op || (xn.op->flags & OP_VIEW_RESHAPE) || consumers[x] != 1 || assigns_of[var] != 1 ||
        cs.placed.dev[x] != cs.placed.dev[var] || cs.elision.write_into.count(x) || pos[var] > pos[x])
      continue;
    bool ok = true;
    for (size_t k = 0; k < xn.inputs.size(); ++k)
      if (xn.inputs[k] == var && (k != 0 || !(cs.placed.kern[x].flags & CTN_KERNEL_INPLACE_OK))) ok = false;
    for (ctn_node r : order) {
      if (!ok) break;
      if (r == x || r == a) continue;
      const Node &rn = g.node(r);
      for (ctn_node in : rn.inputs)
        if (in == var && (pos[r] > pos[x] || (rn.kind == NodeKind::Op && (rn.op->flags & OP_VIEW_RESHAPE)))) ok = false;
    }
    if (!ok) continue;
    cs.elision.elided[a] = 1;
    cs.elision.write_into[x] = var;
  }
}

}  // namespace ctn
