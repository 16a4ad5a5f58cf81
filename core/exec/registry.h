// The op registry of a context (chutney.h's ctn_context_op_* calls, since 1.2).
#pragma once

#include "graph/op.h"
#include "plugin/context.h"

#include <string>
#include <vector>

namespace ctn {

// Every op of the context: the built-in ops in table order, then each op library's in loading
// order. Stable until a library is loaded or added (which appends).
std::vector<const OpDef *> registry_ops(const Context &ctx);

// The ctn_attrs slots an op reads ("f[0] slope"): OpDef::attributes; "" for none.
const char *builtin_attributes(const OpDef &op);

// Asks `b` for a kernel of one small node of `op` whose main inputs have `dtype` (of each part,
// for an op the graph expands), and releases it. false with *why: the op's infer refused the dtype, or the backend's reason. Throws on a
// backend failure other than declining.
bool probe_support(Context &ctx, Backend &b, const OpDef &op, int32_t dtype, std::string *why);

// Whether ctn_grad differentiates through `op`: it has a gradient rule, or the graph expands it
// into parts (composite ops).
bool differentiable(const OpDef &op);

}  // namespace ctn
