// Compile stage allocate_memory (compile/compile.h): memory. plan_memory (planner.cpp, a pure algorithm) picks
// arena offsets; this allocates the arenas and the persistent buffers on their backends,
// resolves views to their storage, and uploads constants and variables' initial values.
#include "compile/compile.h"

namespace ctn {

void allocate_memory(CompileState &cs) {
  Program &out = cs.out;
  cs.alloc.memory = plan_memory(cs.lowered.pv, cs.lowered.psteps, static_cast<int>(out.devices.size()), cs.enabled(CTN_PASS_MEMORY_REUSE));
  const MemoryPlan &mp = cs.alloc.memory;
  std::vector<void *> arena(out.devices.size(), nullptr);
  for (size_t d = 0; d < out.devices.size(); ++d) {
    arena[d] = out.devices[d]->alloc(mp.arena_bytes[d]);
    out.buffers.push_back({out.devices[d], arena[d]});
  }
  for (size_t i = 0; i < out.values.size(); ++i) {
    Program::Value &val = out.values[i];
    if (cs.lowered.pv[i].alias_of >= 0) continue;
    if (cs.lowered.pv[i].persistent) {
      val.handle = val.dev->alloc(val.bytes);
      out.buffers.push_back({val.dev, val.handle});
      cs.alloc.persistent_bytes += val.bytes;
    } else {
      val.handle = arena[static_cast<size_t>(cs.lowered.pv[i].device)];
      val.offset = mp.offset[i];
    }
  }
  for (size_t i = 0; i < out.values.size(); ++i) {
    int r = static_cast<int>(i);
    while (cs.lowered.pv[static_cast<size_t>(r)].alias_of >= 0) r = cs.lowered.pv[static_cast<size_t>(r)].alias_of;
    out.values[i].handle = out.values[static_cast<size_t>(r)].handle;
    out.values[i].offset = out.values[static_cast<size_t>(r)].offset;
  }
  for (ctn_node v : cs.order) {
    const Node &nd = cs.g.node(v);
    if ((nd.kind == NodeKind::Constant || nd.kind == NodeKind::Variable) && nd.value) {
      const Program::Value &val = out.values[static_cast<size_t>(cs.lowered.value_of.at({v, cs.placed.dev[v]}))];
      val.dev->upload(val.handle, val.offset, nd.value->data(), val.bytes);
    }
  }
}

}  // namespace ctn
