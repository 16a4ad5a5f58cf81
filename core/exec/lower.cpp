// Compile stages 5, 7 and 8 (exec/compile.h): from placed nodes to the Program a plan runs.
#include "exec/compile.h"
#include "exec/select.h"
#include "util/status.h"

#include <chutney/ops.h>

#include <algorithm>

namespace ctn {

namespace {

bool inplace_candidate(const Node &nd, const ctn_kernel &k, const Graph &g) {
  if (!(k.flags & CTN_KERNEL_INPLACE_OK) || nd.inputs.empty()) return false;
  const ValueInfo &a = g.info(nd.inputs[0]);
  return a.dtype == nd.info.dtype && a.shape == nd.info.shape;
}

// A new value on device b (and its planner view): persistent ones get buffers of their own,
// an alias shares the storage of value `alias`.
int new_value(CompileState &cs, const ValueInfo &info, Backend *b, bool persistent, int alias) {
  Program::Value val;
  val.dev = b;
  val.info = info;
  val.bytes = static_cast<uint64_t>(info.shape.numel()) * dtype_size(info.dtype);
  cs.out.values.push_back(val);
  PlanValue p;
  p.bytes = val.bytes;
  p.device = cs.out.device_index(b);
  p.persistent = persistent;
  p.alias_of = alias;
  cs.pv.push_back(p);
  return static_cast<int>(cs.out.values.size() - 1);
}

// The value of node v as seen on device b, inserting a transfer when it lives elsewhere.
int value_on(CompileState &cs, ctn_node v, Backend *b) {
  auto it = cs.value_of.find({v, b});
  if (it != cs.value_of.end()) return it->second;
  int src = cs.value_of.at({v, cs.dev[v]});
  int m = new_value(cs, cs.g.info(v), b, false, -1);
  cs.value_of[{v, b}] = m;
  cs.psteps.push_back(PlanStep{{src}, m, false});
  cs.step_node.push_back(CTN_NODE_NONE);
  return m;
}

}  // namespace

void lower_to_steps(CompileState &cs) {
  const Graph &g = cs.g;
  Program &out = cs.out;
  for (ctn_node v : cs.order) {
    const Node &nd = g.node(v);
    Backend *const dv = cs.dev[v];
    switch (nd.kind) {
      case NodeKind::Input:
      case NodeKind::Constant:
      case NodeKind::Variable: {
        int id = new_value(cs, nd.info, dv, true, -1);
        cs.value_of[{v, dv}] = id;
        if (nd.kind == NodeKind::Input) out.feeds.push_back(Program::Feed{v, id, nd.name});
        if (nd.kind == NodeKind::Variable) out.variables[v] = id;
        break;
      }
      case NodeKind::Op: {
        if (nd.op->flags & OP_VIEW_RESHAPE) {
          int src = cs.value_of.at({nd.inputs[0], cs.dev[nd.inputs[0]]});
          cs.value_of[{v, dv}] = new_value(cs, nd.info, dv, false, src);
          break;
        }
        PlanStep step;
        for (ctn_node i : nd.inputs) step.inputs.push_back(value_on(cs, i, dv));
        auto target = cs.write_into.find(v);
        if (target != cs.write_into.end()) {
          // Elided assignment: the output is the variable's own storage.
          step.output = new_value(cs, nd.info, dv, false, cs.value_of.at({target->second, cs.dev[target->second]}));
        } else {
          step.output = new_value(cs, nd.info, dv, false, -1);
          step.inplace_ok = cs.enabled(CTN_PASS_MEMORY_REUSE) && inplace_candidate(nd, cs.kern[v], g);
        }
        cs.value_of[{v, dv}] = step.output;
        cs.psteps.push_back(step);
        cs.step_node.push_back(v);
        break;
      }
      case NodeKind::Assign: {
        int var = cs.value_of.at({nd.inputs[0], cs.dev[nd.inputs[0]]});
        Backend *b = cs.dev[nd.inputs[0]];
        if (cs.elided[v]) {  // the value was computed in place: nothing left to copy
          cs.value_of[{v, b}] = new_value(cs, nd.info, b, false, var);
          ++out.stats.n_assign_elided;
          break;
        }
        // A copy kernel on the variable's device writes the new value into its storage; where
        // that device has none (or its placement policy declines it), a transfer through the
        // host does, straight from wherever the value was computed.
        ctn_tensor_desc d = make_desc(nd.info);
        std::string why;
        const bool copies = select_kernel(*b, *cs.ctx->find_core_op(CTN_OP_COPY), 1, &d, d, ctn_attrs{}, &cs.kern[v], &why);
        const ctn_node x = nd.inputs[1];
        PlanStep step;
        step.inputs.push_back(copies ? value_on(cs, x, b) : cs.value_of.at({x, cs.dev[x]}));
        step.output = var;
        cs.value_of[{v, b}] = new_value(cs, nd.info, b, false, var);
        cs.psteps.push_back(step);
        cs.step_node.push_back(copies ? v : CTN_NODE_NONE);
        break;
      }
    }
  }
  for (size_t i = 0; i < cs.n_user_outputs; ++i) {
    int id = cs.value_of.at({cs.roots[i], cs.dev[cs.roots[i]]});
    out.outputs.push_back(id);
    cs.pv[static_cast<size_t>(id)].is_output = true;
  }
}

void prepare_steps(CompileState &cs) {
  const Graph &g = cs.g;
  Program &out = cs.out;
  size_t total_in = 0;
  for (auto &s : cs.psteps) total_in += s.inputs.size();
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
  for (size_t si = 0; si < cs.psteps.size(); ++si) {
    Program::Step st;
    const PlanStep &p = cs.psteps[si];
    st.out = desc_of(p.output);
    st.in_first = out.in_descs.size();
    st.n_in = static_cast<uint32_t>(p.inputs.size());
    for (int id : p.inputs) out.in_descs.push_back(desc_of(id));
    st.b = out.values[static_cast<size_t>(p.output)].dev;
    const ctn_node v = cs.step_node[si];
    st.node = v;
    if (v == CTN_NODE_NONE) {
      st.transfer = true;
      st.src = p.inputs[0];
      st.dst = p.output;
      st.op = "transfer";
      staging = std::max(staging, out.values[static_cast<size_t>(p.output)].bytes);
    } else {
      const Node &nd = g.node(v);
      st.kernel = cs.kern[v];  // the step owns it from now on
      cs.kern[v] = ctn_kernel{};
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
    const ctn_node v = cs.step_node[si];
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

void record_segments(CompileState &cs) {
  Program &out = cs.out;
  // Consecutive kernel steps on a backend that records plans go to it as one unit.
  out.calls.reserve(out.steps.size());  // segments point into it: no reallocation below
  for (size_t si = 0; si < out.steps.size();) {
    Program::Segment seg;
    seg.first = si;
    seg.b = out.steps[si].b;
    const bool records = !out.steps[si].transfer && seg.b->desc.plan_prepare && seg.b->desc.plan_run &&
                         seg.b->desc.plan_release;
    size_t end = si + 1;
    if (records)
      while (end < out.steps.size() && !out.steps[end].transfer && out.steps[end].b == seg.b) ++end;
    seg.count = end - si;
    if (records) {
      size_t c0 = out.calls.size();
      for (size_t k = si; k < end; ++k) out.calls.push_back(ctn_plan_call{&out.steps[k].kernel, &out.steps[k].args});
      Backend::Serial serial(*seg.b);
      take_plugin_error();
      CTN_CHECK_PLUGIN(seg.b->desc.plan_prepare(seg.b->state, static_cast<uint32_t>(seg.count), out.calls.data() + c0,
                                                &seg.handle),
                       "backend " + seg.b->name + ": plan_prepare");
    }
    out.segments.push_back(seg);
    si = end;
  }
}

}  // namespace ctn
