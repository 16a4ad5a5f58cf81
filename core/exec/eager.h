// Eager execution: runs one node as soon as it is added, with kernels cached by op signature.
#pragma once

#include "graph/graph.h"

namespace ctn {

struct Backend;

// Computes node.value from its inputs' values (the node is not yet in the graph).
void eager_execute(Graph &g, Node &node);

// Evaluates an op on host tensors; used by eager mode and constant folding. `only` restricts the
// backend (nullptr: the context's preference order).
Tensor eager_compute(Context &ctx, const OpDef &op, const ctn_attrs &attrs, const Tensor *const *in, uint32_t n,
                     const ValueInfo &out, Backend *only = nullptr, const Backend **ran_on = nullptr);

}  // namespace ctn
