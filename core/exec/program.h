// What a compiled plan runs: its values (regions of device buffers), its steps (kernel calls and
// transfers in schedule order), the segments a backend records, and every buffer behind them.
// The compile stages (compile/compile.h) fill it; Plan::run executes it; its destructor releases
// what it holds, also when a stage fails halfway.
#pragma once

#include "graph/graph.h"
#include "plugin/context.h"

#include <chutney/chutney.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ctn {

struct Program {
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
    ctn_kernel kernel{};  // owned
    ctn_kernel_args args{};
    size_t in_first = 0;
    uint32_t n_in = 0;
    ctn_tensor_desc out{};
    int src = -1, dst = -1;  // transfer: value ids
    std::string op;
    ctn_node node = CTN_NODE_NONE;  // the node it computes (compile-time graph), for messages
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

  std::vector<Value> values;
  std::vector<Step> steps;
  std::vector<Segment> segments;  // covers every step; handle null: steps run one by one
  std::vector<ctn_plan_call> calls;
  std::vector<ctn_tensor_desc> in_descs;
  std::vector<Feed> feeds;
  std::vector<int> outputs;
  std::unordered_map<ctn_node, int> variables;
  std::vector<std::pair<Backend *, void *>> buffers;  // every allocation, freed last
  std::vector<Backend *> devices;
  std::vector<char> staging;     // host bounce buffer of transfers
  std::vector<ctn_attrs> attrs;  // per step: copies that outlive the compile-time graph
  std::vector<void *> workspace;  // per device
  ctn_plan_stats stats{};
  std::string describe;
  ctn_plan_memory_report memory{};  // budget_memory (compile/recompute.cpp)
  std::string recomputed;           // memory.recomputed points here

  Program() = default;
  ~Program();
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  // Index of `b` in `devices`, appending it the first time.
  int device_index(Backend *b);
};

}  // namespace ctn
