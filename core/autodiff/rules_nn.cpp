// Gradient rules of the neural-network ops (convolution, pooling, normalisation, dropout,
// embedding). Convolutions are linear in each operand, so every rule is another convolution
// of the family; the normalisations have dedicated *_grad ops that backends implement.
#include <chutney/ops.h>

#include "autodiff/rules.h"
#include "util/status.h"

namespace ctn::rules {

namespace {
ctn_node in(Graph &g, ctn_node n, int k) { return g.node(n).inputs[static_cast<size_t>(k)]; }
const Shape &shape_of(Graph &g, ctn_node n) { return g.info(n).shape; }

// The first 7 (convolution) or 6/7 (pooling) attribute slots of a forward node, with two more
// slots i[7], i[8] set: the extra sizes the *_grad ops need.
ctn_attrs with_sizes(const ctn_attrs &fwd, uint32_t keep, int64_t a, int64_t b) {
  ctn_attrs r{};
  for (uint32_t k = 0; k < keep; ++k) r.i[k] = fwd.i[k];
  r.i[7] = a;
  r.i[8] = b;
  r.ni = 9;
  return r;
}
ctn_attrs conv_only(const ctn_attrs &fwd) {
  ctn_attrs r{};
  for (uint32_t k = 0; k < 7; ++k) r.i[k] = fwd.i[k];
  r.ni = 7;
  return r;
}
ctn_node sum_axes(Graph &g, ctn_node v, uint64_t mask) {
  if (mask == 0) return v;
  ctn_attrs a = attrs_i({static_cast<int64_t>(mask), 0});
  return g.op1(CTN_OP_SUM, v, &a);
}
// Mask of every axis of a rank-`nd` value except axis 1 (the channel axis).
uint64_t all_but_channel(uint32_t nd) { return ((1ull << nd) - 1) & ~2ull; }
// [C] -> [C, 1, ..., 1] so that it broadcasts against [N, C, ...] of rank nd.
ctn_node per_channel(Graph &g, ctn_node v, uint32_t nd) {
  ctn_attrs a{};
  a.i[a.ni++] = shape_of(g, v)[0];
  for (uint32_t k = 2; k < nd; ++k) a.i[a.ni++] = 1;
  return g.op1(CTN_OP_RESHAPE, v, &a);
}
}  // namespace

CTN_GRAD_RULE(conv2d) {
  const ctn_attrs fa = g.node(node).attrs;
  ctn_node x = in(g, node, 0), w = in(g, node, 1);
  if (need[0]) {
    Shape xs = shape_of(g, x);
    ctn_attrs a = with_sizes(fa, 7, xs[2], xs[3]);
    dx[0] = g.op2(CTN_OP_CONV2D_GRAD_INPUT, dy, w, &a);
  }
  if (need[1]) {
    Shape ws = shape_of(g, w);
    ctn_attrs a = with_sizes(fa, 7, ws[2], ws[3]);
    dx[1] = g.op2(CTN_OP_CONV2D_GRAD_WEIGHT, x, dy, &a);
  }
}

// dx = conv2d_grad_input(dy_in, w): linear in both operands.
CTN_GRAD_RULE(conv2d_grad_input) {
  const ctn_attrs fa = g.node(node).attrs;
  ctn_node dyi = in(g, node, 0), w = in(g, node, 1);  // conv_transpose2d: (x, w)
  if (need[0]) {
    ctn_attrs a = conv_only(fa);
    dx[0] = g.op2(CTN_OP_CONV2D, dy, w, &a);
  }
  if (need[1]) {
    Shape ws = shape_of(g, w);
    ctn_attrs a = with_sizes(fa, 7, ws[2], ws[3]);
    dx[1] = g.op2(CTN_OP_CONV2D_GRAD_WEIGHT, dy, dyi, &a);
  }
}

// dw = conv2d_grad_weight(x, dy_in).
CTN_GRAD_RULE(conv2d_grad_weight) {
  const ctn_attrs fa = g.node(node).attrs;
  ctn_node x = in(g, node, 0), dyi = in(g, node, 1);
  if (need[0]) {
    Shape xs = shape_of(g, x);
    ctn_attrs a = with_sizes(fa, 7, xs[2], xs[3]);
    dx[0] = g.op2(CTN_OP_CONV2D_GRAD_INPUT, dyi, dy, &a);
  }
  if (need[1]) {
    ctn_attrs a = conv_only(fa);
    dx[1] = g.op2(CTN_OP_CONV2D, x, dy, &a);
  }
}

// conv_transpose2d(x, w) = conv2d_grad_input(x, w) (same attributes but the trailing sizes,
// which neither gradient reads): the same rule.
CTN_GRAD_RULE(conv_transpose2d) { conv2d_grad_input(g, node, dy, need, dx); }

CTN_GRAD_RULE(max_pool2d) {
  if (!need[0]) return;
  ctn_attrs a = g.node(node).attrs;
  ctn_node ins[3] = {in(g, node, 0), node, dy};
  dx[0] = g.add_op(CTN_OP_MAX_POOL2D_GRAD, 3, ins, &a);
}

CTN_GRAD_RULE(avg_pool2d) {
  if (!need[0]) return;
  Shape xs = shape_of(g, in(g, node, 0));
  ctn_attrs a = with_sizes(g.node(node).attrs, 7, xs[2], xs[3]);
  dx[0] = g.op1(CTN_OP_AVG_POOL2D_GRAD, dy, &a);
}

CTN_GRAD_RULE(avg_pool2d_grad) {
  if (!need[0]) return;
  ctn_attrs a = g.node(node).attrs;
  a.i[7] = a.i[8] = 0;
  a.ni = 7;
  dx[0] = g.op1(CTN_OP_AVG_POOL2D, dy, &a);
}

CTN_GRAD_RULE(batch_norm) {
  ctn_attrs a = g.node(node).attrs;
  ctn_node x = in(g, node, 0), gamma = in(g, node, 1);
  if (need[0]) {
    ctn_node ins[3] = {x, gamma, dy};
    dx[0] = g.add_op(CTN_OP_BATCH_NORM_GRAD_INPUT, 3, ins, &a);
  }
  if (need[1]) dx[1] = g.op2(CTN_OP_BATCH_NORM_GRAD_GAMMA, x, dy, &a);
  if (need[2]) dx[2] = sum_axes(g, dy, all_but_channel(shape_of(g, x).ndim));
}

// y = (x - mean) * r * gamma + beta with r = (var + eps)^-1/2, from elementwise ops.
CTN_GRAD_RULE(batch_norm_inference) {
  const double eps = g.node(node).attrs.f[0];
  ctn_node x = in(g, node, 0), gamma = in(g, node, 1), mean = in(g, node, 3), var = in(g, node, 4);
  const uint32_t nd = shape_of(g, x).ndim;
  const uint64_t mask = all_but_channel(nd);
  const int32_t dt = g.info(x).dtype;
  ctn_node r = g.op2(CTN_OP_DIV, g.add_scalar(dt, 1.0), g.op1(CTN_OP_SQRT, g.op2(CTN_OP_ADD, var, g.add_scalar(dt, eps))));
  ctn_node gr = g.op2(CTN_OP_MUL, gamma, r);  // [C]
  ctn_node centred = CTN_NODE_NONE;
  if (need[1] || need[4]) centred = g.op2(CTN_OP_SUB, x, per_channel(g, mean, nd));
  if (need[0]) dx[0] = g.op2(CTN_OP_MUL, dy, per_channel(g, gr, nd));
  if (need[1]) dx[1] = g.op2(CTN_OP_MUL, sum_axes(g, g.op2(CTN_OP_MUL, dy, centred), mask), r);
  ctn_node sdy = CTN_NODE_NONE;
  if (need[2] || need[3]) sdy = sum_axes(g, dy, mask);
  if (need[2]) dx[2] = sdy;
  if (need[3]) dx[3] = g.op1(CTN_OP_NEG, g.op2(CTN_OP_MUL, sdy, gr));
  if (need[4]) {  // d/dvar = sum(dy (x - mean)) * gamma * -r^3 / 2
    ctn_node r3 = g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, r, r), r);
    ctn_node t = g.op2(CTN_OP_MUL, sum_axes(g, g.op2(CTN_OP_MUL, dy, centred), mask), gamma);
    dx[4] = g.op2(CTN_OP_MUL, t, g.op2(CTN_OP_MUL, r3, g.add_scalar(dt, -0.5)));
  }
}

CTN_GRAD_RULE(layer_norm) {
  ctn_attrs a = g.node(node).attrs;
  ctn_node x = in(g, node, 0), gamma = in(g, node, 1);
  if (need[0]) {
    ctn_node ins[3] = {x, gamma, dy};
    dx[0] = g.add_op(CTN_OP_LAYER_NORM_GRAD_INPUT, 3, ins, &a);
  }
  if (need[1]) dx[1] = g.op2(CTN_OP_LAYER_NORM_GRAD_GAMMA, x, dy, &a);
  if (need[2]) dx[2] = sum_axes(g, dy, (1ull << a.i[0]) - 1);
}

// Linear in x with the same mask for the same step and seed.
CTN_GRAD_RULE(dropout) {
  if (!need[0]) return;
  ctn_attrs a = g.node(node).attrs;
  dx[0] = g.op2(CTN_OP_DROPOUT, dy, in(g, node, 1), &a);
}

CTN_GRAD_RULE(embedding) {
  if (!need[0]) return;
  ctn_attrs a = attrs_i({shape_of(g, in(g, node, 0))[0]});
  dx[0] = g.op2(CTN_OP_EMBEDDING_GRAD, in(g, node, 1), dy, &a);
}

CTN_GRAD_RULE(embedding_grad) {
  if (!need[1]) return;
  dx[1] = g.op2(CTN_OP_EMBEDDING, dy, in(g, node, 0));
}

}  // namespace ctn::rules
