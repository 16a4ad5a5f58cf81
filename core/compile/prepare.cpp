// Compile stage prepare_steps (compile/compile.h): kernel arguments, attribute copies and one
// workspace per device for every step of the Program.
#include "compile/compile.h"
#include "exec/select.h"

#include <algorithm>

namespace ctn {

void prepare_steps(const Graph &g, const Lowering &lowered, Placement &placed, Program &out) {
  size_t total_in = 0;
  for (auto &s : lowered.psteps) total_in += s.inputs.size();
  out.in_descs.reserve(total_in);  // steps point into it: no reallocation below
  uint64_t staging = 0;
  std::vector<uint64_t> workspace(out.devices.size(), 0);
  auto desc_of = [&](int id) {
    const Program::Value &val = out.values[static_cast<size_t>(id)];
    ctn_tensor_desc d = make_desc(val.info);
    d.data = val.handle;
    d.offset = val.offset;
    return d;
  };
  for (size_t si = 0; si < lowered.psteps.size(); ++si) {
    Program::Step st;
    const PlanStep &p = lowered.psteps[si];
    st.out = desc_of(p.output);
    st.in_first = out.in_descs.size();
    st.n_in = static_cast<uint32_t>(p.inputs.size());
    for (int id : p.inputs) out.in_descs.push_back(desc_of(id));
    st.b = out.values[static_cast<size_t>(p.output)].dev;
    const ctn_node v = lowered.step_node[si];
    st.node = v;
    if (v == CTN_NODE_NONE) {
      st.transfer = true;
      st.src = p.inputs[0];
      st.dst = p.output;
      st.op = "transfer";
      staging = std::max(staging, out.values[static_cast<size_t>(p.output)].bytes);
    } else {
      const Node &nd = g.node(v);
      st.kernel = placed.kern[v];  // the step owns it from now on
      placed.kern[v] = ctn_kernel{};
      st.op = nd.kind == NodeKind::Assign ? "assign" : nd.op->name;
      size_t d = static_cast<size_t>(out.device_index(st.b));
      workspace[d] = std::max(workspace[d], st.kernel.workspace_size);
    }
    out.steps.push_back(std::move(st));
  }
  // Attributes must outlive the private graph: keep copies next to the steps.
  out.attrs.resize(out.steps.size());
  for (size_t si = 0; si < out.steps.size(); ++si) {
    Program::Step &st = out.steps[si];
    const ctn_node v = lowered.step_node[si];
    if (v != CTN_NODE_NONE && g.node(v).kind == NodeKind::Op) out.attrs[si] = g.node(v).attrs;
    st.args.attrs = &out.attrs[si];
    st.args.n_inputs = st.n_in;
    st.args.n_outputs = 1;
    st.args.inputs = out.in_descs.data() + st.in_first;
    st.args.outputs = &st.out;
  }
  // One workspace per device, as large as the largest step's: steps run one at a time.
  out.workspace.resize(out.devices.size(), nullptr);
  for (size_t d = 0; d < out.devices.size(); ++d)
    if (workspace[d]) {
      out.workspace[d] = out.devices[d]->alloc(workspace[d]);
      out.buffers.push_back({out.devices[d], out.workspace[d]});
    }
  for (Program::Step &st : out.steps) {
    if (st.transfer || !st.kernel.workspace_size) continue;
    st.args.workspace = out.workspace[static_cast<size_t>(out.device_index(st.b))];
    st.args.workspace_size = st.kernel.workspace_size;
  }
  out.staging.resize(staging);
}

}  // namespace ctn
