// Data-parallel training (docs/DISTRIBUTED.md): the communicator behind ctn_collective (C API in
// core/capi/capi_collective.cpp) and the compile stage that averages gradients across ranks.
#pragma once

#include <chutney/collective.h>

#include "plugin/context.h"

#include <mutex>
#include <string>

struct ctn_collective {
  ctn::Context *ctx = nullptr;
  ctn::CollectivePlugin *plugin = nullptr;
  void *state = nullptr;
  int32_t rank = 0, size = 1;
  std::mutex mu;  // calls on one communicator are serialised (collective.h)

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
void insert_gradient_allreduce(CompileState &cs, uint64_t bucket_bytes);

// The "dp_allreduce" op of those buckets, and its kernel (host-memory backends only).
bool is_collective_op(const OpDef *op);
ctn_kernel collective_kernel(ctn_collective *comm, const ValueInfo &info);

}  // namespace ctn
