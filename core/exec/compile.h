// The compile step of ctn_plan_compile as named stages over one CompileState. Plan::Plan
// (exec/plan.cpp) calls them in the order below; each is defined with its peers.
//
// A new stage takes the state, reads what the stages before it produced, writes its own
// fields (add them to CompileState under a comment naming the stage), and is called from
// Plan::Plan at the place where its inputs exist. Graph-level passes need no backends and go
// before placement; what needs devices goes after it; what changes memory goes before
// allocate_memory.
#pragma once

#include "exec/program.h"
#include "graph/graph.h"
#include "passes/passes.h"
#include "planner/planner.h"
#include "plugin/context.h"

#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ctn {

struct CompileState {
  // Checks the arguments and takes a private copy of the graph: the user's graph may change
  // or go once ctn_plan_compile returns.
  CompileState(Graph &user, uint32_t n_outputs, const ctn_node *outputs, const ctn_compile_options *opts,
               Program &out);
  ~CompileState();  // releases the kernels no step took
  CompileState(const CompileState &) = delete;
  CompileState &operator=(const CompileState &) = delete;

  bool enabled(uint32_t pass) const { return !(disable & pass); }

  Context *ctx;
  const uint32_t user_nodes;     // nodes of the user's graph (stats)
  Graph g;                       // the private copy every stage works on
  Rewriter rw;                   // replacements made by the rewrites
  const uint32_t disable;        // CTN_PASS_* bits
  std::vector<Backend *> prefs;  // preferred backends; prefs[0] is the default device
  std::vector<ctn_node> roots;   // the user's outputs first, then every assignment
  size_t n_user_outputs = 0;
  Program &out;                  // what the plan will run

  // insert_gradient_allreduce (data_parallel.cpp): the communicator, what was bucketed
  ctn_collective *dp = nullptr;
  uint64_t dp_bucket_bytes = 0;
  uint32_t dp_gradients = 0, dp_buckets = 0;
  uint64_t dp_bytes = 0;
  // rewrite
  PassStats pass_stats;
  // order_nodes: the nodes that run, in order
  std::vector<ctn_node> order;
  // place_nodes, per node: the backend it runs or lives on, and its kernel (until a step owns it)
  std::vector<Backend *> dev;
  std::vector<ctn_kernel> kern;
  // elide_assignments
  std::vector<char> elided;                            // per assignment: computed in place
  std::unordered_map<ctn_node, ctn_node> write_into;  // value node -> the variable it is computed into
  // budget_memory
  uint64_t memory_budget = 0;      // ctn_compile_options.memory_budget
  std::vector<char> recomputed;    // per node: a copy that recomputes a dropped value
  // lower_to_steps: values (out.values, and the planner's view of them), transfers, steps
  std::map<std::pair<ctn_node, Backend *>, int> value_of;  // node as seen on a device -> value id
  std::vector<PlanValue> pv;
  std::vector<PlanStep> psteps;
  std::vector<ctn_node> step_node;  // per step: its node, CTN_NODE_NONE for a transfer
  // allocate_memory
  MemoryPlan memory;
  uint64_t persistent_bytes = 0;
};

// 0. Data-parallel plans only: gradients averaged across ranks in buckets (exec/data_parallel.cpp).
void data_parallel(CompileState &cs);
// 1. Simplification, constant folding, fusion (passes/passes.cpp).
void rewrite(CompileState &cs);
// 2. The schedule: dead-code elimination, readers of assigned variables before the values
//    assigned to them, assignments last (passes/order.cpp).
void order_nodes(CompileState &cs);
// 3. Each op on the first preferred backend that has a kernel for it (exec/placement.cpp).
void place_nodes(CompileState &cs);
// 4. Assignments whose value can be computed straight into the variable (passes/assign.cpp).
void elide_assignments(CompileState &cs);
// 4b. Under a memory budget: values dropped after their early uses and recomputed just before
//     their late ones, chosen greedily at the peak by bytes saved per FLOP (passes/recompute.cpp).
void budget_memory(CompileState &cs);
// 5. Values, transfers at device boundaries and the step list (exec/lower.cpp).
void lower_to_steps(CompileState &cs);
// 6. Offsets in per-device arenas, buffers, initial values (planner/allocate.cpp).
void allocate_memory(CompileState &cs);
// 7. Kernel arguments, attributes and workspaces of every step (exec/lower.cpp).
void prepare_steps(CompileState &cs);
// 8. Runs of steps handed to backends that record plans (exec/lower.cpp).
void record_segments(CompileState &cs);
// 9. Statistics and the describe text (exec/plan.cpp).
void report(CompileState &cs);

}  // namespace ctn
