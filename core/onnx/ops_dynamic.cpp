// ONNX ops whose output shape depends on the input values (since 1.6): NonZero, Compress,
// Unique, TopK and NonMaxSuppression, each onto the chutney op of the same meaning
// (core/ops/ops_dynamic.cpp). Their results carry an upper-bound shape in the graph; a plan runs
// them in stages (docs/EXECUTION.md, "Data-dependent shapes"). With constant inputs the driver
// folds them at import like any node.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <limits>

namespace ctn::onnx {
namespace {

using namespace lower;

ctn_attrs ints(std::initializer_list<int64_t> v) { return attrs_i(v); }

void nonzero(NodeCtx &c) { c.outs = {c.g.op1(CTN_OP_NONZERO, c.in(0))}; }

void compress(NodeCtx &c) {
  ctn_attrs a = ints({-1});
  if (c.has_attr("axis")) {
    const int64_t ax = c.attr_i("axis", 0);
    a.i[0] = c.axis(ax, c.shape(0).ndim);  // chutney's -1 means flattened: pass it normalised
  }
  c.outs = {c.g.op2(CTN_OP_COMPRESS, c.in(0), c.in(1), &a)};
}

void unique(NodeCtx &c) {
  int64_t axis = -1;
  if (c.has_attr("axis")) axis = c.axis(c.attr_i("axis", 0), c.shape(0).ndim);
  const int64_t sorted = c.attr_i("sorted", 1);
  c.outs.assign(c.node.outputs.size(), CTN_NODE_NONE);
  for (size_t k = 0; k < c.outs.size() && k < 4; ++k) {
    if (c.node.outputs[k].empty()) continue;
    ctn_attrs a = ints({axis, sorted, static_cast<int64_t>(k)});
    c.outs[k] = c.g.op1(CTN_OP_UNIQUE, c.in(0), &a);
  }
}

void topk(NodeCtx &c) {
  ctn_node k;
  if (c.opset < 10) {
    k = const_i64(c.g, {c.attr_i("k", 0)}, Shape{});
  } else {
    k = c.in(1);
  }
  const int64_t axis = c.axis(c.attr_i("axis", -1), c.shape(0).ndim);
  const int64_t largest = c.attr_i("largest", 1), sorted = c.attr_i("sorted", 1);
  c.outs.clear();
  for (int64_t out = 0; out < 2; ++out) {
    ctn_attrs a = ints({axis, largest, sorted, out});
    c.outs.push_back(c.g.op2(CTN_OP_TOPK, c.in(0), k, &a));
  }
}

void non_max_suppression(NodeCtx &c) {
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  ctn_node max_out = c.has(2) ? c.in(2) : const_i64(g, {0}, Shape{});
  ctn_node iou = c.has(3) ? c.in(3) : const_f(g, dt, {0.0}, Shape{});
  ctn_node score = c.has(4) ? c.in(4) : const_f(g, dt, {-std::numeric_limits<double>::infinity()}, Shape{});
  ctn_attrs a = ints({c.attr_i("center_point_box", 0)});
  ctn_node in[5] = {c.in(0), c.in(1), max_out, iou, score};
  c.outs = {g.add_op(CTN_OP_NON_MAX_SUPPRESSION, 5, in, &a)};
}

const OpEntry kOps[] = {
    {"NonZero", nonzero},
    {"Compress", compress},
    {"Unique", unique},
    {"TopK", topk},
    {"NonMaxSuppression", non_max_suppression},
};

}  // namespace

std::span<const OpEntry> dynamic_ops() { return kOps; }

}  // namespace ctn::onnx
