// Compile stage rewrite (compile/compile.h): simplification, constant folding, fusion, and
// batch_norm_stats as graph ops for a backend without its kernel.
#include "compile/rewrite.h"

#include <chutney/ops.h>

#include "compile/compile.h"
#include "exec/eager.h"
#include "exec/select.h"
#include "plugin/context.h"
#include "util/status.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ctn {

ctn_node Rewriter::resolve(ctn_node n) {
  while (n < repl.size() && repl[n] != n) n = repl[n];
  return n;
}

void Rewriter::grow() {
  while (repl.size() < g.size()) repl.push_back(static_cast<ctn_node>(repl.size()));
}

void Rewriter::set(ctn_node from, ctn_node to) {
  grow();
  repl[from] = to;
}

void Rewriter::resolve_inputs(ctn_node v) {
  for (ctn_node &in : g.node(v).inputs) in = resolve(in);
}

void Rewriter::resolve_all(std::vector<ctn_node> &roots) {
  for (size_t v = 0; v < g.size(); ++v) resolve_inputs(static_cast<ctn_node>(v));
  for (ctn_node &r : roots) r = resolve(r);
}

bool is_op(const Graph &g, ctn_node n, const char *name) {
  const Node &nd = g.node(n);
  // Built-in ops only: a library op may share a built-in's name (op namespaces, docs/ABI.md).
  return nd.kind == NodeKind::Op && !nd.op->lib && nd.op->name == name;
}

namespace {

// A Constant whose every element equals v.
bool const_all(const Graph &g, ctn_node n, double v) {
  const Node &nd = g.node(n);
  if (nd.kind != NodeKind::Constant || !nd.value) return false;
  const Tensor &t = *nd.value;
  const int64_t cnt = t.numel();
  for (int64_t i = 0; i < cnt; ++i) {
    double x;
    if (!float_element(t.dtype, t.data(), i, &x) || x != v) return false;
  }
  return cnt > 0;
}

// Constant, or an op computed from constants only (will fold).
bool constlike(const Graph &g, ctn_node n, int depth = 0) {
  const Node &nd = g.node(n);
  if (nd.kind == NodeKind::Constant) return true;
  if (nd.kind != NodeKind::Op || depth > 16 || (nd.op->flags & OP_NO_FOLD)) return false;
  for (ctn_node in : nd.inputs)
    if (!constlike(g, in, depth + 1)) return false;
  return true;
}

// Returns the replacement of v, or v when nothing applies.
ctn_node simplify_node(Rewriter &rw, ctn_node v) {
  Graph &g = rw.g;
  const Node nd = g.node(v);  // copy: we may append nodes
  if (nd.op->lib) return v;   // the rules are about built-in ops, whatever a library op is called
  const std::string &name = nd.op->name;
  const ValueInfo out = nd.info;
  auto same = [&](ctn_node x) { return g.info(x).dtype == out.dtype && g.info(x).shape == out.shape; };
  if (nd.inputs.size() == 2) {
    ctn_node a = nd.inputs[0], b = nd.inputs[1];
    if (name == CTN_OP_MUL) {
      if (const_all(g, b, 1.0) && same(a)) return a;
      if (const_all(g, a, 1.0) && same(b)) return b;
    } else if (name == CTN_OP_ADD) {
      if (const_all(g, b, 0.0) && same(a)) return a;
      if (const_all(g, a, 0.0) && same(b)) return b;
    } else if (name == CTN_OP_SUB) {
      if (const_all(g, b, 0.0) && same(a)) return a;
    } else if (name == CTN_OP_DIV) {
      if (const_all(g, b, 1.0) && same(a)) return a;
    }
    // (x op c1) op c2  ->  x op (c1 op c2) for op in {mul, add}: the constants fold into one.
    if (name == CTN_OP_MUL || name == CTN_OP_ADD) {
      ctn_node c = constlike(g, b) ? b : constlike(g, a) ? a : CTN_NODE_NONE;
      ctn_node m = c == b ? a : b;
      if (c != CTN_NODE_NONE && !constlike(g, m) && is_op(g, m, name.c_str())) {
        const Node inner = g.node(m);
        ctn_node c1 = constlike(g, inner.inputs[1]) ? inner.inputs[1] : constlike(g, inner.inputs[0]) ? inner.inputs[0] : CTN_NODE_NONE;
        if (c1 != CTN_NODE_NONE) {
          ctn_node x = c1 == inner.inputs[1] ? inner.inputs[0] : inner.inputs[1];
          if (!constlike(g, x)) {
            ctn_node cc = g.op2(name.c_str(), c1, c);
            ctn_node r = g.op2(name.c_str(), x, cc);
            if (same(r)) return r;
          }
        }
      }
    }
  }
  if (name == CTN_OP_NEG && is_op(g, nd.inputs[0], CTN_OP_NEG)) {
    ctn_node x = g.node(nd.inputs[0]).inputs[0];
    if (same(x)) return x;
  }
  return v;
}

}  // namespace

void simplify_and_fold(Rewriter &rw, bool simplify, bool fold, Backend *fold_backend, PassStats &st) {
  Graph &g = rw.g;
  for (size_t vi = 0; vi < g.size(); ++vi) {
    ctn_node v = static_cast<ctn_node>(vi);
    rw.grow();
    rw.resolve_inputs(v);
    const Node &nd = g.node(v);
    if (nd.kind != NodeKind::Op) continue;
    if (fold && fold_backend && !(nd.op->flags & OP_NO_FOLD) && nd.info.shape.numel() <= (1 << 22)) {
      bool all = !nd.inputs.empty();
      for (ctn_node in : nd.inputs) all = all && g.node(in).kind == NodeKind::Constant;
      if (all) {
        std::vector<const Tensor *> ins;
        for (ctn_node in : nd.inputs) ins.push_back(g.node(in).value.get());
        try {
          Tensor t = eager_compute(*g.context(), *nd.op, nd.attrs, ins.data(), static_cast<uint32_t>(ins.size()),
                                   nd.info, fold_backend);
          ctn_node c = g.add_constant(t);
          rw.set(v, c);
          ++st.folded;
          continue;
        } catch (const Error &) {
          // Not foldable here (e.g. no host kernel); it simply runs in the plan.
        }
      }
    }
    if (simplify) {
      ctn_node r = simplify_node(rw, v);
      if (r != v) {
        rw.set(v, r);
        ++st.folded;
      }
    }
  }
}

std::vector<ctn_node> schedule(const Graph &g, const std::vector<ctn_node> &roots) {
  std::vector<char> state(g.size(), 0);  // 0 new, 1 on stack, 2 done
  std::vector<ctn_node> order;
  std::vector<std::pair<ctn_node, size_t>> stack;
  for (ctn_node r : roots) {
    if (state[r]) continue;
    stack.push_back({r, 0});
    state[r] = 1;
    while (!stack.empty()) {
      auto &[v, i] = stack.back();
      const Node &nd = g.node(v);
      if (i < nd.inputs.size()) {
        ctn_node in = nd.inputs[i++];
        if (!state[in]) {
          state[in] = 1;
          stack.push_back({in, 0});
        }
        continue;
      }
      state[v] = 2;
      order.push_back(v);
      stack.pop_back();
    }
  }
  return order;
}

// Whether backend b has a kernel for op over these operand and result descriptions.
bool offers(Backend &b, const OpDef &op, uint32_t n, const ctn_tensor_desc *in, const ctn_tensor_desc &od,
            const ctn_attrs &a) {
  ctn_kernel k;
  std::string why;
  if (!select_kernel(b, op, n, in, od, a, &k, &why)) return false;
  b.release(k);
  return true;
}

// The producers the fusion pass folds a bias and an activation into (and batch_norm -> relu into
// batch_norm_relu, try_bn_relu): matmul -> add(bias [N]) and
// conv2d -> add(bias [O,1,1] or [1,O,1,1]), each optionally followed by relu, gelu or (conv2d
// only) clamp, sigmoid, x * sigmoid(x) and hardswish (match_activation); the producer and the add
// must have no other consumer than the activation, and the backend must offer the fused op for
// the node's signature.
struct BiasFusion {
  const char *producer, *fused;
  bool conv_acts;      // the activations after CTN_ACT_GELU join too (clamp reads f[0], f[1])
  uint32_t act_slot;   // the fused op's activation attribute: i[act_slot]
};
const BiasFusion kBiasFusions[] = {{CTN_OP_MATMUL, CTN_OP_MATMUL_BIAS_ACT, false, 2},
                                   {CTN_OP_CONV2D, CTN_OP_CONV2D_BIAS_ACT, true, 7}};

// Whether `b` is the bias of producer value `p` for fusion f: matmul a vector over its last dim,
// conv2d one value per output channel ([O,1,1] or [1,O,1,1]).
bool is_bias(const Graph &g, const BiasFusion &f, ctn_node p, ctn_node b) {
  const ValueInfo &pi = g.info(p), &bi = g.info(b);
  if (bi.dtype != pi.dtype) return false;
  const ctn_attrs &pa = g.node(p).attrs;
  if (f.act_slot == 7 && pa.ni > 7 && pa.i[7] != 0) return false;  // a layout 1 (NHWC) conv2d: its channels are last
  if (f.act_slot == 2) return bi.shape.ndim == 1 && bi.shape[0] == pi.shape[pi.shape.ndim - 1];
  const uint32_t nd = bi.shape.ndim;
  return (nd == 3 || nd == 4) && bi.shape[nd - 3] == pi.shape[1] && bi.shape[nd - 2] == 1 && bi.shape[nd - 1] == 1 &&
         (nd == 3 || bi.shape[0] == 1);
}

// Whether constant n holds only values that round to v in its dtype (1/6 stored as f32).
bool const_near(const Graph &g, ctn_node n, double v) {
  const Node &nd = g.node(n);
  if (nd.kind != NodeKind::Constant || !nd.value || nd.value->numel() < 1) return false;
  for (int64_t i = 0; i < nd.value->numel(); ++i) {
    double x;
    if (!float_element(nd.value->dtype, nd.value->data(), i, &x) || !(std::fabs(x - v) <= 1e-6 * std::fabs(v)))
      return false;
  }
  return true;
}

// The other operand of binary node v when one of its operands is x (either side), else NONE.
ctn_node other_operand(const Graph &g, ctn_node v, ctn_node x) {
  const Node &nd = g.node(v);
  if (nd.inputs.size() != 2) return CTN_NODE_NONE;
  return nd.inputs[0] == x ? nd.inputs[1] : nd.inputs[1] == x ? nd.inputs[0] : CTN_NODE_NONE;
}

// Whether c is hardsigmoid(x) as ONNX HardSwish imports it: clamp(x * 1/6 + 1/2, 0, 1), every
// intermediate read only by the next.
bool is_hardsigmoid_of(const Graph &g, ctn_node c, ctn_node x, const std::vector<uint32_t> &consumers) {
  if (!is_op(g, c, CTN_OP_CLAMP) || g.node(c).attrs.f[0] != 0.0 || g.node(c).attrs.f[1] != 1.0) return false;
  const ctn_node y = g.node(c).inputs[0];
  if (!is_op(g, y, CTN_OP_ADD) || consumers[y] != 1) return false;
  for (ctn_node m : g.node(y).inputs) {
    const ctn_node half = other_operand(g, y, m);
    if (!is_op(g, m, CTN_OP_MUL) || consumers[m] != 1 || half == CTN_NODE_NONE || !const_near(g, half, 0.5)) continue;
    const ctn_node k = other_operand(g, m, x);
    if (k != CTN_NODE_NONE && const_near(g, k, 1.0 / 6)) return true;
  }
  return false;
}

// An activation the fusion can fold, ending at node v: its CTN_ACT_* code (-1: none), the value it
// reads (`pre`, the candidate bias add) and clamp's bounds. relu, gelu, clamp and sigmoid read pre
// alone; x * sigmoid(x) (SiLU, Swish with alpha 1) and x * hardsigmoid(x) (HardSwish) read it twice.
struct ActMatch {
  int act = -1;
  ctn_node pre = CTN_NODE_NONE;
  double lo = 0, hi = 0;
};
ActMatch match_activation(const Graph &g, ctn_node v, const std::vector<uint32_t> &consumers) {
  static const struct {
    const char *op;
    int act;
  } kUnary[] = {{CTN_OP_RELU, CTN_ACT_RELU}, {CTN_OP_GELU, CTN_ACT_GELU}, {CTN_OP_CLAMP, CTN_ACT_CLAMP},
                {CTN_OP_SIGMOID, CTN_ACT_SIGMOID}};
  const Node &nd = g.node(v);
  for (const auto &u : kUnary)
    if (is_op(g, v, u.op) && consumers[nd.inputs[0]] == 1) {
      const bool clamp = u.act == CTN_ACT_CLAMP;
      return {u.act, nd.inputs[0], clamp ? nd.attrs.f[0] : 0, clamp ? nd.attrs.f[1] : 0};
    }
  if (!is_op(g, v, CTN_OP_MUL)) return {};
  for (ctn_node x : nd.inputs) {
    const ctn_node s = other_operand(g, v, x);
    if (consumers[x] != 2 || consumers[s] != 1 || g.info(x).shape != nd.info.shape) continue;
    if (is_op(g, s, CTN_OP_SIGMOID) && g.node(s).inputs[0] == x) return {CTN_ACT_SILU, x, 0, 0};
    if (is_hardsigmoid_of(g, s, x, consumers)) return {CTN_ACT_HARDSWISH, x, 0, 0};
  }
  return {};
}

// The fusion pass's state over one graph: who reads each value, what has been fused.
struct BiasActFuser {
  Rewriter &rw;
  Graph &g;
  Backend *backend;
  PassStats &st;
  std::vector<uint32_t> consumers;
  std::vector<char> done;

  // Replaces `target` by fusion f of producer p with `bias` (and `residual`, conv only, unless
  // NONE) and activation act, when the backend offers the fused kernel.
  bool emit(const BiasFusion &f, ctn_node target, ctn_node p, ctn_node bias, ctn_node residual, int act, double lo,
            double hi) {
    const Node prod = g.node(p);
    ctn_attrs a = prod.attrs;
    a.i[f.act_slot] = act;
    a.ni = f.act_slot + 1;
    a.nf = act == CTN_ACT_CLAMP ? 2 : 0;
    a.f[0] = lo, a.f[1] = hi;
    const OpDef *fused = g.context()->find_core_op(residual == CTN_NODE_NONE ? f.fused : CTN_OP_CONV2D_BIAS_ADD_ACT);
    ValueInfo bias_info = g.info(bias);
    if (bias_info.shape.ndim != 1) bias_info.shape = Shape::from(1, &g.info(p).shape.d[1]);
    const uint32_t n = residual == CTN_NODE_NONE ? 3 : 4;
    ctn_tensor_desc in[4] = {make_desc(g.info(prod.inputs[0])), make_desc(g.info(prod.inputs[1])),
                             make_desc(bias_info), make_desc(g.info(n == 4 ? residual : bias))};
    if (!offers(*backend, *fused, n, in, make_desc(g.info(target)), a)) return false;
    if (g.info(bias).shape.ndim != 1) {
      const OpDef *reshape = g.context()->find_core_op(CTN_OP_RESHAPE);
      bias = g.add_op(*reshape, 1, &bias, attrs_i({bias_info.shape[0]}));
    }
    ctn_node ins[4] = {prod.inputs[0], prod.inputs[1], bias, residual};
    rw.set(target, g.add_op(*fused, n, ins, a));
    done.resize(g.size(), 0);
    done[p] = 1;
    st.fused += (act == CTN_ACT_NONE ? 1 : 2) + (n == 4 ? 1 : 0);
    return true;
  }

  // add = producer + bias: fuse it (and the activation ending at target) when it matches. With
  // `residual` (conv only), add is the conv's bias add and the residual add ends before target.
  bool try_fuse(ctn_node target, ctn_node add, ctn_node residual, int act, double lo, double hi) {
    if (!is_op(g, add, CTN_OP_ADD) || done[add]) return false;
    // The codes and op of 1.6 are never shown to a backend built against an older header (ops.h).
    if ((act >= CTN_ACT_SIGMOID || residual != CTN_NODE_NONE) && backend->abi_minor < 6) return false;
    for (const BiasFusion &f : kBiasFusions) {
      if ((act > CTN_ACT_GELU || residual != CTN_NODE_NONE) && !f.conv_acts) continue;
      for (int side = 0; side < 2; ++side) {
        const ctn_node p = g.node(add).inputs[static_cast<size_t>(side)];
        const ctn_node bias = g.node(add).inputs[static_cast<size_t>(1 - side)];
        if (!is_op(g, p, f.producer) || consumers[p] != 1 || !is_bias(g, f, p, bias)) continue;
        if (g.info(add).shape != g.info(p).shape) continue;
        if (!emit(f, target, p, bias, residual, act, lo, hi)) return false;
        done[add] = 1;
        return true;
      }
    }
    return false;
  }

  // relu(batch_norm(x)), the batch_norm read by nothing else: one batch_norm_relu (1.6) when the
  // backend offers it.
  bool try_bn_relu(ctn_node target, ctn_node bn) {
    if (!is_op(g, bn, CTN_OP_BATCH_NORM) || done[bn] || backend->abi_minor < 6) return false;
    const Node nd = g.node(bn);
    const OpDef *fused = g.context()->find_core_op(CTN_OP_BATCH_NORM_RELU);
    ctn_tensor_desc in[3] = {make_desc(g.info(nd.inputs[0])), make_desc(g.info(nd.inputs[1])),
                             make_desc(g.info(nd.inputs[2]))};
    if (!fused || !offers(*backend, *fused, 3, in, make_desc(g.info(target)), nd.attrs)) return false;
    rw.set(target, g.add_op(*fused, 3, nd.inputs.data(), nd.attrs));
    done.resize(g.size(), 0);
    done[bn] = 1;
    st.fused += 1;
    return true;
  }

  // sum = add(conv + bias, r), r of the same shape and dtype: one conv2d_bias_add_act (ResNet's
  // shortcut, MobileNetV2's residual), the activation ending at target included.
  bool try_residual(ctn_node target, ctn_node sum, int act, double lo, double hi) {
    if (!is_op(g, sum, CTN_OP_ADD) || done[sum]) return false;
    for (ctn_node a : g.node(sum).inputs) {
      const ctn_node r = other_operand(g, sum, a);
      if (a == r || consumers[a] != 1 || g.info(a).shape != g.info(sum).shape ||
          g.info(r).shape != g.info(sum).shape || g.info(r).dtype != g.info(sum).dtype)
        continue;
      if (try_fuse(target, a, r, act, lo, hi)) {
        done[sum] = 1;
        return true;
      }
    }
    return false;
  }
};

void fuse_bias_act(Rewriter &rw, std::vector<ctn_node> &roots, Backend *backend, PassStats &st) {
  if (!backend) return;
  Graph &g = rw.g;
  std::vector<ctn_node> order = schedule(g, roots);
  BiasActFuser fz{rw, g, backend, st, std::vector<uint32_t>(g.size(), 0), std::vector<char>(g.size(), 0)};
  for (ctn_node v : order)
    for (ctn_node in : g.node(v).inputs) ++fz.consumers[in];
  for (ctn_node r : roots) ++fz.consumers[r];
  // Activations first (each with the bias add it reads, else with a residual add), then residual
  // adds without one, then bias adds alone.
  for (ctn_node v : order) {
    const ActMatch m = match_activation(g, v, fz.consumers);
    if (m.act == CTN_ACT_RELU && fz.try_bn_relu(v, m.pre)) continue;
    if (m.act >= 0 && !fz.try_fuse(v, m.pre, CTN_NODE_NONE, m.act, m.lo, m.hi)) fz.try_residual(v, m.pre, m.act, m.lo, m.hi);
  }
  for (ctn_node v : order)
    if (v < fz.done.size() && !fz.done[v]) fz.try_residual(v, v, CTN_ACT_NONE, 0, 0);
  for (ctn_node v : order)
    if (v < fz.done.size() && !fz.done[v]) fz.try_fuse(v, v, CTN_NODE_NONE, CTN_ACT_NONE, 0, 0);
  rw.resolve_all(roots);
}

// The readers of [2, C] node v among nodes [0, n) when each is a slice of one row (axis 0, step
// 1), else none.
std::vector<ctn_node> row_slices(const Graph &g, ctn_node v, size_t n) {
  std::vector<ctn_node> readers;
  for (size_t j = 0; j < n; ++j) {
    const ctn_node u = static_cast<ctn_node>(j);
    const Node &nd = g.node(u);
    if (std::find(nd.inputs.begin(), nd.inputs.end(), v) == nd.inputs.end()) continue;
    const ctn_attrs &a = nd.attrs;
    if (!is_op(g, u, CTN_OP_SLICE) || a.i[0] != 0 || a.i[3] != 1 || (a.i[1] != 0 && a.i[1] != 1) || a.i[2] != a.i[1] + 1)
      return {};
    readers.push_back(u);
  }
  return readers;
}

// batch_norm_stats for a first backend without its kernel (OpenCL, Vulkan, CUDA, a plugin built
// before 1.6): [2, C] as concat(mean(x), mean((x - mean)^2)) over every axis but 1, the graph ops
// ctn_nn_batch_norm emitted before 1.6, so that the plan can stay on that backend. Not a pass one
// can disable: without it a plan for such a backend alone could not run the op at all.
void lower_bn_stats(Rewriter &rw, std::vector<ctn_node> &roots, Backend *backend) {
  Graph &g = rw.g;
  const OpDef *op = g.context()->find_core_op(CTN_OP_BATCH_NORM_STATS);
  bool lowered = false;
  const size_t n = g.size();
  for (size_t i = 0; i < n && op; ++i) {
    const ctn_node v = static_cast<ctn_node>(i);
    if (!is_op(g, v, CTN_OP_BATCH_NORM_STATS)) continue;
    const ctn_node x = g.node(v).inputs[0];
    const ctn_tensor_desc in = make_desc(g.info(x));
    if (backend && offers(*backend, *op, 1, &in, make_desc(g.info(v)), g.node(v).attrs)) continue;
    const uint32_t nd = g.info(x).shape.ndim;
    const int64_t c = g.info(x).shape[1];
    const ctn_attrs red = attrs_i({static_cast<int64_t>(((1ull << nd) - 1) & ~2ull), 1}), row = attrs_i({1, c}),
                    axis0 = attrs_i({0});
    const ctn_node mean = g.op1(CTN_OP_MEAN, x, &red), d = g.op2(CTN_OP_SUB, x, mean);
    const ctn_node var = g.op1(CTN_OP_MEAN, g.op2(CTN_OP_MUL, d, d), &red);
    const ctn_node rows[2] = {g.op1(CTN_OP_RESHAPE, mean, &row), g.op1(CTN_OP_RESHAPE, var, &row)};
    // ctn_nn_batch_norm reads the rows with slices: those take the rows themselves (no concat).
    const std::vector<ctn_node> readers = row_slices(g, v, n);
    if (readers.empty()) rw.set(v, g.op2(CTN_OP_CONCAT, rows[0], rows[1], &axis0));
    for (ctn_node r : readers) rw.set(r, rows[g.node(r).attrs.i[1]]);
    lowered = true;
  }
  if (lowered) rw.resolve_all(roots);
}

void rewrite(CompileState &cs) {
  // Constants fold on the first host-memory backend (the CPU), whatever the preference.
  Backend *host = nullptr;
  for (auto &b : cs.ctx->backends)
    if (b->available && b->host_memory() && !host) host = b.get();
  simplify_and_fold(cs.rw, cs.enabled(CTN_PASS_SIMPLIFY), cs.enabled(CTN_PASS_CONSTANT_FOLDING), host, cs.pass_stats);
  cs.rw.resolve_all(cs.roots);
  lower_bn_stats(cs.rw, cs.roots, cs.prefs.empty() ? nullptr : cs.prefs[0]);
  if (cs.enabled(CTN_PASS_FUSION)) fuse_bias_act(cs.rw, cs.roots, cs.prefs[0], cs.pass_stats);
}

}  // namespace ctn
