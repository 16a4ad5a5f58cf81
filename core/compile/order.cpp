// Compile stage order_nodes (compile/compile.h): the schedule the plan runs.
#include "compile/compile.h"
#include "compile/data_parallel.h"

#include <algorithm>

namespace ctn {

void order_nodes(CompileState &cs) {
  const Graph &g = cs.g;
  std::vector<ctn_node> &order = cs.order;
  if (cs.enabled(CTN_PASS_DCE)) {
    // Dead-code elimination: only what the outputs and the assignments need. Every reader of
    // an assigned variable is scheduled before the assignments' value computations (forward
    // and backward before the optimizer step), so those can write straight into the
    // variables' storage (elide_assignments).
    order = schedule(g, cs.roots);
    std::vector<char> assigned(g.size(), 0), assign_value(g.size(), 0);
    for (ctn_node v : order)
      if (g.node(v).kind == NodeKind::Assign) {
        assigned[g.node(v).inputs[0]] = 1;
        assign_value[g.node(v).inputs[1]] = 1;
      }
    const auto user_end = cs.roots.begin() + static_cast<std::ptrdiff_t>(cs.n_user_outputs);
    std::vector<ctn_node> early(cs.roots.begin(), user_end);
    for (ctn_node v : order) {
      const Node &nd = g.node(v);
      if (nd.kind != NodeKind::Op || assign_value[v]) continue;
      for (ctn_node in : nd.inputs)
        if (assigned[in]) {
          early.push_back(v);
          break;
        }
    }
    early.insert(early.end(), user_end, cs.roots.end());
    order = schedule(g, early);
  } else {
    // Every node the rewrites kept (constants only where used), then the roots.
    std::vector<ctn_node> all;
    for (size_t v = 0; v < g.size(); ++v) {
      const Node &nd = g.node(static_cast<ctn_node>(v));
      if (cs.rw.resolve(static_cast<ctn_node>(v)) == v && nd.kind != NodeKind::Constant)
        all.push_back(static_cast<ctn_node>(v));
    }
    all.insert(all.end(), cs.roots.begin(), cs.roots.end());
    order = schedule(g, all);
  }
  // Assignments run last, so that every read of a variable in a run sees its old value.
  std::stable_partition(order.begin(), order.end(), [&](ctn_node v) { return g.node(v).kind != NodeKind::Assign; });
  // Overlapped data-parallel buckets: each allreduce starts as soon as its gradients are final.
  if (cs.dp_stats.overlapped) hoist_allreduce_starts(g, order);
}

}  // namespace ctn
