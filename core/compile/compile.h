// The compile pipeline of ctn_plan_compile: named stages over one CompileState, one file per
// stage in this folder, run in the order of kStages (compile/pipeline.cpp, the one list).
//
// A new stage takes the state, reads what the stages before it produced, writes its own part
// (a struct below named for the stage), and gets a row in kStages at the place where its inputs
// exist. Graph-level passes need no backends and go before placement; what needs devices goes
// after it; what changes memory goes before allocate_memory.
//
// compile/ sits above exec/ (the Program a plan runs, kernel selection, eager evaluation for
// constant folding): exec/ never includes it; ctn_plan_compile hands compile_program to Plan.
#pragma once

#include "compile/planner.h"
#include "compile/rewrite.h"
#include "exec/plan.h"
#include "exec/program.h"
#include "graph/graph.h"
#include "plugin/context.h"

#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ctn {

// data_parallel (data_parallel.cpp): what was bucketed.
struct DataParallelStats {
  uint32_t gradients = 0, buckets = 0;
  uint64_t bytes = 0;
  bool overlapped = false;  // start/wait pairs (the plugin has allreduce_start; not CTN_DP_BLOCKING)
};

// autocast (autocast.cpp): nodes moved to the low dtype, casts added.
struct AutocastStats {
  uint32_t lowered = 0, casts = 0, kept = 0;  // kept: no preferred backend has a low-precision kernel
};

// layout (layout.cpp): channels-last regions converted.
struct LayoutStats {
  uint32_t regions = 0, convs = 0;  // convolutions now layout 1 (NHWC)
  uint32_t pools = 0;               // max_pool2d / avg_pool2d now layout 1
  uint32_t permutes = 0, reshapes = 0;  // at the regions' edges (reshapes: permutes of size-1 dims)
};

// place_nodes (placement.cpp), per node: the backend it runs or lives on, and its kernel
// (until a step owns it).
struct Placement {
  std::vector<Backend *> dev;
  std::vector<ctn_kernel> kern;
};

// elide_assignments (assign_elision.cpp).
struct Elision {
  std::vector<char> elided;                            // per assignment: computed in place
  std::unordered_map<ctn_node, ctn_node> write_into;  // value node -> the variable it is computed into
};

// lower_to_steps (lower.cpp): values (out.values, and the planner's view of them), transfers, steps.
struct Lowering {
  std::map<std::pair<ctn_node, Backend *>, int> value_of;  // node as seen on a device -> value id
  std::vector<PlanValue> pv;
  std::vector<PlanStep> psteps;
  std::vector<ctn_node> step_node;  // per step: its node, CTN_NODE_NONE for a transfer
};

// allocate_memory (allocate.cpp).
struct Allocation {
  MemoryPlan memory;
  uint64_t persistent_bytes = 0;
};

struct CompileState {
  // Checks the arguments and takes a private copy of the graph: the user's graph may change
  // or go once ctn_plan_compile returns.
  CompileState(Graph &user, uint32_t n_outputs, const ctn_node *outputs, const ctn_compile_options *opts,
               Program &out);
  ~CompileState();  // releases the kernels no step took
  CompileState(const CompileState &) = delete;
  CompileState &operator=(const CompileState &) = delete;

  bool enabled(uint32_t pass) const { return !(disable & pass); }

  // What the options and the user's graph say.
  Context *ctx;
  const uint32_t user_nodes;     // nodes of the user's graph (stats)
  Graph g;                       // the private copy every stage works on
  const uint32_t disable;        // CTN_PASS_* bits
  std::vector<Backend *> prefs;  // preferred backends; prefs[0] is the default device
  std::vector<ctn_node> roots;   // the user's outputs first, then every assignment
  size_t n_user_outputs = 0;
  ctn_collective *dp = nullptr;  // ctn_compile_options.data_parallel
  uint64_t dp_bucket_bytes = 0;
  uint32_t dp_flags = 0;         // ctn_compile_options.dp_flags (CTN_DP_*)
  uint64_t memory_budget = 0;    // ctn_compile_options.memory_budget
  uint32_t precision = CTN_PRECISION_F32;  // ctn_compile_options.precision
  Program &out;                  // what the plan will run

  // What each stage produced, in stage order.
  DataParallelStats dp_stats;      // data_parallel
  Rewriter rw;                     // rewrite: replacements made by the rewrites
  PassStats pass_stats;            // rewrite
  LayoutStats layout_stats;        // layout
  AutocastStats autocast_stats;    // autocast
  std::vector<ctn_node> order;     // order_nodes: the nodes that run, in order
  Placement placed;                // place_nodes
  Elision elision;                 // elide_assignments
  std::vector<char> recomputed;    // budget_memory, per node: a copy that recomputes a dropped value
  Lowering lowered;                // lower_to_steps
  Allocation alloc;                // allocate_memory
};

// One stage: its name (in messages and docs/EXECUTION.md) and its function.
struct CompileStage {
  const char *name;
  void (*run)(CompileState &cs);
};

// The stages in the order compile_program runs them (compile/pipeline.cpp).
extern const CompileStage kStages[];
extern const size_t kNumStages;

// Compiles `user` into `out`: CompileState, then every stage of kStages in order.
void compile_program(Graph &user, uint32_t n_outputs, const ctn_node *outputs, const ctn_compile_options *opts,
                     Program &out);

// The stages, each in its own file of compile/ (kStages says when each runs). Most read and
// write across the state; those that use only a few parts take just those.
void data_parallel(CompileState &cs);      // data_parallel.cpp
void rewrite(CompileState &cs);            // rewrite.cpp
void convert_layout(CompileState &cs);     // layout.cpp
void autocast(CompileState &cs);           // autocast.cpp
void order_nodes(CompileState &cs);        // order.cpp
void place_nodes(CompileState &cs);        // placement.cpp
void elide_assignments(CompileState &cs);  // assign_elision.cpp
void budget_memory(CompileState &cs);      // recompute.cpp
void lower_to_steps(CompileState &cs);     // lower.cpp
void allocate_memory(CompileState &cs);    // allocate.cpp
void prepare_steps(const Graph &g, const Lowering &lowered, Placement &placed,  // prepare.cpp
                   Program &out);  // each step takes its node's kernel out of placed.kern
void record_segments(Program &out);        // segments.cpp
void report(const CompileState &cs);       // report.cpp
void broadcast_variables(CompileState &cs);  // data_parallel.cpp

// Data-dependent shapes (staged.cpp): whether the outputs (or an assignment) depend on an
// OP_DATA_DEPENDENT node, and the staged run ctn_plan_compile then makes instead of a Program.
bool needs_stages(const Graph &g, uint32_t n_out, const ctn_node *outs);
std::unique_ptr<StagedRun> make_staged_run(const Graph &user, uint32_t n_out, const ctn_node *outs,
                                           const ctn_compile_options *opts);

}  // namespace ctn
