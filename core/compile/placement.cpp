// Compile stage place_nodes (compile/compile.h): where every node runs. An op goes to the first backend of
// the preference that has a kernel for it (a backend declines with a reason, and the reasons
// of all of them make the error when none accepts); only the backends listed are tried, so a
// list without the CPU never falls back to it (docs/EXECUTION.md). A view (reshape) stays with
// its source, an assignment with its variable. A leaf (input, constant, variable) lives where
// its first consumer in the schedule runs, so that the weights of ops a device declines stay
// on the CPU instead of crossing over on every run; an unused leaf lives on prefs[0].
#include "compile/compile.h"
#include "compile/data_parallel.h"
#include "exec/select.h"
#include "util/status.h"

#include <algorithm>

namespace ctn {

namespace {

// Puts an unplaced node on `b`: a leaf directly, a view where its source is (placing the
// source first). Returns the node's device.
Backend *settle(CompileState &cs, ctn_node n, Backend *b) {
  if (cs.placed.dev[n]) return cs.placed.dev[n];
  const Node &nd = cs.g.node(n);
  if (nd.kind == NodeKind::Op && (nd.op->flags & OP_VIEW_RESHAPE)) return cs.placed.dev[n] = settle(cs, nd.inputs[0], b);
  return cs.placed.dev[n] = b;
}

// The hint for an op no listed backend takes: the CPU would, but only when it is listed.
std::string cpu_hint(const CompileState &cs) {
  std::string hint;
  for (auto &b : cs.ctx->backends) {
    if (!b->host_memory() || std::find(cs.prefs.begin(), cs.prefs.end(), b.get()) != cs.prefs.end()) continue;
    if (b->available)
      return "; only the listed backends are used: add \"" + b->name + "\" to the list (e.g. \"" + cs.prefs[0]->name +
             "," + b->name + "\") to let it run there";
    // The usual fallback failed to start: say so, or the message blames the backends that remain.
    hint += "; the " + b->name + " backend could not run it either: it is unavailable (" + b->description + ")";
  }
  return hint;
}

}  // namespace

void place_nodes(CompileState &cs) {
  const Graph &g = cs.g;
  const std::vector<Backend *> &prefs = cs.prefs;
  std::vector<Backend *> &dev = cs.placed.dev;
  cs.placed.dev.assign(g.size(), nullptr);
  cs.placed.kern.assign(g.size(), ctn_kernel{});
  for (ctn_node v : cs.order) {
    const Node &nd = g.node(v);
    if (nd.kind == NodeKind::Op) {
      if ((nd.op->flags & OP_VIEW_RESHAPE)) {
        dev[v] = dev[nd.inputs[0]];  // null while the source is an unplaced leaf: settled with it
        continue;
      }
      if (is_collective_op(nd.op)) {
        // A gradient bucket's allreduce: the communicator takes host memory, so the first
        // preferred host-memory backend (else any available one) holds the bucket.
        Backend *host = nullptr;
        for (Backend *b : prefs)
          if (!host && b->host_memory()) host = b;
        for (auto &b : cs.ctx->backends)
          if (!host && b->available && b->host_memory()) host = b.get();
        if (!host) fail(CTN_ERR_UNSUPPORTED, "dp_allreduce: data-parallel plans need a host-memory backend (cpu) loaded");
        dev[v] = host;
        cs.placed.kern[v] = collective_kernel(cs.dp, nd.op, nd.info);
        for (ctn_node i : nd.inputs) settle(cs, i, dev[v]);
        continue;
      }
      std::vector<ctn_tensor_desc> in;
      for (ctn_node i : nd.inputs) in.push_back(make_desc(g.info(i)));
      ctn_tensor_desc od = make_desc(nd.info);
      std::string reasons;
      const uint64_t consts = plan_const_inputs(g, nd.inputs);
      for (Backend *b : prefs) {
        std::string why;
        if (select_kernel(*b, *nd.op, static_cast<uint32_t>(in.size()), in.data(), od, nd.attrs, &cs.placed.kern[v], &why,
                          consts)) {
          dev[v] = b;
          break;
        }
        reasons += (reasons.empty() ? "" : "; ") + b->name + ": " + why;
      }
      if (!dev[v]) {
        std::vector<ValueInfo> vi;
        for (ctn_node i : nd.inputs) vi.push_back(g.info(i));
        fail(CTN_ERR_UNSUPPORTED, "%s(%s): no backend can run it (%s%s)", nd.op->name.c_str(),
             values_str(vi.data(), static_cast<uint32_t>(vi.size())).c_str(), reasons.c_str(), cpu_hint(cs).c_str());
      }
    } else if (nd.kind == NodeKind::Assign) {
      // A variable only ever assigned (no reader before) lives where its new value is made.
      dev[v] = settle(cs, nd.inputs[0], settle(cs, nd.inputs[1], prefs[0]));
    } else {
      continue;  // a leaf: placed by its first consumer
    }
    for (ctn_node i : nd.inputs) settle(cs, i, dev[v]);
  }
  for (ctn_node v : cs.order) settle(cs, v, prefs[0]);
}

}  // namespace ctn
