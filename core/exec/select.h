// Kernel selection shared by compiled plans and eager execution.
#pragma once

#include "graph/graph.h"
#include "plugin/context.h"

namespace ctn {

// Fills a descriptor (data NULL) for a value: contiguous strides.
ctn_tensor_desc make_desc(const ValueInfo &v);

// Asks `b` (or the op library's kernel for b) for a kernel; false with *why when unsupported.
// const_inputs: ctn_op_signature.const_inputs (since 1.7), bit i for a constant input i of a
// compiled plan (plan_const_inputs); 0 where nothing is promised (eager graphs, probes).
bool select_kernel(Backend &b, const OpDef &op, uint32_t n, const ctn_tensor_desc *in, const ctn_tensor_desc &out,
                   const ctn_attrs &attrs, ctn_kernel *k, std::string *why, uint64_t const_inputs = 0);

// The const_inputs bits of an op node of a plan's graph: input i is a Constant node, or a view
// (reshape) of one, whose storage the plan allocates once and never writes after the upload.
uint64_t plan_const_inputs(const Graph &g, const std::vector<ctn_node> &inputs);

// Calls a kernel behind a try/catch wall; throws ctn::Error naming the op and backend on failure.
void call_kernel(const ctn_kernel &k, const ctn_kernel_args &args, const char *op, const Backend &b);

}  // namespace ctn
