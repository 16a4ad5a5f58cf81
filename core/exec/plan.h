// A compiled plan: a linear schedule of kernel calls over preallocated device memory.
#pragma once

#include "graph/graph.h"
#include "plugin/context.h"

#include <chutney/chutney.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace ctn {

class Plan {
 public:
  Plan(Graph &g, uint32_t n_outputs, const ctn_node *outputs, const ctn_compile_options *opts);
  ~Plan();
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;

  void run(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_outputs,
           ctn_tensor *const *outputs);
  const ValueInfo &output_info(uint32_t i) const;
  uint32_t n_outputs() const { return static_cast<uint32_t>(outputs_.size()); }
  Tensor read_variable(ctn_node var) const;
  void write_variable(ctn_node var, const Tensor &t);
  const ctn_plan_stats &stats() const { return stats_; }
  uint32_t backend_steps(const char *backend, const char *op) const;
  const std::string &describe() const { return describe_; }

 private:
  struct Value {
    Backend *dev = nullptr;
    void *handle = nullptr;
    uint64_t offset = 0;
    ValueInfo info;
    uint64_t bytes = 0;
  };
  struct Step {
    bool transfer = false;
    Backend *b = nullptr;
    ctn_kernel kernel{};
    ctn_kernel_args args{};
    size_t in_first = 0;
    uint32_t n_in = 0;
    ctn_tensor_desc out{};
    int src = -1, dst = -1;  // transfer: value ids
    std::string op;
  };
  // A run of consecutive steps on one backend that records plans (backend.h, since 1.1).
  struct Segment {
    size_t first = 0, count = 0;
    Backend *b = nullptr;
    void *handle = nullptr;
  };
  struct Feed {
    ctn_node node;
    int value;
    std::string name;
  };

  Context *ctx_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<Segment> segments_;  // covers every step; handle null: steps run one by one
  std::vector<ctn_plan_call> calls_;
  std::vector<ctn_tensor_desc> in_descs_;
  std::vector<Feed> feeds_;
  std::vector<const Tensor *> fed_;  // per feed, during run: the tensor given
  std::vector<int> outputs_;
  std::unordered_map<ctn_node, int> variables_;
  std::vector<std::pair<Backend *, void *>> buffers_;
  std::vector<Backend *> devices_;
  std::vector<char> staging_;
  std::vector<ctn_attrs> attrs_;
  std::vector<void *> workspace_;
  ctn_plan_stats stats_{};
  std::string describe_;
  // CHUTNEY_PROFILE=1: wall time per step (host clock around each call, backends synced), a
  // table on stderr when the plan is destroyed. Off: one branch per run.
  bool profile_ = false;
  bool profile_steps_ = false;  // CHUTNEY_PROFILE=steps: rows per op and output shape
  uint64_t profile_runs_ = 0;
  std::vector<double> profile_ns_;
  void profile_report() const;
};

}  // namespace ctn

struct ctn_plan : ctn::Plan {
  using ctn::Plan::Plan;
};
