// Data-parallel training (docs/DISTRIBUTED.md): the communicator behind ctn_collective (C API in
// core/capi/capi_collective.cpp) and the compile stage that averages gradients across ranks.
#pragma once

#include <chutney/collective.h>

#include "graph/graph.h"
#include "plugin/context.h"

#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

struct ctn_collective {
  ctn::Context *ctx = nullptr;
  ctn::CollectivePlugin *plugin = nullptr;
  void *state = nullptr;
  int32_t rank = 0, size = 1;
  std::mutex mu;  // calls on one communicator are serialised (collective.h)
  // Overlapped buckets (since 1.7): the allreduces a plan's dp_allreduce_start steps began and
  // its dp_allreduce_wait steps have not finished, oldest first: the bucket's buffer and the
  // plugin's ticket.
  std::deque<std::pair<const void *, uint64_t>> pending;

  // The plugin has allreduce_start / allreduce_wait (collective.h, since 1.7).
  bool can_overlap() const { return plugin->desc.allreduce_start && plugin->desc.allreduce_wait; }

  // The slots behind a wall: a failure throws ctn::Error with the plugin's message.
  void allreduce(void *buf, uint64_t count, ctn_dtype dt, uint32_t op);
  void broadcast(void *buf, uint64_t bytes, int32_t root);
  void barrier();
  [[noreturn]] void abort(int32_t code, const std::string &why);
};

namespace ctn {

struct CompileState;

// The data_parallel stage's work (compile/compile.h), with ctn_compile_options.data_parallel:
// gradients made by ctn_grad, where the graph uses them after ctn_grad, become slices of allreduce-mean buckets.
// overlap: each bucket a dp_allreduce_start and a dp_allreduce_wait instead of one dp_allreduce.
void insert_gradient_allreduce(CompileState &cs, uint64_t bucket_bytes, bool overlap);

// The ops of those buckets, and their kernels (host-memory backends only): "dp_allreduce"
// (blocking), or with overlap "dp_allreduce_start" (begins it; the output is the bucket) and
// "dp_allreduce_wait" (reads the start's output: completes it).
bool is_collective_op(const OpDef *op);
ctn_kernel collective_kernel(ctn_collective *comm, const OpDef *op, const ValueInfo &info);

// Part of order_nodes for overlapped plans: moves each dp_allreduce_start, with the reshapes and
// concat that fill its bucket, to just after the last node it needs (its gradients are final),
// so that it runs while backward is still computing the earlier layers' gradients. Only moves
// nodes earlier, past nothing they read.
void hoist_allreduce_starts(const Graph &g, std::vector<ctn_node> &order);

}  // namespace ctn
