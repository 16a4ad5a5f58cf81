// A compiled plan: a linear schedule of kernel calls over preallocated device memory.
// Compiling is compile/'s (compile/compile.h), above exec/: a Plan is given the builder.
#pragma once

#include <chutney/chutney.h>

#include "exec/program.h"
#include "graph/graph.h"
#include "plugin/context.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ctn {

// What one run may be stopped for (ctn_run_options, since 1.3).
struct RunControl {
  const std::atomic<int32_t> *cancel = nullptr;
  std::chrono::steady_clock::time_point deadline{};
  bool has_deadline = false;
  uint64_t timeout_us = 0;
  bool check_numerics = false;
};

// A plan whose outputs depend on an op with a data-dependent output shape (OP_DATA_DEPENDENT,
// since 1.6) runs in stages instead of as one Program: compile/staged.cpp implements this, and
// ctn_plan_compile chooses it (docs/EXECUTION.md, "Data-dependent shapes").
class StagedRun {
 public:
  virtual ~StagedRun() = default;
  // As Plan::run, except that an output may have any shape: it is given the actual one.
  virtual void run(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_out,
                   ctn_tensor *const *outputs, const RunControl *rc) = 0;
  virtual const ValueInfo &output_info(uint32_t i) const = 0;  // the upper bound
  virtual uint32_t n_outputs() const = 0;
  virtual const std::string &describe() const = 0;
};

class Plan {
 public:
  explicit Plan(std::unique_ptr<StagedRun> staged) : staged_(std::move(staged)) {}
  // Fills the Program from the user's graph: ctn_plan_compile passes compile_program
  // (compile/compile.h) with its arguments.
  using ProgramBuilder = std::function<void(Program &out)>;
  Plan(const Graph &user, const ProgramBuilder &build);
  ~Plan();
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;

  void run(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_outputs,
           ctn_tensor *const *outputs, const RunControl *rc = nullptr);
  const ValueInfo &output_info(uint32_t i) const;
  uint32_t n_outputs() const { return staged_ ? staged_->n_outputs() : static_cast<uint32_t>(prog_.outputs.size()); }
  Tensor read_variable(ctn_node var) const;
  bool has_variable(ctn_node var) const { return prog_.variables.count(var) != 0; }
  void write_variable(ctn_node var, const Tensor &t);
  const ctn_plan_stats &stats() const { return prog_.stats; }
  uint32_t backend_steps(const char *backend, const char *op) const;
  const std::string &describe() const { return staged_ ? staged_->describe() : prog_.describe; }
  const ctn_plan_memory_report &memory_report() const { return prog_.memory; }

  bool staged() const { return staged_ != nullptr; }

 private:
  std::unique_ptr<StagedRun> staged_;  // set: the plan runs in stages (prog_ stays empty)
  Program prog_;                     // built by the compile stages (compile/compile.h)
  std::vector<const Tensor *> fed_;  // per feed, during run: the tensor given
  // CHUTNEY_PROFILE=1: wall time per step (host clock around each call, backends synced), a
  // table on stderr when the plan is destroyed. Off: one branch per run.
  bool profile_ = false;
  bool profile_steps_ = false;  // CHUTNEY_PROFILE=steps: rows per op and output shape
  uint64_t profile_runs_ = 0;
  std::vector<double> profile_ns_;
  void profile_report() const;
  // Strict feeds: the kind of every node of the graph compiled (a feed must be an input).
  std::vector<NodeKind> user_kinds_;
  uint32_t user_nodes_ = 0;
  // The first step that writes a variable: a run is cancellable before it (RunControl).
  size_t commit_step_ = 0;
  void check_args(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_out,
                  ctn_tensor *const *outputs);
  void run_steps(const RunControl *rc);
  void stop_if_asked(const RunControl &rc, size_t step) const;
  void check_numerics(size_t step) const;
};

}  // namespace ctn

struct ctn_plan : ctn::Plan {
  using ctn::Plan::Plan;
};
