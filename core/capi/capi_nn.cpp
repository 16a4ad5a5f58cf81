// Typed helpers of the neural-network ops (chutney.h, "Neural-network ops"): each packs its
// arguments into the attribute slots of ops.h and adds the node; the op's infer function does
// every check, so these only guard against NULL handles.
#include <chutney/chutney.h>
#include <chutney/ops.h>

#include "graph/graph.h"
#include "util/wall.h"

using namespace ctn;

namespace {

const OpDef &nn_op(const char *name) {
  const OpDef *op = find_builtin_op(name);
  if (!op) fail(CTN_ERR_INTERNAL, "built-in op %s is missing", name);
  return *op;
}

ctn_status add(ctn_graph *g, const char *name, std::initializer_list<ctn_node> inputs, const ctn_attrs &at,
               ctn_node *out, const char *fn) {
  return wall([&] {
    if (!g) fail(CTN_ERR_INVALID_ARGUMENT, "%s: g is NULL", fn);
    if (!out) fail(CTN_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = g->add_op(nn_op(name), static_cast<uint32_t>(inputs.size()), inputs.begin(), at);
  });
}

}  // namespace

extern "C" {

CTN_API ctn_status ctn_conv2d(ctn_graph *g, ctn_node x, ctn_node w, int32_t stride_h, int32_t stride_w, int32_t pad_h,
                              int32_t pad_w, int32_t dil_h, int32_t dil_w, int32_t groups, ctn_node *out) {
  ctn_attrs at = attrs_i({stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups});
  return add(g, CTN_OP_CONV2D, {x, w}, at, out, __func__);
}

CTN_API ctn_status ctn_conv_transpose2d(ctn_graph *g, ctn_node x, ctn_node w, int32_t stride_h, int32_t stride_w,
                                        int32_t pad_h, int32_t pad_w, int32_t dil_h, int32_t dil_w, int32_t groups,
                                        int32_t out_pad_h, int32_t out_pad_w, ctn_node *out) {
  ctn_attrs at = attrs_i({stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, out_pad_h, out_pad_w});
  return add(g, CTN_OP_CONV_TRANSPOSE2D, {x, w}, at, out, __func__);
}

CTN_API ctn_status ctn_max_pool2d(ctn_graph *g, ctn_node x, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t ph,
                                  int32_t pw, ctn_node *out) {
  ctn_attrs at = attrs_i({kh, kw, sh, sw, ph, pw});
  return add(g, CTN_OP_MAX_POOL2D, {x}, at, out, __func__);
}

CTN_API ctn_status ctn_avg_pool2d(ctn_graph *g, ctn_node x, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t ph,
                                  int32_t pw, int32_t count_include_pad, ctn_node *out) {
  ctn_attrs at = attrs_i({kh, kw, sh, sw, ph, pw, count_include_pad != 0});
  return add(g, CTN_OP_AVG_POOL2D, {x}, at, out, __func__);
}

CTN_API ctn_status ctn_batch_norm(ctn_graph *g, ctn_node x, ctn_node gamma, ctn_node beta, double eps, ctn_node *out) {
  return add(g, CTN_OP_BATCH_NORM, {x, gamma, beta}, attrs_f({eps}), out, __func__);
}

CTN_API ctn_status ctn_batch_norm_inference(ctn_graph *g, ctn_node x, ctn_node gamma, ctn_node beta, ctn_node mean,
                                            ctn_node var, double eps, ctn_node *out) {
  return add(g, CTN_OP_BATCH_NORM_INFERENCE, {x, gamma, beta, mean, var}, attrs_f({eps}), out, __func__);
}

CTN_API ctn_status ctn_layer_norm(ctn_graph *g, ctn_node x, ctn_node gamma, ctn_node beta, int32_t first_axis,
                                  double eps, ctn_node *out) {
  ctn_attrs at = attrs_f({eps});
  at.i[0] = first_axis;
  at.ni = 1;
  return add(g, CTN_OP_LAYER_NORM, {x, gamma, beta}, at, out, __func__);
}

CTN_API ctn_status ctn_dropout(ctn_graph *g, ctn_node x, ctn_node step, double p, int64_t seed, ctn_node *out) {
  ctn_attrs at = attrs_f({p});
  at.i[0] = seed;
  at.ni = 1;
  return add(g, CTN_OP_DROPOUT, {x, step}, at, out, __func__);
}

CTN_API ctn_status ctn_embedding(ctn_graph *g, ctn_node table, ctn_node ids, ctn_node *out) {
  return add(g, CTN_OP_EMBEDDING, {table, ids}, ctn_attrs{}, out, __func__);
}

}  // extern "C"
