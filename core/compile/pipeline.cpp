// The compile pipeline (compile/compile.h): the argument checks and private copy of the graph
// (CompileState), then the stages in the order of kStages, the one list of them.
//
// Where a new stage goes: a graph rewrite that needs no device between order_nodes and
// place_nodes (or before rewrite when the rewrites must not touch what it marks: data_parallel's
// gradients), or inside rewrite when it is a local pattern; one that needs placement and kernels
// (in-place flags, transfers) between place_nodes and lower_to_steps; one that trades memory for
// recomputation between lower_to_steps and allocate_memory, where the planner sees the values and
// their last uses. Give it a part of CompileState, its declaration in compile.h, a file here,
// and a row below.
#include "compile/compile.h"

#include "util/status.h"

#include <cstddef>

namespace ctn {

const CompileStage kStages[] = {
    {"data_parallel", data_parallel},          // gradient allreduce buckets (data-parallel plans only)
    {"rewrite", rewrite},                      // simplification, constant folding, fusion
    {"layout", convert_layout},                // channels-last conv regions (inference plans only)
    {"autocast", autocast},                    // matmul/conv in bf16/f16 (ctn_compile_options.precision)
    {"order_nodes", order_nodes},              // schedule + dead-code elimination, assignments last
    {"place_nodes", place_nodes},              // a backend (and its kernel) for every node
    {"elide_assignments", elide_assignments},  // values computed straight into their variables
    {"budget_memory", budget_memory},          // recomputation under a memory budget
    {"lower_to_steps", lower_to_steps},        // values, transfers at device boundaries, steps
    {"allocate_memory", allocate_memory},      // arena offsets, buffers, initial values
    {"prepare_steps",  // kernel arguments, attributes, workspaces
     [](CompileState &cs) { prepare_steps(cs.g, cs.lowered, cs.placed, cs.out); }},
    {"record_segments", [](CompileState &cs) { record_segments(cs.out); }},  // runs handed to recording backends
    {"report", [](CompileState &cs) { report(cs); }},                        // statistics, the describe text
    {"broadcast_variables", broadcast_variables},  // every variable from rank 0 (data-parallel only)
};
const size_t kNumStages = sizeof kStages / sizeof kStages[0];

CompileState::CompileState(Graph &user, uint32_t n_out, const ctn_node *outs, const ctn_compile_options *opts,
                           Program &program)
    : ctx(user.context()),
      user_nodes(static_cast<uint32_t>(user.size())),
      g(ctx, false),
      disable(opts ? opts->disable : 0),
      out(program),
      rw(g) {
  if (opts && opts->struct_size >= offsetof(ctn_compile_options, dp_bucket_bytes) + sizeof(uint64_t)) {
    dp = opts->data_parallel;
    dp_bucket_bytes = opts->dp_bucket_bytes ? opts->dp_bucket_bytes : CTN_DP_DEFAULT_BUCKET_BYTES;
  }
  memory_budget = opts ? opts->memory_budget : 0;
  if (opts && opts->struct_size >= offsetof(ctn_compile_options, precision) + sizeof(uint32_t)) {
    precision = opts->precision;
    if (precision > CTN_PRECISION_F16)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_compile: ctn_compile_options.precision %u is not a CTN_PRECISION_* value", precision);
  }
  if (opts && opts->struct_size >= offsetof(ctn_compile_options, dp_reserved) + sizeof(uint32_t)) {
    dp_flags = opts->dp_flags;
    if (dp_flags & ~CTN_DP_BLOCKING)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_compile: ctn_compile_options.dp_flags 0x%x has bits that are not CTN_DP_* flags", dp_flags);
  }
  if (user.eager()) fail(CTN_ERR_STATE, "ctn_plan_compile: the graph is eager; create it with flags 0 to compile it");
  if (n_out && !outs) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_compile: outputs is NULL");
  for (uint32_t i = 0; i < n_out; ++i) user.check(outs[i], "ctn_plan_compile");
  prefs = opts && opts->backends ? ctx->parse_preference(opts->backends, "ctn_compile_options.backends") : ctx->preferred();
  if (prefs.empty()) fail(CTN_ERR_UNAVAILABLE, "ctn_plan_compile: no backend is available in this context");
  g.copy_nodes_from(user);
  roots.assign(outs, outs + n_out);
  n_user_outputs = roots.size();
  for (size_t v = 0; v < g.size(); ++v)
    if (g.node(static_cast<ctn_node>(v)).kind == NodeKind::Assign) roots.push_back(static_cast<ctn_node>(v));
}

CompileState::~CompileState() {
  for (size_t v = 0; v < placed.kern.size(); ++v)
    if (placed.kern[v].state) placed.dev[v]->release(placed.kern[v]);
}

void compile_program(Graph &user, uint32_t n_outputs, const ctn_node *outputs, const ctn_compile_options *opts,
                     Program &out) {
  CompileState cs(user, n_outputs, outputs, opts, out);
  for (size_t i = 0; i < kNumStages; ++i) kStages[i].run(cs);
}

}  // namespace ctn
