// Compile stage 3 (exec/compile.h): where every node runs. An op goes to the first backend of
// the preference that has a kernel for it (a backend declines with a reason, and the reasons
// of all of them make the error when none accepts). A view (reshape) stays with its source, an
// assignment with its variable. A leaf (input, constant, variable) is scheduled before its
// consumers and lives on the default device prefs[0]; consumers elsewhere read it through a
// transfer (lower_to_steps).
#include "exec/compile.h"
#include "exec/select.h"
#include "util/status.h"

namespace ctn {

void place_nodes(CompileState &cs) {
  const Graph &g = cs.g;
  const std::vector<Backend *> &prefs = cs.prefs;
  std::vector<Backend *> &dev = cs.dev;
  cs.dev.assign(g.size(), nullptr);
  cs.kern.assign(g.size(), ctn_kernel{});
  for (ctn_node v : cs.order) {
    const Node &nd = g.node(v);
    if (nd.kind == NodeKind::Op) {
      if ((nd.op->flags & OP_VIEW_RESHAPE)) {
        dev[v] = dev[nd.inputs[0]];
        continue;
      }
      std::vector<ctn_tensor_desc> in;
      for (ctn_node i : nd.inputs) in.push_back(make_desc(g.info(i)));
      ctn_tensor_desc od = make_desc(nd.info);
      std::string reasons;
      for (Backend *b : prefs) {
        std::string why;
        if (select_kernel(*b, *nd.op, static_cast<uint32_t>(in.size()), in.data(), od, nd.attrs, &cs.kern[v], &why)) {
          dev[v] = b;
          break;
        }
        reasons += (reasons.empty() ? "" : "; ") + b->name + ": " + why;
      }
      if (!dev[v]) {
        std::vector<ValueInfo> vi;
        for (ctn_node i : nd.inputs) vi.push_back(g.info(i));
        fail(CTN_ERR_UNSUPPORTED, "%s(%s): no backend can run it (%s)", nd.op->name.c_str(),
             values_str(vi.data(), static_cast<uint32_t>(vi.size())).c_str(), reasons.c_str());
      }
    } else if (nd.kind == NodeKind::Assign) {
      dev[v] = dev[nd.inputs[0]];
    }
    for (ctn_node i : nd.inputs)
      if (!dev[i]) dev[i] = dev[v] ? dev[v] : prefs[0];
    if (!dev[v]) dev[v] = prefs[0];
  }
  for (ctn_node v : cs.order)
    if (!dev[v]) dev[v] = prefs[0];
}

}  // namespace ctn
