// The C ABI of graphs: nodes, the typed op helpers, ctn_grad and ctn_jvp (see capi.cpp for the
// conventions).
#include <chutney/chutney.h>
#include <chutney/ops.h>

#include "capi/capi_common.h"
#include "exec/registry.h"
#include "graph/graph.h"
#include "plugin/context.h"

#include <algorithm>
#include <cstring>

using namespace ctn;
using namespace ctn::capi;

namespace {

const OpDef &builtin(const char *name) {
  const OpDef *op = find_builtin_op(name);
  if (!op) fail(CTN_ERR_INTERNAL, "built-in op %s is missing", name);
  return *op;
}

// Typed helpers resolve their OpDef once.
#define OPDEF(var, name) static const OpDef &var = builtin(name)

ctn_status unary(ctn_graph *g, const OpDef &op, ctn_node a, const ctn_attrs &at, ctn_node *out, const char *fn) {
  return wall([&] {
    need(g, fn, "g");
    need(out, fn, "out");
    *out = g->add_op(op, 1, &a, at);
  });
}

ctn_status binary(ctn_graph *g, const OpDef &op, ctn_node a, ctn_node b, const ctn_attrs &at, ctn_node *out,
                  const char *fn) {
  return wall([&] {
    need(g, fn, "g");
    need(out, fn, "out");
    ctn_node in[2] = {a, b};
    *out = g->add_op(op, 2, in, at);
  });
}

const ctn_attrs kNoAttrs{};

// Axes list -> bitmask for reductions, normalising negative axes against the input.
ctn_attrs reduce_attrs(ctn_graph *g, ctn_node a, uint32_t n_axes, const int32_t *axes, int32_t keepdims, const char *op) {
  g->check(a, op);
  const uint32_t nd = g->info(a).shape.ndim;
  if (n_axes && !axes) fail(CTN_ERR_INVALID_ARGUMENT, "%s: axes is NULL but n_axes is %u", op, n_axes);
  uint64_t mask = 0;
  for (uint32_t k = 0; k < n_axes; ++k) {
    int32_t ax = normalize_axis(op, axes[k], nd);
    if (mask & (1ull << ax)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: axis %d is listed twice", op, axes[k]);
    mask |= 1ull << ax;
  }
  if (!n_axes) mask = nd ? (1ull << nd) - 1 : 0;
  if (nd == 0) mask = 0;
  ctn_attrs at{};
  at.i[0] = static_cast<int64_t>(mask);
  at.i[1] = keepdims != 0;
  at.ni = 2;
  return at;
}

}  // namespace

extern "C" {

/* ---- graphs ---- */
CTN_API ctn_status ctn_graph_create(ctn_context *ctx, uint32_t flags, ctn_graph **out) {
  return wall([&] {
    NEED(ctx);
    NEED(out);
    if (flags & ~CTN_GRAPH_EAGER) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_graph_create: unknown flags 0x%x", flags);
    *out = new ctn_graph(ctx, (flags & CTN_GRAPH_EAGER) != 0);
  });
}

CTN_API void ctn_graph_release(ctn_graph *g) { delete g; }

CTN_API ctn_status ctn_input(ctn_graph *g, const char *name, ctn_dtype dtype, uint32_t ndim, const int64_t *shape,
                             ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_input(name, raw_dtype(dtype), Shape::from(ndim, shape));
  });
}

CTN_API ctn_status ctn_constant(ctn_graph *g, const ctn_tensor *value, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(value);
    NEED(out);
    *out = g->add_constant(*value);
  });
}

CTN_API ctn_status ctn_scalar(ctn_graph *g, ctn_dtype dtype, double value, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_scalar(raw_dtype(dtype), value);
  });
}

CTN_API ctn_status ctn_variable(ctn_graph *g, const char *name, const ctn_tensor *init, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(init);
    NEED(out);
    *out = g->add_variable(name, *init);
  });
}

CTN_API ctn_status ctn_assign(ctn_graph *g, ctn_node var, ctn_node value, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_assign(var, value);
  });
}

CTN_API ctn_status ctn_op(ctn_graph *g, const char *op, uint32_t n_inputs, const ctn_node *inputs,
                          const ctn_attrs *attrs, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(op);
    NEED(out);
    *out = g->add_named_op(op, n_inputs, inputs, attrs);
  });
}

#define CTN_BINARY(fn, opname)                                                   \
  CTN_API ctn_status fn(ctn_graph *g, ctn_node a, ctn_node b, ctn_node *out) {   \
    OPDEF(op, opname);                                                           \
    return binary(g, op, a, b, kNoAttrs, out, #fn);                              \
  }
#define CTN_UNARY(fn, opname)                                        \
  CTN_API ctn_status fn(ctn_graph *g, ctn_node a, ctn_node *out) {   \
    OPDEF(op, opname);                                               \
    return unary(g, op, a, kNoAttrs, out, #fn);                      \
  }

CTN_BINARY(ctn_add, CTN_OP_ADD)
CTN_BINARY(ctn_sub, CTN_OP_SUB)
CTN_BINARY(ctn_mul, CTN_OP_MUL)
CTN_BINARY(ctn_div, CTN_OP_DIV)
CTN_BINARY(ctn_pow, CTN_OP_POW)
CTN_UNARY(ctn_neg, CTN_OP_NEG)
CTN_UNARY(ctn_exp, CTN_OP_EXP)
CTN_UNARY(ctn_log, CTN_OP_LOG)
CTN_UNARY(ctn_sqrt, CTN_OP_SQRT)
CTN_UNARY(ctn_abs, CTN_OP_ABS)
CTN_UNARY(ctn_tanh, CTN_OP_TANH)
CTN_UNARY(ctn_sigmoid, CTN_OP_SIGMOID)
CTN_UNARY(ctn_relu, CTN_OP_RELU)
CTN_UNARY(ctn_gelu, CTN_OP_GELU)

CTN_API ctn_status ctn_leaky_relu(ctn_graph *g, ctn_node a, double slope, ctn_node *out) {
  OPDEF(op, CTN_OP_LEAKY_RELU);
  return unary(g, op, a, attrs_f({slope}), out, __func__);
}

CTN_API ctn_status ctn_clamp(ctn_graph *g, ctn_node a, double lo, double hi, ctn_node *out) {
  OPDEF(op, CTN_OP_CLAMP);
  return unary(g, op, a, attrs_f({lo, hi}), out, __func__);
}

CTN_API ctn_status ctn_cast(ctn_graph *g, ctn_node a, ctn_dtype dtype, ctn_node *out) {
  OPDEF(op, CTN_OP_CAST);
  return unary(g, op, a, attrs_i({raw_dtype(dtype)}), out, __func__);
}

CTN_API ctn_status ctn_matmul(ctn_graph *g, ctn_node a, ctn_node b, int32_t trans_a, int32_t trans_b, ctn_node *out) {
  OPDEF(op, CTN_OP_MATMUL);
  return binary(g, op, a, b, attrs_i({trans_a != 0, trans_b != 0}), out, __func__);
}

#define CTN_REDUCE(fn, opname)                                                                                   \
  CTN_API ctn_status fn(ctn_graph *g, ctn_node a, uint32_t n_axes, const int32_t *axes, int32_t keepdims,       \
                        ctn_node *out) {                                                                         \
    OPDEF(op, opname);                                                                                           \
    return wall([&] {                                                                                            \
      NEED(g);                                                                                                   \
      NEED(out);                                                                                                 \
      ctn_attrs at = reduce_attrs(g, a, n_axes, axes, keepdims, opname);                                        \
      *out = g->add_op(op, 1, &a, at);                                                                           \
    });                                                                                                          \
  }
CTN_REDUCE(ctn_sum, CTN_OP_SUM)
CTN_REDUCE(ctn_mean, CTN_OP_MEAN)
CTN_REDUCE(ctn_max, CTN_OP_MAX)

CTN_API ctn_status ctn_reshape(ctn_graph *g, ctn_node a, uint32_t ndim, const int64_t *shape, ctn_node *out) {
  OPDEF(op, CTN_OP_RESHAPE);
  return wall([&] {
    NEED(g);
    NEED(out);
    if (ndim > CTN_MAX_DIMS) fail(CTN_ERR_SHAPE, "reshape: %u dims requested, at most %d", ndim, CTN_MAX_DIMS);
    if (ndim) NEED(shape);
    ctn_attrs at{};
    for (uint32_t k = 0; k < ndim; ++k) at.i[k] = shape[k];
    at.ni = ndim;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_permute(ctn_graph *g, ctn_node a, const int32_t *perm, ctn_node *out) {
  OPDEF(op, CTN_OP_PERMUTE);
  return wall([&] {
    NEED(g);
    NEED(out);
    g->check(a, "permute");
    uint32_t nd = g->info(a).shape.ndim;
    if (nd) NEED(perm);
    ctn_attrs at{};
    for (uint32_t k = 0; k < nd; ++k) at.i[k] = perm[k];
    at.ni = nd;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_transpose(ctn_graph *g, ctn_node a, ctn_node *out) {
  OPDEF(op, CTN_OP_PERMUTE);
  return wall([&] {
    NEED(g);
    NEED(out);
    g->check(a, "transpose");
    uint32_t nd = g->info(a).shape.ndim;
    if (nd < 2) fail(CTN_ERR_SHAPE, "transpose: needs at least 2 dims, got %s", shape_str(g->info(a).shape).c_str());
    ctn_attrs at{};
    for (uint32_t k = 0; k < nd; ++k) at.i[k] = k;
    at.i[nd - 2] = nd - 1;
    at.i[nd - 1] = nd - 2;
    at.ni = nd;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_slice(ctn_graph *g, ctn_node a, int32_t axis, int64_t start, int64_t stop, int64_t step,
                             ctn_node *out) {
  OPDEF(op, CTN_OP_SLICE);
  return unary(g, op, a, attrs_i({axis, start, stop, step}), out, __func__);
}

CTN_API ctn_status ctn_concat(ctn_graph *g, uint32_t n, const ctn_node *inputs, int32_t axis, ctn_node *out) {
  OPDEF(op, CTN_OP_CONCAT);
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_op(op, n, inputs, attrs_i({axis}));
  });
}

CTN_API ctn_status ctn_broadcast_to(ctn_graph *g, ctn_node a, uint32_t ndim, const int64_t *shape, ctn_node *out) {
  OPDEF(op, CTN_OP_BROADCAST_TO);
  return wall([&] {
    NEED(g);
    NEED(out);
    if (ndim > CTN_MAX_DIMS) fail(CTN_ERR_SHAPE, "broadcast_to: %u dims requested, at most %d", ndim, CTN_MAX_DIMS);
    if (ndim) NEED(shape);
    ctn_attrs at{};
    for (uint32_t k = 0; k < ndim; ++k) at.i[k] = shape[k];
    at.ni = ndim;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_compare(ctn_graph *g, const char *op, ctn_node a, ctn_node b, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(op);
    NEED(out);
    static const char *const names[] = {CTN_OP_EQ, CTN_OP_NE, CTN_OP_LT, CTN_OP_LE, CTN_OP_GT, CTN_OP_GE};
    bool ok = false;
    for (const char *n : names) ok = ok || std::strcmp(n, op) == 0;
    if (!ok) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_compare: unknown comparison \"%s\" (eq ne lt le gt ge)", op);
    ctn_node in[2] = {a, b};
    *out = g->add_op(op, 2, in, nullptr);
  });
}

CTN_API ctn_status ctn_where(ctn_graph *g, ctn_node cond, ctn_node a, ctn_node b, ctn_node *out) {
  OPDEF(op, CTN_OP_WHERE);
  return wall([&] {
    NEED(g);
    NEED(out);
    ctn_node in[3] = {cond, a, b};
    *out = g->add_op(op, 3, in, kNoAttrs);
  });
}

CTN_API ctn_status ctn_softmax(ctn_graph *g, ctn_node a, int32_t axis, ctn_node *out) {
  OPDEF(op, CTN_OP_SOFTMAX);
  return unary(g, op, a, attrs_i({axis}), out, __func__);
}

CTN_API ctn_status ctn_log_softmax(ctn_graph *g, ctn_node a, int32_t axis, ctn_node *out) {
  OPDEF(op, CTN_OP_LOG_SOFTMAX);
  return unary(g, op, a, attrs_i({axis}), out, __func__);
}

CTN_API ctn_status ctn_cross_entropy(ctn_graph *g, ctn_node logits, ctn_node labels, ctn_node *out) {
  OPDEF(op, CTN_OP_CROSS_ENTROPY);
  return binary(g, op, logits, labels, kNoAttrs, out, __func__);
}

CTN_API ctn_status ctn_node_info(ctn_graph *g, ctn_node n, ctn_dtype *out_dtype, uint32_t *out_ndim, int64_t *out_shape) {
  return wall([&] {
    NEED(g);
    g->check(n, "ctn_node_info");
    const ValueInfo &v = g->info(n);
    if (out_dtype) *out_dtype = static_cast<ctn_dtype>(v.dtype);
    if (out_ndim) *out_ndim = v.shape.ndim;
    if (out_shape)
      for (uint32_t k = 0; k < v.shape.ndim; ++k) out_shape[k] = v.shape[k];
  });
}

CTN_API ctn_status ctn_graph_node_count(ctn_graph *g, uint32_t *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = static_cast<uint32_t>(g->size());
  });
}

CTN_API ctn_status ctn_grad(ctn_graph *g, ctn_node loss, uint32_t n_wrt, const ctn_node *wrt, ctn_node *out_grads) {
  return wall([&] {
    NEED(g);
    if (n_wrt) {
      NEED(wrt);
      NEED(out_grads);
    }
    std::vector<ctn_node> tmp(n_wrt);
    build_grad(*g, loss, n_wrt, wrt, tmp.data());
    std::copy(tmp.begin(), tmp.end(), out_grads);
  });
}

CTN_API ctn_status ctn_jvp(ctn_graph *g, uint32_t n_outputs, const ctn_node *outputs, uint32_t n_inputs,
                           const ctn_node *inputs, const ctn_node *tangents, ctn_node *out_tangents) {
  return wall([&] {
    NEED(g);
    if (g->eager()) fail(CTN_ERR_STATE, "ctn_jvp: the graph is eager; forward mode builds nodes of a graph created with flags 0");
    std::vector<ctn_node> tmp(n_outputs);
    const size_t before = g->size();
    try {
      build_jvp(*g, n_outputs, outputs, n_inputs, inputs, tangents, tmp.data());
    } catch (...) {
      g->truncate(before);  // a failed call changes no state
      throw;
    }
    std::copy(tmp.begin(), tmp.end(), out_tangents);
  });
}

CTN_API ctn_status ctn_graph_value(ctn_graph *g, ctn_node n, ctn_tensor **out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    g->check(n, "ctn_graph_value");
    const Node &nd = g->node(n);
    if (!g->eager() && nd.kind != NodeKind::Constant && nd.kind != NodeKind::Variable)
      fail(CTN_ERR_STATE, "ctn_graph_value: node %u has no value: the graph is lazy (compile it into a plan)", n);
    if (!nd.value) fail(CTN_ERR_STATE, "ctn_graph_value: node %u has no value", n);
    *out = wrap(nd.value->contiguous());
  });
}

CTN_API ctn_status ctn_graph_node_backend(ctn_graph *g, ctn_node n, const char **out_name) {
  return wall([&] {
    NEED(g);
    NEED(out_name);
    g->check(n, "ctn_graph_node_backend");
    const Backend *b = g->node(n).ran_on;
    *out_name = b ? b->name.c_str() : "";
  });
}

CTN_API ctn_status ctn_graph_to_dot(ctn_graph *g, const char **out_text) {
  return wall([&] {
    NEED(g);
    NEED(out_text);
    g->text = g->to_dot();
    *out_text = g->text.c_str();
  });
}

}  // extern "C"
