// Kernel selection shared by compiled plans and eager execution.
#pragma once

#include "graph/graph.h"
#include "plugin/context.h"

namespace ctn {

// Fills a descriptor (data NULL) for a value: contiguous strides.
ctn_tensor_desc make_desc(const ValueInfo &v);

// Asks `b` (or the op library's kernel for b) for a kernel; false with *why when unsupported.
bool select_kernel(Backend &b, const OpDef &op, uint32_t n, const ctn_tensor_desc *in, const ctn_tensor_desc &out,
                   const ctn_attrs &attrs, ctn_kernel *k, std::string *why);

// Calls a kernel behind a try/catch wall; throws ctn::Error naming the op and backend on failure.
void call_kernel(const ctn_kernel &k, const ctn_kernel_args &args, const char *op, const Backend &b);

}  // namespace ctn
