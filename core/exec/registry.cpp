// The op registry behind ctn_context_op_count / _op_info / _op_support (chutney.h, since 1.2):
// every op of a context in a stable order, the attribute slots of the built-in ops, and the
// support probe that asks a backend for a kernel of one small node of an op.
#include "exec/registry.h"

#include <chutney/ops.h>

#include "exec/select.h"
#include "graph/graph.h"
#include "util/status.h"

#include <cstdlib>
#include <cstring>

namespace ctn {

namespace {

// One built-in op's attribute slots (what ops.h documents) and the probe node used to ask a
// backend whether it runs the op. `inputs`: space-separated "T[d0,d1]" with T "D" (the dtype
// asked about), "i64", "i32", "bool"; "[]" is 0-d. An op absent from the table reads no
// attributes and is probed with n_inputs (2 for variadic ops) inputs of D[2,3].
struct BuiltinMeta {
  const char *op;
  const char *attributes;
  const char *inputs;  // nullptr: the default probe
  int64_t ints[CTN_ATTR_INTS];
  uint32_t ni;
  double floats[CTN_ATTR_FLOATS];
  uint32_t nf;
};

#define CONV_ATTRS "i[0..1] stride, i[2..3] padding, i[4..5] dilation, i[6] groups"
#define POOL_ATTRS "i[0..1] kernel, i[2..3] stride, i[4..5] padding"

const BuiltinMeta kMeta[] = {
    {CTN_OP_LEAKY_RELU, "f[0] slope", nullptr, {}, 0, {0.1}, 1},
    {CTN_OP_CLAMP, "f[0] lo, f[1] hi", nullptr, {}, 0, {-1, 1}, 2},
    {CTN_OP_CAST, "i[0] target dtype", "D[2,3]", {}, 1, {}, 0},  // i[0] chosen per dtype
    {CTN_OP_WHERE, "", "bool[2,3] D[2,3] D[2,3]", {}, 0, {}, 0},
    {CTN_OP_LEAKY_RELU_GRAD, "f[0] slope", nullptr, {}, 0, {0.1}, 1},
    {CTN_OP_CLAMP_GRAD, "f[0] lo, f[1] hi", nullptr, {}, 0, {-1, 1}, 2},
    {CTN_OP_MATMUL, "i[0] trans_a, i[1] trans_b", "D[2,3] D[3,2]", {0, 0}, 2, {}, 0},
    {CTN_OP_MATMUL_BIAS_ACT, "i[0] trans_a, i[1] trans_b, i[2] activation", "D[2,3] D[3,2] D[2]", {0, 0, 1}, 3, {}, 0},
    {CTN_OP_SUM, "i[0] axis mask, i[1] keepdims", "D[2,3]", {3, 0}, 2, {}, 0},
    {CTN_OP_MEAN, "i[0] axis mask, i[1] keepdims", "D[2,3]", {3, 0}, 2, {}, 0},
    {CTN_OP_MAX, "i[0] axis mask, i[1] keepdims", "D[2,3]", {3, 0}, 2, {}, 0},
    {CTN_OP_RESHAPE, "i[0..ni-1] shape", "D[2,3]", {3, 2}, 2, {}, 0},
    {CTN_OP_PERMUTE, "i[0..ndim-1] perm", "D[2,3]", {1, 0}, 2, {}, 0},
    {CTN_OP_SLICE, "i[0] axis, i[1] start, i[2] stop, i[3] step", "D[2,3]", {1, 0, 2, 1}, 4, {}, 0},
    {CTN_OP_SLICE_GRAD, "i[0] axis, i[1] start, i[2] stop, i[3] step, i[4] source size", "D[2,2]", {1, 0, 2, 1, 3}, 5,
     {}, 0},
    {CTN_OP_CONCAT, "i[0] axis", "D[2,3] D[2,3]", {0}, 1, {}, 0},
    {CTN_OP_BROADCAST_TO, "i[0..ni-1] shape", "D[3]", {2, 3}, 2, {}, 0},
    {CTN_OP_SOFTMAX, "i[0] axis", "D[2,3]", {1}, 1, {}, 0},
    {CTN_OP_LOG_SOFTMAX, "i[0] axis", "D[2,3]", {1}, 1, {}, 0},
    {CTN_OP_SOFTMAX_GRAD, "i[0] axis", "D[2,3] D[2,3]", {1}, 1, {}, 0},
    {CTN_OP_LOG_SOFTMAX_GRAD, "i[0] axis", "D[2,3] D[2,3]", {1}, 1, {}, 0},
    {CTN_OP_CROSS_ENTROPY, "", "D[2,3] i64[2]", {}, 0, {}, 0},
    {CTN_OP_CROSS_ENTROPY_GRAD, "", "D[2,3] i64[2] D[]", {}, 0, {}, 0},
    {CTN_OP_SGD_VELOCITY, "f[0] momentum, f[1] weight_decay", "D[2,3] D[2,3] D[2,3]", {}, 0, {0.9, 0}, 2},
    {CTN_OP_SGD_APPLY, "f[0] momentum, f[1] weight_decay, i[0] nesterov", "D[2,3] D[2,3] D[2,3] D[]", {0}, 1, {0.9, 0},
     2},
    {CTN_OP_ADAM_MOMENT1, "f[0] beta1", "D[2,3] D[2,3]", {}, 0, {0.9}, 1},
    {CTN_OP_ADAM_MOMENT2, "f[0] beta2", "D[2,3] D[2,3]", {}, 0, {0.999}, 1},
    {CTN_OP_ADAM_APPLY, "f[0] beta1, f[1] beta2, f[2] eps, f[3] weight_decay, i[0] decoupled",
     "D[2,3] D[2,3] D[2,3] D[] i64[]", {0}, 1, {0.9, 0.999, 1e-8, 0}, 4},
    {CTN_OP_CONV2D, CONV_ATTRS, "D[1,1,4,4] D[1,1,3,3]", {1, 1, 0, 0, 1, 1, 1}, 7, {}, 0},
    {CTN_OP_CONV2D_GRAD_INPUT, CONV_ATTRS ", i[7..8] input H, W", "D[1,1,2,2] D[1,1,3,3]", {1, 1, 0, 0, 1, 1, 1, 4, 4},
     9, {}, 0},
    {CTN_OP_CONV2D_GRAD_WEIGHT, CONV_ATTRS ", i[7..8] KH, KW", "D[1,1,4,4] D[1,1,2,2]", {1, 1, 0, 0, 1, 1, 1, 3, 3}, 9,
     {}, 0},
    {CTN_OP_CONV_TRANSPOSE2D, CONV_ATTRS ", i[7..8] output padding", "D[1,1,2,2] D[1,1,3,3]",
     {1, 1, 0, 0, 1, 1, 1, 0, 0}, 9, {}, 0},
    {CTN_OP_MAX_POOL2D, POOL_ATTRS, "D[1,1,4,4]", {2, 2, 2, 2, 0, 0}, 6, {}, 0},
    {CTN_OP_MAX_POOL2D_GRAD, POOL_ATTRS, "D[1,1,4,4] D[1,1,2,2] D[1,1,2,2]", {2, 2, 2, 2, 0, 0}, 6, {}, 0},
    {CTN_OP_AVG_POOL2D, POOL_ATTRS ", i[6] count_include_pad", "D[1,1,4,4]", {2, 2, 2, 2, 0, 0, 0}, 7, {}, 0},
    {CTN_OP_AVG_POOL2D_GRAD, POOL_ATTRS ", i[6] count_include_pad, i[7..8] H, W", "D[1,1,2,2]",
     {2, 2, 2, 2, 0, 0, 0, 4, 4}, 9, {}, 0},
    {CTN_OP_BATCH_NORM, "f[0] eps", "D[2,3,2,2] D[3] D[3]", {}, 0, {1e-5}, 1},
    {CTN_OP_BATCH_NORM_GRAD_INPUT, "f[0] eps", "D[2,3,2,2] D[3] D[2,3,2,2]", {}, 0, {1e-5}, 1},
    {CTN_OP_BATCH_NORM_GRAD_GAMMA, "f[0] eps", "D[2,3,2,2] D[2,3,2,2]", {}, 0, {1e-5}, 1},
    {CTN_OP_BATCH_NORM_INFERENCE, "f[0] eps", "D[2,3,2,2] D[3] D[3] D[3] D[3]", {}, 0, {1e-5}, 1},
    {CTN_OP_LAYER_NORM, "i[0] first axis, f[0] eps", "D[2,3] D[3] D[3]", {1}, 1, {1e-5}, 1},
    {CTN_OP_LAYER_NORM_GRAD_INPUT, "i[0] first axis, f[0] eps", "D[2,3] D[3] D[2,3]", {1}, 1, {1e-5}, 1},
    {CTN_OP_LAYER_NORM_GRAD_GAMMA, "i[0] first axis, f[0] eps", "D[2,3] D[2,3]", {1}, 1, {1e-5}, 1},
    {CTN_OP_DROPOUT, "f[0] p, i[0] seed", "D[2,3] i64[]", {7}, 1, {0.5}, 1},
    {CTN_OP_EMBEDDING, "", "D[4,3] i64[2]", {}, 0, {}, 0},
    {CTN_OP_EMBEDDING_GRAD, "i[0] rows V", "i64[2] D[2,3]", {4}, 1, {}, 0},
};

const BuiltinMeta *meta_of(const std::string &name) {
  for (const BuiltinMeta &m : kMeta)
    if (name == m.op) return &m;
  return nullptr;
}

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
    v.dtype = t == "D" ? dtype : t == "i64" ? CTN_I64 : t == "i32" ? CTN_I32 : t == "bool" ? CTN_BOOL : CTN_F32;
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

namespace {
// OpDef::expand exists once composite ops are in the tree; detected so this file builds either way.
template <class T>
auto expands(const T &op, int) -> decltype(op.expand != nullptr) {
  return op.expand != nullptr;
}
template <class T>
bool expands(const T &, long) {
  return false;
}
}  // namespace

bool differentiable(const OpDef &op) { return op.grad != nullptr || expands(op, 0); }

const char *builtin_attributes(const OpDef &op) {
  if (op.attributes) return op.attributes;
  const BuiltinMeta *m = meta_of(op.name);
  return m ? m->attributes : "";
}

bool probe_support(Context &ctx, Backend &b, const OpDef &op, int32_t dtype, std::string *why) {
  const BuiltinMeta *m = op.lib ? nullptr : meta_of(op.name);
  std::vector<ValueInfo> in;
  ctn_attrs attrs{};
  if (m && m->inputs) {
    in = parse_inputs(m->inputs, dtype);
  } else {
    ValueInfo v;
    v.dtype = dtype;
    const int64_t d[2] = {2, 3};
    v.shape = Shape::from(2, d);
    in.assign(op.n_inputs < 0 ? 2 : static_cast<size_t>(op.n_inputs), v);
  }
  if (m) {
    for (uint32_t k = 0; k < m->ni; ++k) attrs.i[k] = m->ints[k];
    for (uint32_t k = 0; k < m->nf; ++k) attrs.f[k] = m->floats[k];
    attrs.ni = m->ni;
    attrs.nf = m->nf;
  }
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
    if (node.kind != NodeKind::Op) continue;
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
