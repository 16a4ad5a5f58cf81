// Compile stage lower_to_steps (compile/compile.h): from placed nodes to the values, transfers at
// device boundaries and steps of the Program a plan runs.
#include "compile/compile.h"
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
  cs.lowered.pv.push_back(p);
  return static_cast<int>(cs.out.values.size() - 1);
}

// The value of node v as seen on device b, inserting a transfer when it lives elsewhere.
int value_on(CompileState &cs, ctn_node v, Backend *b) {
  auto it = cs.lowered.value_of.find({v, b});
  if (it != cs.lowered.value_of.end()) return it->second;
  int src = cs.lowered.value_of.at({v, cs.placed.dev[v]});
  int m = new_value(cs, cs.g.info(v), b, false, -1);
  cs.lowered.value_of[{v, b}] = m;
  cs.lowered.psteps.push_back(PlanStep{{src}, m, false});
  cs.lowered.step_node.push_back(CTN_NODE_NONE);
  return m;
}

}  // namespace

void lower_to_steps(CompileState &cs) {
  const Graph &g = cs.g;
  Program &out = cs.out;
  for (ctn_node v : cs.order) {
    const Node &nd = g.node(v);
    Backend *const dv = cs.placed.dev[v];
    switch (nd.kind) {
      case NodeKind::Input:
      case NodeKind::Constant:
      case NodeKind::Variable: {
        int id = new_value(cs, nd.info, dv, true, -1);
        cs.lowered.value_of[{v, dv}] = id;
        if (nd.kind == NodeKind::Input) out.feeds.push_back(Program::Feed{v, id, nd.name});
        if (nd.kind == NodeKind::Variable) out.variables[v] = id;
        break;
      }
      case NodeKind::Op: {
        if (nd.op->flags & OP_VIEW_RESHAPE) {
          int src = cs.lowered.value_of.at({nd.inputs[0], cs.placed.dev[nd.inputs[0]]});
          cs.lowered.value_of[{v, dv}] = new_value(cs, nd.info, dv, false, src);
          break;
        }
        PlanStep step;
        for (ctn_node i : nd.inputs) step.inputs.push_back(value_on(cs, i, dv));
        auto target = cs.elision.write_into.find(v);
        if (target != cs.elision.write_into.end()) {
          // Elided assignment: the output is the variable's own storage.
          step.output = new_value(cs, nd.info, dv, false, cs.lowered.value_of.at({target->second, cs.placed.dev[target->second]}));
        } else {
          step.output = new_value(cs, nd.info, dv, false, -1);
          step.inplace_ok = cs.enabled(CTN_PASS_MEMORY_REUSE) && inplace_candidate(nd, cs.placed.kern[v], g);
        }
        cs.lowered.value_of[{v, dv}] = step.output;
        cs.lowered.psteps.push_back(step);
        cs.lowered.step_node.push_back(v);
        break;
      }
      case NodeKind::Assign: {
        int var = cs.lowered.value_of.at({nd.inputs[0], cs.placed.dev[nd.inputs[0]]});
        Backend *b = cs.placed.dev[nd.inputs[0]];
        if (cs.elision.elided[v]) {  // the value was computed in place: nothing left to copy
          cs.lowered.value_of[{v, b}] = new_value(cs, nd.info, b, false, var);
          ++out.stats.n_assign_elided;
          break;
        }
        // A copy kernel on the variable's device writes the new value into its storage; where
        // that device has none (or its placement policy declines it), a transfer through the
        // host does, straight from wherever the value was computed.
        ctn_tensor_desc d = make_desc(nd.info);
        std::string why;
        const bool copies = select_kernel(*b, *cs.ctx->find_core_op(CTN_OP_COPY), 1, &d, d, ctn_attrs{}, &cs.placed.kern[v], &why);
        const ctn_node x = nd.inputs[1];
        PlanStep step;
        step.inputs.push_back(copies ? value_on(cs, x, b) : cs.lowered.value_of.at({x, cs.placed.dev[x]}));
        step.output = var;
        cs.lowered.value_of[{v, b}] = new_value(cs, nd.info, b, false, var);
        cs.lowered.psteps.push_back(step);
        cs.lowered.step_node.push_back(copies ? v : CTN_NODE_NONE);
        break;
      }
    }
  }
  for (size_t i = 0; i < cs.n_user_outputs; ++i) {
    int id = cs.lowered.value_of.at({cs.roots[i], cs.placed.dev[cs.roots[i]]});
    out.outputs.push_back(id);
    cs.lowered.pv[static_cast<size_t>(id)].is_output = true;
  }
}

}  // namespace ctn
