// Neural-network op schemas (convolution, pooling, normalisation, dropout, embedding): shape and
// dtype inference with attribute normalisation, and their gradient and tangent rules (above the
// rows).
// Every check happens here so that backends receive only well-formed, normalised attributes.
#include <chutney/ops.h>

#include "autodiff/rules.h"
#include "graph/op.h"
#include "tensor/tensor.h"
#include "util/status.h"

// Gradient rules of the ops below (OpDef::grad), kept beside their rows.
// Gradient rules of the neural-network ops (convolution, pooling, normalisation, dropout,
// embedding). Convolutions are linear in each operand, so every rule is another convolution
// of the family; the normalisations have dedicated *_grad ops that backends implement.
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
  if (fa.ni > 7 && fa.i[7] != 0)
    fail(CTN_ERR_UNSUPPORTED, "conv2d: no gradient for a layout 1 (NHWC) convolution: the compiler's layout stage "
                              "makes them only in inference plans");
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

// The pools' layout attribute (since 1.7): max_pool2d i[6], avg_pool2d i[7]; the gradients
// are NCHW only.
static void refuse_nhwc_pool(const Graph &g, ctn_node node, uint32_t slot, const char *op) {
  const ctn_attrs &a = g.node(node).attrs;
  if (a.ni > slot && a.i[slot] != 0)
    fail(CTN_ERR_UNSUPPORTED, "%s: no gradient for a layout 1 (NHWC) pool: the compiler's layout stage makes them "
                              "only in inference plans", op);
}

CTN_GRAD_RULE(max_pool2d) {
  if (!need[0]) return;
  refuse_nhwc_pool(g, node, 6, CTN_OP_MAX_POOL2D);
  ctn_attrs a = g.node(node).attrs;
  ctn_node ins[3] = {in(g, node, 0), node, dy};
  dx[0] = g.add_op(CTN_OP_MAX_POOL2D_GRAD, 3, ins, &a);
}

CTN_GRAD_RULE(avg_pool2d) {
  if (!need[0]) return;
  refuse_nhwc_pool(g, node, 7, CTN_OP_AVG_POOL2D);
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


// Tangent rules of the ops below with a formula of their own (OpDef::tangent).
CTN_TANGENT_RULE(embedding_jvp) {  // linear in the table
  Fwd x(g, node, t);
  return x.none(0) ? CTN_NODE_NONE : g.op2(CTN_OP_EMBEDDING, t[0], x.in(1), &x.f.attrs);
}

CTN_TANGENT_RULE(batch_norm_jvp) {
  // x: the per-channel Jacobian block is symmetric, so the reverse rule applies to tx; gamma
  // and beta: y = x_hat * gamma + beta per channel, x_hat = batch_norm(x, 1, 0).
  Fwd x(g, node, t);
  ctn_node r = CTN_NODE_NONE;
  if (!x.none(0)) {
    ctn_node ins[3] = {x.in(0), x.in(1), t[0]};
    r = g.add_op(CTN_OP_BATCH_NORM_GRAD_INPUT, 3, ins, &x.f.attrs);
  }
  const Shape &xs = g.info(x.in(0)).shape;
  ctn_attrs ca{};  // [1, C, 1, ...]
  for (uint32_t d = 0; d < xs.ndim; ++d) ca.i[ca.ni++] = d == 1 ? xs[1] : 1;
  if (!x.none(1)) {
    Tensor one = Tensor::empty(g.info(x.in(1)).dtype, g.info(x.in(1)).shape);
    ctn_node ones = g.op2(CTN_OP_ADD, g.add_constant(one), g.add_scalar(one.dtype, 1.0));
    ctn_node ins[3] = {x.in(0), ones, zeros_like(g, x.in(2))};
    ctn_node xhat = g.add_op(CTN_OP_BATCH_NORM, 3, ins, &x.f.attrs);
    r = add_tangents(g, r, g.op2(CTN_OP_MUL, xhat, g.op1(CTN_OP_RESHAPE, t[1], &ca)));
  }
  if (!x.none(2)) r = add_tangents(g, r, bcast(g, g.op1(CTN_OP_RESHAPE, t[2], &ca), x.out()));
  return r;
}

}  // namespace ctn::rules

namespace ctn {

namespace {

const char *N(const OpDef &op) { return op.name.c_str(); }
long long L(int64_t v) { return static_cast<long long>(v); }

// Size arithmetic on attributes and dims (both up to 2^60 or more) checked: an overflow is a
// shape error naming the op, never a wrapped size (found by fuzz_graph).
int64_t mul(const OpDef &op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(CTN_ERR_SHAPE, "%s: sizes overflow an int64 (%lld * %lld)", op.name.c_str(), L(a), L(b));
  return r;
}
int64_t add(const OpDef &op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(CTN_ERR_SHAPE, "%s: sizes overflow an int64 (%lld + %lld)", op.name.c_str(), L(a), L(b));
  return r;
}

void need_float(const OpDef &op, const ValueInfo &v, const char *which) {
  if (!dtype_is_float(v.dtype))
    fail(CTN_ERR_DTYPE, "%s: %s has dtype %s; this op needs f32 or f64", N(op), which, dtype_name(v.dtype));
}

// Every listed operand has the dtype of operand 0, which is floating.
void same_float(const OpDef &op, const ValueInfo *in, uint32_t n, std::initializer_list<uint32_t> which) {
  need_float(op, in[0], "the input");
  for (uint32_t k : which)
    if (in[k].dtype != in[0].dtype)
      fail(CTN_ERR_DTYPE, "%s: operand dtypes differ: %s", N(op), values_str(in, n).c_str());
}

void need_rank(const OpDef &op, const ValueInfo &v, uint32_t rank, const char *which, const char *layout) {
  if (v.shape.ndim != rank)
    fail(CTN_ERR_SHAPE, "%s: %s must be %u-d %s, got %s", N(op), which, rank, layout, shape_str(v.shape).c_str());
}

// ---- convolution ----------------------------------------------------------------------------

struct Conv {
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

// Normalises and validates slots 0..6 (0 in a stride/dilation/groups slot means 1).
Conv conv_attrs(const OpDef &op, ctn_attrs &a) {
  for (int k : {0, 1, 4, 5, 6})
    if (a.i[k] == 0) a.i[k] = 1;
  Conv c{a.i[0], a.i[1], a.i[2], a.i[3], a.i[4], a.i[5], a.i[6]};
  if (c.sh < 1 || c.sw < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: stride must be >= 1, got (%lld, %lld)", N(op), L(c.sh), L(c.sw));
  if (c.ph < 0 || c.pw < 0) fail(CTN_ERR_INVALID_ARGUMENT, "%s: padding must be >= 0, got (%lld, %lld)", N(op), L(c.ph), L(c.pw));
  if (c.dh < 1 || c.dw < 1)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: dilation must be >= 1, got (%lld, %lld)", N(op), L(c.dh), L(c.dw));
  if (c.groups < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: groups must be >= 1, got %lld", N(op), L(c.groups));
  return c;
}

// Output size of a convolution along one axis; -1 when the (dilated) kernel does not fit.
int64_t conv_out(const OpDef &op, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t span = add(op, mul(op, d, k - 1), 1);
  int64_t padded = add(op, in, mul(op, 2, p));
  if (padded < span) return -1;
  return (padded - span) / s + 1;
}

std::string conv_str(const Conv &c) {
  return format("stride (%lld, %lld), padding (%lld, %lld), dilation (%lld, %lld)", L(c.sh), L(c.sw), L(c.ph), L(c.pw),
                L(c.dh), L(c.dw));
}

// x [N,C,H,W] and w [O,C/g,KH,KW] of a forward convolution agree; returns [N,O,Ho,Wo].
Shape conv_forward_shape(const OpDef &op, const Shape &x, const Shape &w, const Conv &c, const char *xname) {
  if (x[1] % c.groups != 0 || w[0] % c.groups != 0)
    fail(CTN_ERR_SHAPE, "%s: groups %lld must divide the input channels of %s %s and the output channels of weight %s",
         N(op), L(c.groups), xname, shape_str(x).c_str(), shape_str(w).c_str());
  if (mul(op, w[1], c.groups) != x[1])
    fail(CTN_ERR_SHAPE, "%s: input channels %lld do not match weight %s with groups %lld", N(op), L(x[1]),
         shape_str(w).c_str(), L(c.groups));
  if (w[2] < 1 || w[3] < 1) fail(CTN_ERR_SHAPE, "%s: weight %s has an empty kernel", N(op), shape_str(w).c_str());
  int64_t ho = conv_out(op, x[2], w[2], c.sh, c.ph, c.dh), wo = conv_out(op, x[3], w[3], c.sw, c.pw, c.dw);
  if (ho < 1 || wo < 1)
    fail(CTN_ERR_SHAPE, "%s: kernel %lldx%lld does not fit %s %s with %s", N(op), L(w[2]), L(w[3]), xname,
         shape_str(x).c_str(), conv_str(c).c_str());
  Shape r;
  r.ndim = 4;
  r[0] = x[0], r[1] = w[0], r[2] = ho, r[3] = wo;
  return r;
}

}  // namespace

Shape conv2d_geometry(const OpDef &op, const Shape &x, const Shape &w, ctn_attrs &a) {
  Conv c = conv_attrs(op, a);
  return conv_forward_shape(op, x, w, c, "input");
}

namespace {

// The layout attribute (since 1.7) of a forward convolution at slot k: 0 NCHW (absent), 1 NHWC.
int64_t conv_layout(const OpDef &op, const ctn_attrs &a, uint32_t k) {
  const int64_t layout = a.ni > k ? a.i[k] : 0;
  if (layout != 0 && layout != 1)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: layout i[%u] must be 0 (NCHW) or 1 (NHWC), got %lld", N(op), k, L(layout));
  return layout;
}

// [N,H,W,C] <-> [N,C,H,W] (to_nchw: NHWC dims in NCHW order; else back).
Shape swap_channels(const Shape &s, bool to_nchw) {
  Shape r = s;
  if (to_nchw) r[1] = s[3], r[2] = s[1], r[3] = s[2];
  else r[1] = s[2], r[2] = s[3], r[3] = s[1];
  return r;
}

// conv2d's checks and output for x in `layout` (its slots 0..6 normalised; the caller sets ni).
ValueInfo conv2d_output(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a, int64_t layout) {
  same_float(op, in, n, {1});
  need_rank(op, in[0], 4, "the input", layout ? "[N, H, W, C]" : "[N, C, H, W]");
  need_rank(op, in[1], 4, "the weight", "[O, C/groups, KH, KW]");
  Conv c = conv_attrs(op, a);
  const Shape x = layout ? swap_channels(in[0].shape, true) : in[0].shape;
  const Shape y = conv_forward_shape(op, x, in[1].shape, c, "input");
  return ValueInfo{in[0].dtype, layout ? swap_channels(y, false) : y};
}

// Writes the layout slot k (kept only for NHWC: an NCHW node's attributes stay as before 1.7).
void set_layout(ctn_attrs &a, uint32_t k, int64_t layout) {
  a.ni = layout ? k + 1 : k;
  a.i[k] = layout;
}

// (x, w); conv attrs + i[7] layout (since 1.7).
ValueInfo infer_conv2d(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  const int64_t layout = conv_layout(op, a, 7);
  ValueInfo r = conv2d_output(op, in, n, a, layout);
  set_layout(a, 7, layout);
  return r;
}

// (x, w, bias [O]); conv attrs + i[7] activation (f[0], f[1]: clamp bounds), i[8] layout (since
// 1.7) -> act(conv2d + bias).
ValueInfo infer_conv2d_bias_act(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  const int64_t act = a.i[7], layout = conv_layout(op, a, 8);
  ValueInfo r = conv2d_output(op, in, 2, a, layout);
  const int64_t o = in[1].shape[0];
  if (in[2].dtype != in[0].dtype || in[2].shape.ndim != 1 || in[2].shape[0] != o)
    fail(CTN_ERR_SHAPE, "%s: bias must be [O] with O = %lld: %s", N(op), L(o), values_str(in, n).c_str());
  if (act < CTN_ACT_NONE || act > CTN_ACT_HARDSWISH)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: unknown activation %lld", N(op), L(act));
  if (act == CTN_ACT_CLAMP && (a.nf < 2 || !(a.f[0] <= a.f[1])))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: clamp needs f[0] <= f[1]", N(op));
  a.i[7] = act;
  set_layout(a, 8, layout);
  return r;
}

// (x, w, bias [O], r); conv2d_bias_act's attrs -> act(conv2d + bias + r), r of the output's shape.
ValueInfo infer_conv2d_bias_add_act(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  ValueInfo r = infer_conv2d_bias_act(op, in, 3, a);
  if (in[3].dtype != r.dtype || in[3].shape != r.shape)
    fail(CTN_ERR_SHAPE, "%s: the residual must have the output's dtype and shape %s: %s", N(op),
         shape_str(r.shape).c_str(), values_str(in, n).c_str());
  return r;
}

// (dy, w); i[7], i[8] = H, W -> dx [N, C, H, W].
ValueInfo infer_conv2d_grad_input(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1});
  need_rank(op, in[0], 4, "dy", "[N, O, Ho, Wo]");
  need_rank(op, in[1], 4, "the weight", "[O, C/groups, KH, KW]");
  Conv c = conv_attrs(op, a);
  const Shape &dy = in[0].shape, &w = in[1].shape;
  if (a.i[7] < 1 || a.i[8] < 1)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: the input size i[7], i[8] must be >= 1, got (%lld, %lld)", N(op), L(a.i[7]),
         L(a.i[8]));
  if (dy[1] != w[0])
    fail(CTN_ERR_SHAPE, "%s: dy channels %lld do not match weight %s", N(op), L(dy[1]), shape_str(w).c_str());
  Shape x;
  x.ndim = 4;
  x[0] = dy[0], x[1] = mul(op, w[1], c.groups), x[2] = a.i[7], x[3] = a.i[8];
  Shape y = conv_forward_shape(op, x, w, c, "dx");
  if (y != dy)
    fail(CTN_ERR_SHAPE, "%s: dy %s does not match the output %s of a convolution of %s with weight %s, %s", N(op),
         shape_str(dy).c_str(), shape_str(y).c_str(), shape_str(x).c_str(), shape_str(w).c_str(), conv_str(c).c_str());
  a.ni = 9;
  return ValueInfo{in[0].dtype, x};
}

// (x, dy); i[7], i[8] = KH, KW -> dw [O, C/groups, KH, KW].
ValueInfo infer_conv2d_grad_weight(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1});
  need_rank(op, in[0], 4, "the input", "[N, C, H, W]");
  need_rank(op, in[1], 4, "dy", "[N, O, Ho, Wo]");
  Conv c = conv_attrs(op, a);
  const Shape &x = in[0].shape, &dy = in[1].shape;
  if (a.i[7] < 1 || a.i[8] < 1)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: the kernel size i[7], i[8] must be >= 1, got (%lld, %lld)", N(op), L(a.i[7]),
         L(a.i[8]));
  if (x[0] != dy[0])
    fail(CTN_ERR_SHAPE, "%s: batch sizes differ: %s", N(op), values_str(in, n).c_str());
  if (x[1] % c.groups != 0 || dy[1] % c.groups != 0)
    fail(CTN_ERR_SHAPE, "%s: groups %lld must divide the channels of input %s and dy %s", N(op), L(c.groups),
         shape_str(x).c_str(), shape_str(dy).c_str());
  Shape w;
  w.ndim = 4;
  w[0] = dy[1], w[1] = x[1] / c.groups, w[2] = a.i[7], w[3] = a.i[8];
  Shape y = conv_forward_shape(op, x, w, c, "input");
  if (y != dy)
    fail(CTN_ERR_SHAPE, "%s: dy %s does not match the output %s of a convolution of %s with a %s weight, %s", N(op),
         shape_str(dy).c_str(), shape_str(y).c_str(), shape_str(x).c_str(), shape_str(w).c_str(), conv_str(c).c_str());
  a.ni = 9;
  return ValueInfo{in[0].dtype, w};
}

// (x [N,C,H,W], w [C,O/g,KH,KW]); i[7], i[8] = output padding.
ValueInfo infer_conv_transpose2d(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1});
  need_rank(op, in[0], 4, "the input", "[N, C, H, W]");
  need_rank(op, in[1], 4, "the weight", "[C, O/groups, KH, KW]");
  Conv c = conv_attrs(op, a);
  const Shape &x = in[0].shape, &w = in[1].shape;
  int64_t oph = a.i[7], opw = a.i[8];
  // Output padding below the stride keeps the op the exact adjoint of conv2d (the gradient
  // convolutions then give back the input size).
  if (oph < 0 || opw < 0 || oph >= c.sh || opw >= c.sw)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: output padding (%lld, %lld) must be >= 0 and smaller than the stride (%s)",
         N(op), L(oph), L(opw), conv_str(c).c_str());
  if (w[0] != x[1])
    fail(CTN_ERR_SHAPE, "%s: input channels %lld do not match weight %s (its dim 0)", N(op), L(x[1]),
         shape_str(w).c_str());
  if (x[1] % c.groups != 0)
    fail(CTN_ERR_SHAPE, "%s: groups %lld must divide the input channels of %s", N(op), L(c.groups),
         shape_str(x).c_str());
  if (w[2] < 1 || w[3] < 1) fail(CTN_ERR_SHAPE, "%s: weight %s has an empty kernel", N(op), shape_str(w).c_str());
  // (x - 1) s - 2 p + d (k - 1) + op + 1, checked
  int64_t ho = add(op, add(op, mul(op, x[2] - 1, c.sh), mul(op, c.dh, w[2] - 1)), oph + 1) - mul(op, 2, c.ph);
  int64_t wo = add(op, add(op, mul(op, x[3] - 1, c.sw), mul(op, c.dw, w[3] - 1)), opw + 1) - mul(op, 2, c.pw);
  if (ho < 1 || wo < 1)
    fail(CTN_ERR_SHAPE, "%s: the output of %s with weight %s and %s would be empty", N(op), shape_str(x).c_str(),
         shape_str(w).c_str(), conv_str(c).c_str());
  a.ni = 9;
  Shape r;
  r.ndim = 4;
  r[0] = x[0], r[1] = mul(op, w[1], c.groups), r[2] = ho, r[3] = wo;
  return ValueInfo{in[0].dtype, r};
}

// ---- pooling ----------------------------------------------------------------------------------

// Normalises slots 0..5 and returns the pooled shape of x.
Shape pool_shape(const OpDef &op, const Shape &x, ctn_attrs &a) {
  int64_t kh = a.i[0], kw = a.i[1];
  if (kh < 1 || kw < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: kernel must be >= 1, got (%lld, %lld)", N(op), L(kh), L(kw));
  if (a.i[2] == 0) a.i[2] = kh;
  if (a.i[3] == 0) a.i[3] = kw;
  int64_t sh = a.i[2], sw = a.i[3], ph = a.i[4], pw = a.i[5];
  if (sh < 1 || sw < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: stride must be >= 1, got (%lld, %lld)", N(op), L(sh), L(sw));
  if (ph < 0 || pw < 0 || ph > kh / 2 || pw > kw / 2)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: padding (%lld, %lld) must be >= 0 and at most half the kernel (%lld, %lld)",
         N(op), L(ph), L(pw), L(kh), L(kw));
  const int64_t hp = add(op, x[2], 2 * ph), wp = add(op, x[3], 2 * pw);  // 2 ph <= kh: no overflow
  if (hp < kh || wp < kw)
    fail(CTN_ERR_SHAPE, "%s: kernel (%lld, %lld) does not fit input %s with padding (%lld, %lld)", N(op), L(kh), L(kw),
         shape_str(x).c_str(), L(ph), L(pw));
  Shape r = x;
  r[2] = (hp - kh) / sh + 1;
  r[3] = (wp - kw) / sw + 1;
  return r;
}

// A forward pool's checks and output for x in the layout of slot k (since 1.7; normalised as
// the convolutions' is).
ValueInfo pool_forward(const OpDef &op, const ValueInfo *in, ctn_attrs &a, uint32_t k) {
  const int64_t layout = conv_layout(op, a, k);
  need_float(op, in[0], "the input");
  need_rank(op, in[0], 4, "the input", layout ? "[N, H, W, C]" : "[N, C, H, W]");
  const Shape x = layout ? swap_channels(in[0].shape, true) : in[0].shape;
  const Shape r = pool_shape(op, x, a);
  set_layout(a, k, layout);
  return ValueInfo{in[0].dtype, layout ? swap_channels(r, false) : r};
}

// (x); pool attrs + i[6] layout (since 1.7).
ValueInfo infer_max_pool2d(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  return pool_forward(op, in, a, 6);
}

// (x, y, dy) -> dx.
ValueInfo infer_max_pool2d_grad(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1, 2});
  need_rank(op, in[0], 4, "the input", "[N, C, H, W]");
  Shape r = pool_shape(op, in[0].shape, a);
  if (in[1].shape != r || in[2].shape != r)
    fail(CTN_ERR_SHAPE, "%s: y and dy must be the pooled shape %s: %s", N(op), shape_str(r).c_str(),
         values_str(in, n).c_str());
  a.ni = 6;
  return in[0];
}

// (x); pool attrs + i[6] count_include_pad, i[7] layout (since 1.7).
ValueInfo infer_avg_pool2d(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  ValueInfo r = pool_forward(op, in, a, 7);
  a.i[6] = a.i[6] != 0;
  return r;
}

// (dy); i[7], i[8] = H, W -> dx.
ValueInfo infer_avg_pool2d_grad(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  need_float(op, in[0], "dy");
  need_rank(op, in[0], 4, "dy", "[N, C, Ho, Wo]");
  if (a.i[7] < 1 || a.i[8] < 1)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: the input size i[7], i[8] must be >= 1, got (%lld, %lld)", N(op), L(a.i[7]),
         L(a.i[8]));
  Shape x = in[0].shape;
  x[2] = a.i[7], x[3] = a.i[8];
  Shape r = pool_shape(op, x, a);
  if (r != in[0].shape)
    fail(CTN_ERR_SHAPE, "%s: dy %s does not match the pooled shape %s of input %s", N(op),
         shape_str(in[0].shape).c_str(), shape_str(r).c_str(), shape_str(x).c_str());
  a.i[6] = a.i[6] != 0;
  a.ni = 9;
  return ValueInfo{in[0].dtype, x};
}

// ---- normalisation ----------------------------------------------------------------------------

void eps_attr(const OpDef &op, ctn_attrs &a) {
  if (!(a.f[0] >= 0)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: eps must be >= 0, got %g", N(op), a.f[0]);
  a.nf = 1;
}

// x [N, C, ...] with N * spatial > 0 elements per channel.
void bn_input(const OpDef &op, const ValueInfo &x) {
  if (x.shape.ndim < 2)
    fail(CTN_ERR_SHAPE, "%s: the input must be at least 2-d [N, C, ...], got %s", N(op), shape_str(x.shape).c_str());
  if (x.shape[1] > 0 && x.shape.numel() == 0)
    fail(CTN_ERR_SHAPE, "%s: the input %s has no element per channel to take statistics over", N(op),
         shape_str(x.shape).c_str());
}

void per_channel(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t k, const char *which) {
  const ValueInfo &v = in[k];
  if (v.shape.ndim != 1 || v.shape[0] != in[0].shape[1])
    fail(CTN_ERR_SHAPE, "%s: %s must be [C] with C = %lld: %s", N(op), which, L(in[0].shape[1]),
         values_str(in, n).c_str());
}

ValueInfo infer_batch_norm(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1, 2});
  bn_input(op, in[0]);
  per_channel(op, in, n, 1, "gamma");
  per_channel(op, in, n, 2, "beta");
  eps_attr(op, a);
  a.ni = 0;
  return in[0];
}

ValueInfo infer_batch_norm_inference(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1, 2, 3, 4});
  if (in[0].shape.ndim < 2)
    fail(CTN_ERR_SHAPE, "%s: the input must be at least 2-d [N, C, ...], got %s", N(op), shape_str(in[0].shape).c_str());
  per_channel(op, in, n, 1, "gamma");
  per_channel(op, in, n, 2, "beta");
  per_channel(op, in, n, 3, "running_mean");
  per_channel(op, in, n, 4, "running_var");
  eps_attr(op, a);
  a.ni = 0;
  return in[0];
}

// (x) -> [2, C]: the per-channel mean (row 0) and biased variance (row 1).
ValueInfo infer_batch_norm_stats(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  need_float(op, in[0], "the input");
  bn_input(op, in[0]);
  a.ni = 0;
  a.nf = 0;
  Shape r;
  r.ndim = 2;
  r[0] = 2, r[1] = in[0].shape[1];
  return ValueInfo{in[0].dtype, r};
}

// (x, gamma, dy) -> dx
ValueInfo infer_batch_norm_grad_input(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1, 2});
  bn_input(op, in[0]);
  per_channel(op, in, n, 1, "gamma");
  if (in[2].shape != in[0].shape) fail(CTN_ERR_SHAPE, "%s: dy must have the input's shape: %s", N(op), values_str(in, n).c_str());
  eps_attr(op, a);
  a.ni = 0;
  return in[0];
}

// (x, dy) -> dgamma [C]
ValueInfo infer_batch_norm_grad_gamma(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1});
  bn_input(op, in[0]);
  if (in[1].shape != in[0].shape) fail(CTN_ERR_SHAPE, "%s: dy must have the input's shape: %s", N(op), values_str(in, n).c_str());
  eps_attr(op, a);
  a.ni = 0;
  Shape c;
  c.ndim = 1;
  c[0] = in[0].shape[1];
  return ValueInfo{in[0].dtype, c};
}

// Normalises the first normalised axis; returns the shape of the normalised axes.
Shape ln_axes(const OpDef &op, const ValueInfo &x, ctn_attrs &a) {
  if (x.shape.ndim == 0) fail(CTN_ERR_SHAPE, "%s: the input must be at least 1-d", N(op));
  int32_t ax = normalize_axis(N(op), a.i[0], x.shape.ndim);
  a.i[0] = ax;
  a.ni = 1;
  Shape s;
  for (uint32_t k = static_cast<uint32_t>(ax); k < x.shape.ndim; ++k) s[s.ndim++] = x.shape[k];
  if (s.numel() == 0) fail(CTN_ERR_SHAPE, "%s: the normalised axes of %s are empty", N(op), shape_str(x.shape).c_str());
  return s;
}

void ln_param(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t k, const Shape &want, const char *which) {
  if (in[k].shape != want)
    fail(CTN_ERR_SHAPE, "%s: %s must have the shape %s of the normalised axes: %s", N(op), which,
         shape_str(want).c_str(), values_str(in, n).c_str());
}

ValueInfo infer_layer_norm(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1, 2});
  Shape s = ln_axes(op, in[0], a);
  ln_param(op, in, n, 1, s, "gamma");
  ln_param(op, in, n, 2, s, "beta");
  eps_attr(op, a);
  return in[0];
}

ValueInfo infer_layer_norm_grad_input(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1, 2});
  Shape s = ln_axes(op, in[0], a);
  ln_param(op, in, n, 1, s, "gamma");
  if (in[2].shape != in[0].shape) fail(CTN_ERR_SHAPE, "%s: dy must have the input's shape: %s", N(op), values_str(in, n).c_str());
  eps_attr(op, a);
  return in[0];
}

ValueInfo infer_layer_norm_grad_gamma(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  same_float(op, in, n, {1});
  Shape s = ln_axes(op, in[0], a);
  if (in[1].shape != in[0].shape) fail(CTN_ERR_SHAPE, "%s: dy must have the input's shape: %s", N(op), values_str(in, n).c_str());
  eps_attr(op, a);
  return ValueInfo{in[0].dtype, s};
}

// ---- dropout, embedding ----------------------------------------------------------------------

ValueInfo infer_dropout(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  need_float(op, in[0], "the input");
  if (in[1].dtype != CTN_I64 || in[1].shape.numel() != 1)
    fail(CTN_ERR_DTYPE, "%s: step must be a one-element i64 value: %s", N(op), values_str(in, n).c_str());
  if (!(a.f[0] >= 0 && a.f[0] < 1)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: p must be in [0, 1), got %g", N(op), a.f[0]);
  a.ni = 1;
  a.nf = 1;
  return in[0];
}

void need_ids(const OpDef &op, const ValueInfo *in, uint32_t n, uint32_t k) {
  if (in[k].dtype != CTN_I32 && in[k].dtype != CTN_I64)
    fail(CTN_ERR_DTYPE, "%s: ids must be i32 or i64: %s", N(op), values_str(in, n).c_str());
  if (in[k].shape.ndim + 1 > CTN_MAX_DIMS)
    fail(CTN_ERR_SHAPE, "%s: ids %s have too many dims for a [..., D] result", N(op), shape_str(in[k].shape).c_str());
}

ValueInfo infer_embedding(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  need_float(op, in[0], "the table");
  need_rank(op, in[0], 2, "the table", "[V, D]");
  need_ids(op, in, n, 1);
  a.ni = 0;
  ValueInfo r{in[0].dtype, in[1].shape};
  r.shape[r.shape.ndim++] = in[0].shape[1];
  return r;
}

// (ids, dy); i[0] = V -> [V, D]
ValueInfo infer_embedding_grad(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &a) {
  need_ids(op, in, n, 0);
  need_float(op, in[1], "dy");
  const Shape &ids = in[0].shape, &dy = in[1].shape;
  bool ok = dy.ndim == ids.ndim + 1;
  for (uint32_t k = 0; ok && k < ids.ndim; ++k) ok = dy[k] == ids[k];
  if (!ok) fail(CTN_ERR_SHAPE, "%s: dy must be [..., D] over the ids' shape: %s", N(op), values_str(in, n).c_str());
  if (a.i[0] < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: the vocabulary size i[0] must be >= 1, got %lld", N(op), L(a.i[0]));
  a.ni = 1;
  Shape r;
  r.ndim = 2;
  r[0] = a.i[0], r[1] = dy[dy.ndim - 1];
  return ValueInfo{in[1].dtype, r};
}

using namespace rules;

#define CONV_ATTRS "i[0..1] stride, i[2..3] padding, i[4..5] dilation, i[6] groups"
#define POOL_ATTRS "i[0..1] kernel, i[2..3] stride, i[4..5] padding"

const OpDef kNnOps[] = {
    OpDef{.name = CTN_OP_CONV2D, .n_inputs = 2, .infer = infer_conv2d, .grad = conv2d, .attributes = CONV_ATTRS ", i[7] layout (0 NCHW, 1 NHWC; since 1.7)", .tangent = rules::bilinear_jvp, .probe = {.inputs = "D[1,1,4,4] D[1,1,3,3]", .ints = {1, 1, 0, 0, 1, 1, 1}, .ni = 7}},
    // Fusion-only (compile/rewrite.cpp): no gradient, emitted only where the backend offers it.
    OpDef{.name = CTN_OP_CONV2D_BIAS_ACT, .n_inputs = 3, .infer = infer_conv2d_bias_act, .attributes = CONV_ATTRS ", i[7] activation (CTN_ACT_NONE..CTN_ACT_HARDSWISH), f[0..1] clamp bounds, i[8] layout (0 NCHW, 1 NHWC; since 1.7)", .probe = {.inputs = "D[1,2,4,4] D[2,2,3,3] D[2]", .ints = {1, 1, 0, 0, 1, 1, 1, CTN_ACT_CLAMP}, .ni = 8, .floats = {0, 6}, .nf = 2}},
    OpDef{.name = CTN_OP_CONV2D_BIAS_ADD_ACT, .n_inputs = 4, .infer = infer_conv2d_bias_add_act, .attributes = CONV_ATTRS ", i[7] activation (CTN_ACT_NONE..CTN_ACT_HARDSWISH), f[0..1] clamp bounds, i[8] layout (0 NCHW, 1 NHWC; since 1.7)", .probe = {.inputs = "D[1,2,4,4] D[2,2,3,3] D[2] D[1,2,2,2]", .ints = {1, 1, 0, 0, 1, 1, 1, CTN_ACT_RELU}, .ni = 8}},
    OpDef{.name = CTN_OP_CONV2D_GRAD_INPUT, .n_inputs = 2, .infer = infer_conv2d_grad_input, .grad = conv2d_grad_input, .attributes = CONV_ATTRS ", i[7..8] input H, W", .probe = {.inputs = "D[1,1,2,2] D[1,1,3,3]", .ints = {1, 1, 0, 0, 1, 1, 1, 4, 4}, .ni = 9}},
    OpDef{.name = CTN_OP_CONV2D_GRAD_WEIGHT, .n_inputs = 2, .infer = infer_conv2d_grad_weight, .grad = conv2d_grad_weight, .attributes = CONV_ATTRS ", i[7..8] KH, KW", .probe = {.inputs = "D[1,1,4,4] D[1,1,2,2]", .ints = {1, 1, 0, 0, 1, 1, 1, 3, 3}, .ni = 9}},
    OpDef{.name = CTN_OP_CONV_TRANSPOSE2D, .n_inputs = 2, .infer = infer_conv_transpose2d, .grad = conv_transpose2d, .attributes = CONV_ATTRS ", i[7..8] output padding", .tangent = rules::bilinear_jvp, .probe = {.inputs = "D[1,1,2,2] D[1,1,3,3]", .ints = {1, 1, 0, 0, 1, 1, 1, 0, 0}, .ni = 9}},
    OpDef{.name = CTN_OP_MAX_POOL2D, .n_inputs = 1, .infer = infer_max_pool2d, .grad = max_pool2d, .attributes = POOL_ATTRS ", i[6] layout (0 NCHW, 1 NHWC; since 1.7)", .probe = {.inputs = "D[1,1,4,4]", .ints = {2, 2, 2, 2, 0, 0}, .ni = 6}},
    OpDef{.name = CTN_OP_MAX_POOL2D_GRAD, .n_inputs = 3, .infer = infer_max_pool2d_grad, .attributes = POOL_ATTRS, .probe = {.inputs = "D[1,1,4,4] D[1,1,2,2] D[1,1,2,2]", .ints = {2, 2, 2, 2, 0, 0}, .ni = 6}},
    OpDef{.name = CTN_OP_AVG_POOL2D, .n_inputs = 1, .infer = infer_avg_pool2d, .grad = avg_pool2d, .attributes = POOL_ATTRS ", i[6] count_include_pad, i[7] layout (0 NCHW, 1 NHWC; since 1.7)", .tangent = rules::linear_jvp, .probe = {.inputs = "D[1,1,4,4]", .ints = {2, 2, 2, 2, 0, 0, 0}, .ni = 7}},
    OpDef{.name = CTN_OP_AVG_POOL2D_GRAD, .n_inputs = 1, .infer = infer_avg_pool2d_grad, .grad = avg_pool2d_grad, .attributes = POOL_ATTRS ", i[6] count_include_pad, i[7..8] H, W", .probe = {.inputs = "D[1,1,2,2]", .ints = {2, 2, 2, 2, 0, 0, 0, 4, 4}, .ni = 9}},
    OpDef{.name = CTN_OP_BATCH_NORM, .n_inputs = 3, .infer = infer_batch_norm, .grad = batch_norm, .attributes = "f[0] eps", .tangent = rules::batch_norm_jvp, .probe = {.inputs = "D[2,3,2,2] D[3] D[3]", .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_BATCH_NORM_GRAD_INPUT, .n_inputs = 3, .infer = infer_batch_norm_grad_input, .attributes = "f[0] eps", .probe = {.inputs = "D[2,3,2,2] D[3] D[2,3,2,2]", .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_BATCH_NORM_GRAD_GAMMA, .n_inputs = 2, .infer = infer_batch_norm_grad_gamma, .attributes = "f[0] eps", .probe = {.inputs = "D[2,3,2,2] D[2,3,2,2]", .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_BATCH_NORM_RELU, .n_inputs = 3, .infer = infer_batch_norm, .attributes = "f[0] eps", .probe = {.inputs = "D[2,3,2,2] D[3] D[3]", .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_BATCH_NORM_STATS, .n_inputs = 1, .infer = infer_batch_norm_stats, .probe = {.inputs = "D[2,3,2,2]"}},
    OpDef{.name = CTN_OP_BATCH_NORM_INFERENCE, .n_inputs = 5, .infer = infer_batch_norm_inference, .grad = batch_norm_inference, .attributes = "f[0] eps", .probe = {.inputs = "D[2,3,2,2] D[3] D[3] D[3] D[3]", .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_LAYER_NORM, .n_inputs = 3, .infer = infer_layer_norm, .grad = layer_norm, .attributes = "i[0] first axis, f[0] eps", .probe = {.inputs = "D[2,3] D[3] D[3]", .ints = {1}, .ni = 1, .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_LAYER_NORM_GRAD_INPUT, .n_inputs = 3, .infer = infer_layer_norm_grad_input, .attributes = "i[0] first axis, f[0] eps", .probe = {.inputs = "D[2,3] D[3] D[2,3]", .ints = {1}, .ni = 1, .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_LAYER_NORM_GRAD_GAMMA, .n_inputs = 2, .infer = infer_layer_norm_grad_gamma, .attributes = "i[0] first axis, f[0] eps", .probe = {.inputs = "D[2,3] D[2,3]", .ints = {1}, .ni = 1, .floats = {1e-5}, .nf = 1}},
    OpDef{.name = CTN_OP_DROPOUT, .n_inputs = 2, .infer = infer_dropout, .grad = dropout, .flags = OP_NO_FOLD, .attributes = "f[0] p, i[0] seed", .tangent = rules::self_adjoint_jvp, .probe = {.inputs = "D[2,3] i64[]", .ints = {7}, .ni = 1, .floats = {0.5}, .nf = 1}},
    OpDef{.name = CTN_OP_EMBEDDING, .n_inputs = 2, .infer = infer_embedding, .grad = embedding, .tangent = rules::embedding_jvp, .probe = {.inputs = "D[4,3] i64[2]"}},
    OpDef{.name = CTN_OP_EMBEDDING_GRAD, .n_inputs = 2, .infer = infer_embedding_grad, .grad = embedding_grad, .attributes = "i[0] rows V", .probe = {.inputs = "i64[2] D[2,3]", .ints = {4}, .ni = 1}},
};

}  // namespace

OpTable nn_op_table() { return {kNnOps, sizeof kNnOps / sizeof kNnOps[0]}; }

}  // namespace ctn
