// The op registry behind ctn_context_op_count / _op_info / _op_support (chutney.h, since 1.2):
// every op of a context in a stable order, and the support probe that asks a backend for a
// kernel of one small node of an op (the node each op's row describes: OpDef::probe).
#include "exec/registry.h"

#include <chutney/ops.h>

#include "exec/select.h"
#include "graph/graph.h"
#include "util/status.h"

#include <cstdlib>
#include <cstring>

namespace ctn {

namespace {

// "D[2,3] i64[]" -> value infos, D = dtype.
std::vector<ValueInfo> parse_inputs(const char *spec, int32_t dtype) {
  std::vector<ValueInfo> out;
  const char *p = spec;
  while (*p) {
    while (*p == ' ') ++p;
    if (!*p) break;
    ValueInfo v;
    const char *br = std::strchr(p, '[');
    std::string t(p, br);
    v.dtype = t == "D"      ? dtype
              : t == "i64"  ? CTN_I64
              : t == "i32"  ? CTN_I32
              : t == "bool" ? CTN_BOOL
              : t == "u8"   ? CTN_U8
              : t == "i8"   ? CTN_I8
                            : CTN_F32;
    p = br + 1;
    std::vector<int64_t> dims;
    while (*p && *p != ']') {
      dims.push_back(std::strtoll(p, const_cast<char **>(&p), 10));
      if (*p == ',') ++p;
    }
    if (*p == ']') ++p;
    v.shape = Shape::from(static_cast<uint32_t>(dims.size()), dims.data());
    out.push_back(v);
  }
  return out;
}

}  // namespace

std::vector<const OpDef *> registry_ops(const Context &ctx) {
  std::vector<const OpDef *> out;
  size_t n = 0;
  const OpDef *const *b = builtin_ops(&n);
  out.assign(b, b + n);
  for (const auto &lib : ctx.oplibs)
    for (const auto &op : lib->ops) out.push_back(op.get());
  return out;
}

bool differentiable(const OpDef &op) { return op.grad != nullptr || op.expand != nullptr; }

const char *builtin_attributes(const OpDef &op) { return op.attributes ? op.attributes : ""; }

bool probe_support(Context &ctx, Backend &b, const OpDef &op, int32_t dtype, std::string *why) {
  const OpProbe &m = op.probe;
  std::vector<ValueInfo> in;
  ctn_attrs attrs{};
  if (m.inputs) {
    in = parse_inputs(m.inputs, dtype);
  } else {
    ValueInfo v;
    v.dtype = dtype;
    const int64_t d[2] = {2, 3};
    v.shape = Shape::from(2, d);
    in.assign(op.n_inputs < 0 ? 2 : static_cast<size_t>(op.n_inputs), v);
  }
  for (uint32_t k = 0; k < m.ni; ++k) attrs.i[k] = m.ints[k];
  for (uint32_t k = 0; k < m.nf; ++k) attrs.f[k] = m.floats[k];
  attrs.ni = m.ni;
  attrs.nf = m.nf;
  if (op.name == CTN_OP_CAST) attrs.i[0] = dtype == CTN_F32 ? CTN_F64 : CTN_F32;
  // A lazy probe graph: the op's infer sees the inputs as in any graph, and an op the graph
  // expands into parts (a composite) is asked about part by part.
  Graph g(&ctx, false);
  std::vector<ctn_node> ids;
  for (const ValueInfo &v : in) ids.push_back(g.add_input(nullptr, v.dtype, v.shape));
  try {
    g.add_op(op, static_cast<uint32_t>(ids.size()), ids.data(), attrs);
  } catch (const Error &e) {
    *why = std::string("the op does not take ") + dtype_name(dtype) + ": " + e.message();
    return false;
  }
  for (size_t n = ids.size(); n < g.size(); ++n) {
    const Node &node = g.node(static_cast<ctn_node>(n));
    // Data-dependent ops (since 1.6) are computed on the host whatever the backends: a plan over
    // one runs with any backend list, so they take no kernel to be supported.
    if (node.kind != NodeKind::Op || (node.op->flags & OP_DATA_DEPENDENT)) continue;
    std::vector<ctn_tensor_desc> d;
    for (ctn_node i : node.inputs) d.push_back(make_desc(g.info(i)));
    const ctn_tensor_desc od = make_desc(node.info);
    ctn_kernel k{};
    std::string reason;
    if (!select_kernel(b, *node.op, static_cast<uint32_t>(d.size()), d.data(), od, node.attrs, &k, &reason)) {
      if (reason.empty()) reason = "unsupported";
      *why = node.op == &op ? reason : "part " + node.op->name + " of " + op.name + ": " + reason;
      return false;
    }
    b.release(k);
  }
  why->clear();
  return true;
}

}  // namespace ctn
