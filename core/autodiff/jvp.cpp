// Forward-mode autodiff (ctn_jvp): tangents propagated in creation order (a topological order)
// from the inputs to the outputs, one tangent rule per op, emitted as ordinary graph nodes so
// the result compiles, plans and runs like any graph (and composes with ctn_grad: a JVP of
// gradients is a Hessian-vector product).
//
// Where a rule comes from:
//  - Ops whose Jacobian is symmetric (elementwise unary ops: a diagonal Jacobian; softmax;
//    dropout; batch norm's per-channel block in x) reuse the reverse rule: J v = J^T v, so the
//    VJP rule applied to the tangent is exact.
//  - Linear ops (add, sub, reshape, permute, slice, concat, broadcast_to, sum, mean, cast, where
//    in its value inputs, avg pooling, embedding in its table) apply themselves to the tangents.
//  - Bilinear ops (mul, matmul, conv2d, conv_transpose2d) use the product rule.
//  - Ops with one output element (cross_entropy) take <VJP(1), v>.
//  - div, pow, maximum/minimum, log_softmax, max (reduction), batch_norm's gamma/beta have their
//    own formula, with ties broken as the reverse rules break them, so <J v, w> = <v, J^T w>.
//  - Op-library ops: the library's own rule (ctn_op_def.jvp_ex), its result checked.
// Any other op (max pooling, layer norm, the *_grad ops, optimizer steps, library ops without one) fails
// with CTN_ERR_UNSUPPORTED naming it.
#include "graph/graph.h"
#include "plugin/context.h"
#include "util/status.h"

#include <chutney/ops.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace ctn {

namespace {

ctn_node zeros_like(Graph &g, ctn_node v) { return g.add_constant(Tensor::empty(g.info(v).dtype, g.info(v).shape)); }

ctn_node bcast(Graph &g, ctn_node v, const Shape &s) {
  if (g.info(v).shape == s) return v;
  ctn_attrs a{};
  for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
  return g.op1(CTN_OP_BROADCAST_TO, v, &a);
}

// The sum of every element, as a node of shape `s` (one element).
ctn_node sum_all(Graph &g, ctn_node v, const Shape &s) {
  const uint32_t nd = g.info(v).shape.ndim;
  ctn_node r = v;
  if (nd) {
    ctn_attrs a{};
    a.i[a.ni++] = static_cast<int64_t>((nd >= 64 ? ~0ull : (1ull << nd) - 1));
    a.i[a.ni++] = 0;
    r = g.op1(CTN_OP_SUM, v, &a);
  }
  if (g.info(r).shape == s) return r;
  ctn_attrs a{};
  for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
  return g.op1(CTN_OP_RESHAPE, r, &a);
}

ctn_node add_t(Graph &g, ctn_node a, ctn_node b) {
  if (a == CTN_NODE_NONE) return b;
  if (b == CTN_NODE_NONE) return a;
  return g.op2(CTN_OP_ADD, a, b);
}

bool is(const OpDef &op, const char *name) { return !op.lib && op.name == name; }  // built-ins only

// The tangent of `node` given its inputs' tangents (CTN_NODE_NONE: zero). Returns CTN_NODE_NONE
// when the tangent is zero.
ctn_node tangent(Graph &g, ctn_node node, const std::vector<ctn_node> &t) {
  const Node f = g.node(node);  // a copy: rules append nodes
  const OpDef &op = *f.op;
  const size_t k = f.inputs.size();
  const ValueInfo out = f.info;
  auto in = [&](size_t i) { return f.inputs[i]; };
  auto tz = [&](size_t i) { return t[i] != CTN_NODE_NONE ? t[i] : zeros_like(g, in(i)); };
  auto unsupported = [&]() -> ctn_node {
    if (op.ext)
      fail(CTN_ERR_UNSUPPORTED, "ctn_jvp: op %s comes from op library \"%s\", which supplies no tangent rule "
           "(ctn_op_def.jvp_ex, oplib.h)", op.name.c_str(), op.lib ? op.lib->name.c_str() : "?");
    fail(CTN_ERR_UNSUPPORTED, "ctn_jvp: op %s has no tangent rule (the ops forward mode covers: chutney.h, "
         "ctn_jvp)", op.name.c_str());
    return CTN_NODE_NONE;
  };
  if (op.ext) {  // the library's own rule (ctn_op_def.jvp_ex), checked like its gradient rule
    const auto &x = static_cast<const ExtOpDef &>(op);
    if (!x.decl.jvp_ex) return unsupported();
    ctn_node r = CTN_NODE_NONE;
    take_plugin_error();
    ctn_status s;
    try {
      OpLibCallScope scope(x.lib);  // its graph_op calls name ops as the library's program would
      s = x.decl.jvp_ex(host_api(), x.declared, x.decl.user_data, static_cast<ctn_graph *>(&g),
                        static_cast<uint32_t>(k), f.inputs.data(), node, t.data(), &f.attrs, &r);
    } catch (...) {
      fail(CTN_ERR_PLUGIN, "tangent rule of %s (op library %s) threw", op.name.c_str(), op.lib->name.c_str());
    }
    if (s != CTN_OK) {
      std::string m = take_plugin_error();
      fail(s, "tangent rule of %s: %s", op.name.c_str(), m.empty() ? status_name(s) : m.c_str());
    }
    if (r == CTN_NODE_NONE) return r;
    g.check(r, op.name.c_str());
    if (g.info(r).shape != out.shape || g.info(r).dtype != out.dtype)
      fail(CTN_ERR_SHAPE, "tangent rule of %s returned %s%s for an output of %s%s", op.name.c_str(),
           dtype_name(g.info(r).dtype), shape_str(g.info(r).shape).c_str(), dtype_name(out.dtype),
           shape_str(out.shape).c_str());
    return r;
  }

  // Symmetric Jacobian in input 0 (the others carry no tangent): the reverse rule applied to it.
  static const char *const symmetric[] = {CTN_OP_NEG,  CTN_OP_EXP,        CTN_OP_LOG,   CTN_OP_SQRT,  CTN_OP_ABS,
                                          CTN_OP_TANH, CTN_OP_SIGMOID,    CTN_OP_RELU,  CTN_OP_GELU,  CTN_OP_LEAKY_RELU,
                                          CTN_OP_CLAMP, CTN_OP_COPY,      CTN_OP_SOFTMAX, CTN_OP_DROPOUT, CTN_OP_SIGN};
  for (const char *s : symmetric)
    if (is(op, s)) {
      for (size_t i = 1; i < k; ++i)
        if (t[i] != CTN_NODE_NONE) return unsupported();
      if (t[0] == CTN_NODE_NONE) return CTN_NODE_NONE;
      if (is(op, CTN_OP_SIGN)) return CTN_NODE_NONE;  // zero almost everywhere, as ctn_grad says
      bool nb[8] = {true, false, false, false, false, false, false, false};
      std::vector<ctn_node> dx(k, CTN_NODE_NONE);
      op.grad(g, node, t[0], nb, dx.data());
      return dx[0];
    }
  // Comparisons: zero.
  for (const char *s : {CTN_OP_EQ, CTN_OP_NE, CTN_OP_LT, CTN_OP_LE, CTN_OP_GT, CTN_OP_GE})
    if (is(op, s)) return CTN_NODE_NONE;

  if (is(op, CTN_OP_ADD)) return bcast(g, add_t(g, t[0], t[1]), out.shape);
  if (is(op, CTN_OP_SUB)) {
    if (t[1] == CTN_NODE_NONE) return bcast(g, t[0], out.shape);
    const ctn_node r = t[0] == CTN_NODE_NONE ? g.op1(CTN_OP_NEG, t[1]) : g.op2(CTN_OP_SUB, t[0], t[1]);
    return bcast(g, r, out.shape);
  }
  if (is(op, CTN_OP_MUL) || is(op, CTN_OP_MATMUL) || is(op, CTN_OP_CONV2D) || is(op, CTN_OP_CONV_TRANSPOSE2D)) {
    ctn_node r = CTN_NODE_NONE;
    if (t[0] != CTN_NODE_NONE) r = g.op2(op.name.c_str(), t[0], in(1), &f.attrs);
    if (t[1] != CTN_NODE_NONE) r = add_t(g, r, g.op2(op.name.c_str(), in(0), t[1], &f.attrs));
    return r == CTN_NODE_NONE ? r : bcast(g, r, out.shape);
  }
  if (is(op, CTN_OP_DIV)) {  // (ta - y tb) / b
    ctn_node num = t[0];
    if (t[1] != CTN_NODE_NONE) {
      ctn_node yt = g.op2(CTN_OP_MUL, node, t[1]);
      num = num == CTN_NODE_NONE ? g.op1(CTN_OP_NEG, yt) : g.op2(CTN_OP_SUB, num, yt);
    }
    return num == CTN_NODE_NONE ? num : bcast(g, g.op2(CTN_OP_DIV, num, in(1)), out.shape);
  }
  if (is(op, CTN_OP_POW)) {  // ta b a^(b-1) + tb y log(a)
    ctn_node r = CTN_NODE_NONE;
    if (t[0] != CTN_NODE_NONE) {
      ctn_node bm1 = g.op2(CTN_OP_SUB, in(1), g.add_scalar(g.info(in(1)).dtype, 1.0));
      r = g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, t[0], in(1)), g.op2(CTN_OP_POW, in(0), bm1));
    }
    if (t[1] != CTN_NODE_NONE)
      r = add_t(g, r, g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, t[1], node), g.op1(CTN_OP_LOG, in(0))));
    return r == CTN_NODE_NONE ? r : bcast(g, r, out.shape);
  }
  if (is(op, CTN_OP_MAXIMUM) || is(op, CTN_OP_MINIMUM)) {  // ties follow a, as the reverse rule
    if (t[0] == CTN_NODE_NONE && t[1] == CTN_NODE_NONE) return CTN_NODE_NONE;
    ctn_node mask = g.op2(is(op, CTN_OP_MAXIMUM) ? CTN_OP_GE : CTN_OP_LE, in(0), in(1));
    ctn_node w[3] = {mask, bcast(g, tz(0), out.shape), bcast(g, tz(1), out.shape)};
    return g.add_op(CTN_OP_WHERE, 3, w, nullptr);
  }
  if (is(op, CTN_OP_WHERE)) {
    if (t[1] == CTN_NODE_NONE && t[2] == CTN_NODE_NONE) return CTN_NODE_NONE;
    ctn_node w[3] = {in(0), tz(1), tz(2)};
    return bcast(g, g.add_op(CTN_OP_WHERE, 3, w, nullptr), out.shape);
  }
  // Linear in their (single differentiable) input 0: the op itself on the tangent.
  for (const char *s : {CTN_OP_RESHAPE, CTN_OP_PERMUTE, CTN_OP_SLICE, CTN_OP_BROADCAST_TO, CTN_OP_SUM, CTN_OP_MEAN,
                        CTN_OP_CAST, CTN_OP_AVG_POOL2D})
    if (is(op, s)) {
      if (t[0] == CTN_NODE_NONE) return CTN_NODE_NONE;
      if (is(op, CTN_OP_CAST) && !dtype_is_float(out.dtype)) return CTN_NODE_NONE;
      return g.add_op(op, 1, &t[0], f.attrs);
    }
  if (is(op, CTN_OP_CONCAT)) {
    bool any = false;
    std::vector<ctn_node> ins;
    for (size_t i = 0; i < k; ++i) {
      any = any || t[i] != CTN_NODE_NONE;
      ins.push_back(tz(i));
    }
    return any ? g.add_op(op, static_cast<uint32_t>(k), ins.data(), f.attrs) : CTN_NODE_NONE;
  }
  if (is(op, CTN_OP_EMBEDDING)) {  // linear in the table
    if (t[0] == CTN_NODE_NONE) return CTN_NODE_NONE;
    return g.op2(CTN_OP_EMBEDDING, t[0], in(1), &f.attrs);
  }
  if (is(op, CTN_OP_LOG_SOFTMAX)) {  // ta - sum(softmax * ta) along the axis
    if (t[0] == CTN_NODE_NONE) return CTN_NODE_NONE;
    const int64_t axis = f.attrs.i[0];
    ctn_attrs a = attrs_i({static_cast<int64_t>(1ull << axis), 1});
    ctn_node s = g.op1(CTN_OP_SUM, g.op2(CTN_OP_MUL, g.op1(CTN_OP_EXP, node), t[0]), &a);
    return g.op2(CTN_OP_SUB, t[0], s);
  }
  if (is(op, CTN_OP_MAX)) {  // every tied maximum shares equally, as the reverse rule
    if (t[0] == CTN_NODE_NONE) return CTN_NODE_NONE;
    const Shape &xs = g.info(in(0)).shape;
    const uint64_t mask_axes = static_cast<uint64_t>(f.attrs.i[0]);
    ctn_attrs ka{};
    for (uint32_t d = 0; d < xs.ndim; ++d) ka.i[ka.ni++] = ((mask_axes >> d) & 1) ? 1 : xs[d];
    ctn_node yk = g.op1(CTN_OP_RESHAPE, node, &ka);
    ctn_attrs ca = attrs_i({g.info(in(0)).dtype});
    ctn_node mask = g.op1(CTN_OP_CAST, g.op2(CTN_OP_EQ, in(0), yk), &ca);
    ctn_node num = g.op1(CTN_OP_SUM, g.op2(CTN_OP_MUL, mask, t[0]), &f.attrs);
    ctn_node cnt = g.op1(CTN_OP_SUM, mask, &f.attrs);
    return g.op2(CTN_OP_DIV, num, cnt);
  }
  if (is(op, CTN_OP_BATCH_NORM)) {
    // x: the per-channel Jacobian block is symmetric, so the reverse rule applies to tx; gamma
    // and beta: y = x_hat * gamma + beta per channel, x_hat = batch_norm(x, 1, 0).
    ctn_node r = CTN_NODE_NONE;
    if (t[0] != CTN_NODE_NONE) {
      ctn_node ins[3] = {in(0), in(1), t[0]};
      r = g.add_op(CTN_OP_BATCH_NORM_GRAD_INPUT, 3, ins, &f.attrs);
    }
    const Shape &xs = g.info(in(0)).shape;
    ctn_attrs ca{};  // [1, C, 1, ...]
    for (uint32_t d = 0; d < xs.ndim; ++d) ca.i[ca.ni++] = d == 1 ? xs[1] : 1;
    if (t[1] != CTN_NODE_NONE) {
      Tensor one = Tensor::empty(g.info(in(1)).dtype, g.info(in(1)).shape);
      ctn_node ones = g.op2(CTN_OP_ADD, g.add_constant(one), g.add_scalar(one.dtype, 1.0));
      ctn_node ins[3] = {in(0), ones, zeros_like(g, in(2))};
      ctn_node xhat = g.add_op(CTN_OP_BATCH_NORM, 3, ins, &f.attrs);
      r = add_t(g, r, g.op2(CTN_OP_MUL, xhat, g.op1(CTN_OP_RESHAPE, t[1], &ca)));
    }
    if (t[2] != CTN_NODE_NONE) r = add_t(g, r, bcast(g, g.op1(CTN_OP_RESHAPE, t[2], &ca), out.shape));
    return r;
  }
  // Backward ops, so that forward over reverse (Hessian-vector products) works.
  for (const char *s : {CTN_OP_RELU_GRAD, CTN_OP_LEAKY_RELU_GRAD, CTN_OP_CLAMP_GRAD})
    if (is(op, s)) {  // (x, dy): linear in dy; x only moves where it is not differentiable
      if (t[1] == CTN_NODE_NONE) return CTN_NODE_NONE;
      return g.op2(op.name.c_str(), in(0), t[1], &f.attrs);
    }
  if (is(op, CTN_OP_TANH_GRAD) || is(op, CTN_OP_SIGMOID_GRAD)) {
    // tanh: dy (1 - y^2) -> tdy (1 - y^2) - 2 y dy ty; sigmoid: dy y (1 - y) -> ... + dy (1 - 2y) ty
    ctn_node r = t[1] == CTN_NODE_NONE ? CTN_NODE_NONE : g.op2(op.name.c_str(), in(0), t[1], &f.attrs);
    if (t[0] != CTN_NODE_NONE) {
      const int32_t dt = g.info(in(0)).dtype;
      ctn_node d = is(op, CTN_OP_TANH_GRAD)
                       ? g.op2(CTN_OP_MUL, g.add_scalar(dt, -2.0), in(0))
                       : g.op2(CTN_OP_SUB, g.add_scalar(dt, 1.0), g.op2(CTN_OP_MUL, g.add_scalar(dt, 2.0), in(0)));
      r = add_t(g, r, g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, d, in(1)), t[0]));
    }
    return r == CTN_NODE_NONE ? r : bcast(g, r, out.shape);
  }
  if (is(op, CTN_OP_CROSS_ENTROPY_GRAD)) {
    // (logits [N, C], labels, dy) -> dy (softmax(logits) - onehot) / N: linear in dy; in the
    // logits, dy / N times softmax's (symmetric) Jacobian.
    ctn_node r = CTN_NODE_NONE;
    if (t[2] != CTN_NODE_NONE) {
      ctn_node w[3] = {in(0), in(1), t[2]};
      r = g.add_op(CTN_OP_CROSS_ENTROPY_GRAD, 3, w, &f.attrs);
    }
    if (t[0] != CTN_NODE_NONE) {
      const int32_t dt = g.info(in(0)).dtype;
      const int64_t nrows = g.info(in(0)).shape[0];
      ctn_attrs ax = attrs_i({1});
      ctn_node sm = g.op1(CTN_OP_SOFTMAX, in(0), &ax);
      ctn_node j = g.op2(CTN_OP_SOFTMAX_GRAD, sm, t[0], &ax);
      ctn_node scale = g.op2(CTN_OP_DIV, in(2), g.add_scalar(dt, static_cast<double>(nrows)));
      r = add_t(g, r, g.op2(CTN_OP_MUL, j, scale));
    }
    return r;
  }
  if (out.shape.numel() == 1 && op.grad && (is(op, CTN_OP_CROSS_ENTROPY))) {
    // One output element: the tangent is <VJP(1), v>, exact.
    bool any = false;
    bool need[8] = {};
    for (size_t i = 0; i < k && i < 8; ++i) {
      need[i] = t[i] != CTN_NODE_NONE && dtype_is_float(g.info(in(i)).dtype);
      any = any || need[i];
    }
    if (!any) return CTN_NODE_NONE;
    ctn_node seed = g.add_scalar(out.dtype, 1.0);
    seed = bcast(g, seed, out.shape);
    std::vector<ctn_node> dx(k, CTN_NODE_NONE);
    op.grad(g, node, seed, need, dx.data());
    ctn_node r = CTN_NODE_NONE;
    for (size_t i = 0; i < k; ++i)
      if (need[i] && dx[i] != CTN_NODE_NONE) r = add_t(g, r, sum_all(g, g.op2(CTN_OP_MUL, dx[i], t[i]), out.shape));
    return r;
  }
  return unsupported();
}

}  // namespace

void build_jvp(Graph &g, uint32_t n_out, const ctn_node *outs, uint32_t n_in, const ctn_node *ins,
               const ctn_node *tangents, ctn_node *out_tangents) {
  if (n_out && (!outs || !out_tangents)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_jvp: outputs or out_tangents is NULL");
  if (n_in && (!ins || !tangents)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_jvp: inputs or tangents is NULL");
  for (uint32_t i = 0; i < n_out; ++i) g.check(outs[i], "ctn_jvp");
  for (uint32_t i = 0; i < n_in; ++i) {
    g.check(ins[i], "ctn_jvp");
    g.check(tangents[i], "ctn_jvp");
    const ValueInfo &a = g.info(ins[i]), &b = g.info(tangents[i]);
    if (!dtype_is_float(a.dtype))
      fail(CTN_ERR_DTYPE, "ctn_jvp: input %u is %s; forward mode needs f32 or f64 inputs", i, dtype_name(a.dtype));
    if (a.dtype != b.dtype || a.shape != b.shape)
      fail(CTN_ERR_SHAPE, "ctn_jvp: tangent %u is %s%s, its input is %s%s", i, dtype_name(b.dtype),
           shape_str(b.shape).c_str(), dtype_name(a.dtype), shape_str(a.shape).c_str());
  }
  ctn_node last = 0;
  for (uint32_t i = 0; i < n_out; ++i) last = std::max(last, outs[i]);
  const size_t count = n_out ? static_cast<size_t>(last) + 1 : 0;
  std::vector<ctn_node> tan(count, CTN_NODE_NONE);
  for (uint32_t i = 0; i < n_in; ++i)
    if (ins[i] < count) tan[ins[i]] = add_t(g, tan[ins[i]], tangents[i]);
  // Only nodes that some output depends on.
  std::vector<char> live(count, 0);
  for (uint32_t i = 0; i < n_out; ++i) live[outs[i]] = 1;
  for (size_t v = count; v-- > 0;)
    if (live[v] && g.node(static_cast<ctn_node>(v)).kind == NodeKind::Op)
      for (ctn_node in : g.node(static_cast<ctn_node>(v)).inputs) live[in] = 1;
  std::vector<ctn_node> t;
  for (size_t v = 0; v < count; ++v) {
    const Node &nd = g.node(static_cast<ctn_node>(v));
    if (!live[v] || nd.kind != NodeKind::Op || tan[v] != CTN_NODE_NONE) continue;
    t.clear();
    bool any = false;
    for (ctn_node in : nd.inputs) {
      t.push_back(in < count ? tan[in] : CTN_NODE_NONE);
      any = any || t.back() != CTN_NODE_NONE;
    }
    if (!any) continue;
    tan[v] = tangent(g, static_cast<ctn_node>(v), t);
  }
  for (uint32_t i = 0; i < n_out; ++i) {
    ctn_node r = tan[outs[i]];
    if (r == CTN_NODE_NONE) r = zeros_like(g, outs[i]);
    out_tangents[i] = r;
  }
}

}  // namespace ctn
