// Compile stage layout (compile/compile.h): channels-last regions. Where the first preferred
// backend runs 4-d convolutions with NHWC activations (the conv ops' layout attribute, ABI 1.7),
// maximal regions of convolutions and the layout-agnostic ops between them (elementwise ops,
// binary ops whose other operand has the same shape, broadcasts per channel or is a scalar,
// reductions, concat, slice, and max_pool2d / avg_pool2d where the backend offers their layout
// attribute) run in NHWC: one permute (0,2,3,1) where a value enters a region, one
// permute (0,3,1,2) where a value leaves it (a reader outside, a plan output), so the plan's
// results are those of the NCHW graph. A permute that moves only dims of size 1 is a reshape
// (free). A region converts when it needs fewer (non-free) permutes than the activation
// reorders it removes (two per convolution: the CPU's oneDNN convolution converts NCHW in and
// out on every call otherwise). Inference plans only: no assignment, no ctn_grad gradient.
#include <chutney/ops.h>

#include "compile/compile.h"
#include "exec/select.h"
#include "util/status.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace ctn {
namespace {

// An NCHW axis's position in NHWC.
constexpr uint32_t kNhwcPos[4] = {0, 3, 1, 2};

// kAxis: concat, slice (i[0] axis); kShuffle: a channel shuffle's three nodes (shuffle_head);
// kPool: max_pool2d, avg_pool2d (layout attribute, since 1.7).
enum class Kind : uint8_t { kNone, kConv, kUnary, kBinary, kReduce, kAxis, kShuffle, kPool };

const char *const kUnaryOps[] = {CTN_OP_RELU, CTN_OP_SIGMOID, CTN_OP_TANH, CTN_OP_GELU, CTN_OP_CLAMP,
                                 CTN_OP_LEAKY_RELU, CTN_OP_NEG, CTN_OP_EXP, CTN_OP_ABS, CTN_OP_SQRT,
                                 CTN_OP_ERF, CTN_OP_COPY};
const char *const kBinaryOps[] = {CTN_OP_ADD, CTN_OP_SUB, CTN_OP_MUL, CTN_OP_DIV, CTN_OP_MAXIMUM, CTN_OP_MINIMUM};
const char *const kReduceOps[] = {CTN_OP_SUM, CTN_OP_MEAN, CTN_OP_MAX};

bool is_any(const Graph &g, ctn_node v, const char *const *ops, size_t n) {
  for (size_t k = 0; k < n; ++k)
    if (is_op(g, v, ops[k])) return true;
  return false;
}

// The conv op's layout attribute slot (ops.h): conv2d i[7], the fused ones i[8]; 0 for others.
uint32_t conv_layout_slot(const Graph &g, ctn_node v) {
  if (is_op(g, v, CTN_OP_CONV2D)) return 7;
  if (is_op(g, v, CTN_OP_CONV2D_BIAS_ACT) || is_op(g, v, CTN_OP_CONV2D_BIAS_ADD_ACT)) return 8;
  return 0;
}
// The pool's layout attribute slot (ops.h): max_pool2d i[6], avg_pool2d i[7]; 0 for others.
uint32_t pool_layout_slot(const Graph &g, ctn_node v) {
  if (is_op(g, v, CTN_OP_MAX_POOL2D)) return 6;
  if (is_op(g, v, CTN_OP_AVG_POOL2D)) return 7;
  return 0;
}

Shape nhwc_shape(const Shape &s) {
  Shape r = s;
  r[1] = s[2], r[2] = s[3], r[3] = s[1];
  return r;
}
Shape nchw_shape(const Shape &s) {
  Shape r = s;
  r[1] = s[3], r[2] = s[1], r[3] = s[2];
  return r;
}

// Whether the permute between NCHW and NHWC of 4-d shape s moves only dims of size 1.
bool free_permute(const Shape &s) { return s[1] == 1 || (s[2] == 1 && s[3] == 1); }

uint64_t nhwc_mask(uint64_t mask) {
  uint64_t r = 0;
  for (uint32_t a = 0; a < 4; ++a)
    if (mask >> a & 1) r |= 1ull << kNhwcPos[a];
  return r;
}

struct Role {
  Kind kind = Kind::kNone;
  bool out_nhwc = true;  // the NHWC version's output is NHWC (false: a reduction whose result is the same)
};

struct LayoutPass {
  Graph &g;
  Rewriter &rw;
  Backend &backend;
  std::vector<ctn_node> &roots;
  LayoutStats &stats;
  std::vector<ctn_node> order;
  std::vector<Role> role;
  std::vector<ctn_node> parent;  // union-find over candidate nodes
  std::vector<std::vector<ctn_node>> readers;
  std::vector<char> is_root;

  ctn_node find(ctn_node v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  }

  // Whether input slot k of candidate v carries an activation (conv weights and biases do not).
  bool act_slot(ctn_node v, size_t k) const {
    if (role[v].kind != Kind::kConv) return true;
    return k == 0 || (k == 3 && is_op(g, v, CTN_OP_CONV2D_BIAS_ADD_ACT));
  }

  // Whether a binary op's operand u adapts to an NHWC output: 4-d (permuted), all ones
  // (unchanged) or [C,1,1] per channel (reshaped to [C]).
  bool adaptable(ctn_node u) const {
    const Shape &s = g.info(u).shape;
    if (s.ndim == 4) return true;
    int64_t n = 1;
    for (uint32_t k = 0; k < s.ndim; ++k) n *= s[k];
    return n == 1 || (s.ndim == 3 && s[1] == 1 && s[2] == 1);
  }

  // Whether the backend accepts conv or pool v with its layout attribute (slot) set to NHWC.
  bool offers_nhwc(ctn_node v, uint32_t slot) {
    const Node nd = g.node(v);
    if (nd.attrs.ni > slot && nd.attrs.i[slot] != 0) return false;
    ctn_attrs a = nd.attrs;
    a.i[slot] = 1;
    a.ni = slot + 1;
    ctn_tensor_desc in[4];
    for (size_t k = 0; k < nd.inputs.size() && k < 4; ++k) {
      ValueInfo vi = g.info(nd.inputs[k]);
      if (act_slot(v, k)) vi.shape = nhwc_shape(vi.shape);
      in[k] = make_desc(vi);
    }
    ValueInfo out = nd.info;
    out.shape = nhwc_shape(out.shape);
    return offers(backend, *nd.op, static_cast<uint32_t>(nd.inputs.size()), in, make_desc(out), a);
  }

  // The only reader of v (NONE when v has several or is a plan output).
  ctn_node only_reader(ctn_node v) const { return !is_root[v] && readers[v].size() == 1 ? readers[v][0] : CTN_NODE_NONE; }

  // ShuffleNet's channel shuffle: reshape [N,C,H,W] -> [N,g,C/g,H,W], permute (0,2,1,3,4), reshape
  // back to [N,C,H,W], each read only by the next. In NHWC: [N,H,W,g,C/g], (0,1,2,4,3), [N,H,W,C].
  bool shuffle_head(ctn_node r1) const {
    const Shape &x = g.info(g.node(r1).inputs[0]).shape, &s = g.info(r1).shape;
    if (x.ndim != 4 || s.ndim != 5 || s[0] != x[0] || s[1] * s[2] != x[1] || s[3] != x[2] || s[4] != x[3]) return false;
    const ctn_node p = only_reader(r1);
    static const int64_t kPerm[5] = {0, 2, 1, 3, 4};
    if (p == CTN_NODE_NONE || !is_op(g, p, CTN_OP_PERMUTE) || !std::equal(kPerm, kPerm + 5, g.node(p).attrs.i)) return false;
    const ctn_node r2 = only_reader(p);
    return r2 != CTN_NODE_NONE && is_op(g, r2, CTN_OP_RESHAPE) && g.info(r2).shape == x;
  }
  // The shuffle's second (the permute) or third (the reshape back) node.
  bool shuffle_tail(ctn_node v) const {
    const ctn_node u = g.node(v).inputs.empty() ? CTN_NODE_NONE : g.node(v).inputs[0];
    if (u == CTN_NODE_NONE || role[u].kind != Kind::kShuffle) return false;
    return (is_op(g, v, CTN_OP_PERMUTE) && is_op(g, u, CTN_OP_RESHAPE)) ||
           (is_op(g, v, CTN_OP_RESHAPE) && is_op(g, u, CTN_OP_PERMUTE));
  }

  Role classify(ctn_node v) {
    const Node &nd = g.node(v);
    Role r;
    if (nd.kind == NodeKind::Op && !nd.bounded && ((is_op(g, v, CTN_OP_RESHAPE) && shuffle_head(v)) || shuffle_tail(v)))
      return Role{Kind::kShuffle, true};
    if (nd.kind != NodeKind::Op || nd.bounded || nd.info.shape.ndim != 4) {
      if (nd.kind == NodeKind::Op && !nd.bounded && is_any(g, v, kReduceOps, std::size(kReduceOps))) return classify_reduce(v);
      return r;
    }
    if (const uint32_t slot = conv_layout_slot(g, v)) {
      role[v].kind = Kind::kConv;  // act_slot reads it
      if (!offers_nhwc(v, slot)) return Role{};
      r.kind = Kind::kConv;
    } else if (const uint32_t ps = pool_layout_slot(g, v)) {
      if (offers_nhwc(v, ps)) r.kind = Kind::kPool;
    } else if (is_any(g, v, kUnaryOps, std::size(kUnaryOps))) {
      if (g.info(nd.inputs[0]).shape == nd.info.shape) r.kind = Kind::kUnary;
    } else if (is_any(g, v, kBinaryOps, std::size(kBinaryOps))) {
      if (adaptable(nd.inputs[0]) && adaptable(nd.inputs[1])) r.kind = Kind::kBinary;
    } else if (is_any(g, v, kReduceOps, std::size(kReduceOps))) {
      return classify_reduce(v);
    } else if (is_op(g, v, CTN_OP_CONCAT) || is_op(g, v, CTN_OP_SLICE)) {
      bool all4 = true;
      for (ctn_node u : nd.inputs) all4 = all4 && g.info(u).shape.ndim == 4;
      if (all4) r.kind = Kind::kAxis;
    }
    return r;
  }

  // A reduction of a 4-d input: NHWC with keepdims; without, when the kept axes keep their order
  // (C is not kept together with H or W), its result is the NCHW one.
  Role classify_reduce(ctn_node v) {
    const Node &nd = g.node(v);
    if (g.info(nd.inputs[0]).shape.ndim != 4) return {};
    const uint64_t mask = static_cast<uint64_t>(nd.attrs.i[0]);
    if (nd.attrs.i[1]) return Role{Kind::kReduce, true};
    const bool c_kept = !(mask & 2), spatial_kept = !(mask & 4) || !(mask & 8);
    if (c_kept && spatial_kept) return {};
    return Role{Kind::kReduce, false};
  }

  void find_regions() {
    order = schedule(g, roots);
    const size_t n = g.size();
    role.assign(n, Role{});
    parent.resize(n);
    readers.assign(n, {});
    is_root.assign(n, 0);
    for (size_t v = 0; v < n; ++v) parent[v] = static_cast<ctn_node>(v);
    for (ctn_node r : roots) is_root[r] = 1;
    for (ctn_node v : order)
      for (ctn_node u : g.node(v).inputs) readers[u].push_back(v);
    for (ctn_node v : order) role[v] = classify(v);
    for (ctn_node v : order) {
      if (role[v].kind == Kind::kNone) continue;
      const Node &nd = g.node(v);
      for (size_t k = 0; k < nd.inputs.size(); ++k) {
        const ctn_node u = nd.inputs[k];
        if (act_slot(v, k) && role[u].kind != Kind::kNone && role[u].out_nhwc) parent[find(u)] = find(v);
      }
    }
  }

  // Whether region node u's NHWC value is needed outside its region (a plan output, a reader
  // elsewhere or in a weight slot).
  bool leaves(ctn_node u) {
    if (!role[u].out_nhwc) return false;
    if (is_root[u]) return true;
    for (ctn_node r : readers[u]) {
      if (role[r].kind == Kind::kNone || find(r) != find(u)) return true;
      const Node &nd = g.node(r);
      for (size_t k = 0; k < nd.inputs.size(); ++k)
        if (nd.inputs[k] == u && !act_slot(r, k)) return true;
    }
    return false;
  }

  // Whether input u of region node v enters the region (an outside 4-d value to permute).
  bool enters(ctn_node v, ctn_node u) {
    return g.info(u).shape.ndim == 4 && (role[u].kind == Kind::kNone || find(u) != find(v) || !role[u].out_nhwc);
  }

  // Per region root: convolutions and the non-free permutes converting it would add.
  std::map<ctn_node, std::pair<uint32_t, uint32_t>> region_costs() {
    std::map<ctn_node, std::pair<uint32_t, uint32_t>> cost;
    std::map<ctn_node, std::vector<ctn_node>> entering;  // per region: the values permuted in
    for (ctn_node v : order) {
      if (role[v].kind == Kind::kNone) continue;
      auto &c = cost[find(v)];
      if (role[v].kind == Kind::kConv) ++c.first;
      if (leaves(v) && !free_permute(g.info(v).shape)) ++c.second;
      const Node &nd = g.node(v);
      for (size_t k = 0; k < nd.inputs.size(); ++k) {
        const ctn_node u = nd.inputs[k];
        if (!act_slot(v, k) || !enters(v, u) || free_permute(g.info(u).shape)) continue;
        auto &e = entering[find(v)];
        if (std::find(e.begin(), e.end(), u) == e.end()) e.push_back(u), ++c.second;
      }
    }
    return cost;
  }

  // A channel shuffle node's NHWC attributes: the reshapes' shapes with H, W first, the permute
  // swapping the last two dims.
  void shuffle_attrs(ctn_node v, ctn_attrs *a) const {
    const Shape &s = g.info(v).shape;
    if (is_op(g, v, CTN_OP_PERMUTE)) {
      *a = attrs_i({0, 1, 2, 4, 3});
    } else if (s.ndim == 5) {
      *a = attrs_i({s[0], s[3], s[4], s[1], s[2]});
    } else {
      const Shape t = nhwc_shape(s);
      *a = attrs_i({t[0], t[1], t[2], t[3]});
    }
  }

  ctn_node permute(ctn_node u, bool to_nhwc) {
    const Shape &s = g.info(u).shape;
    const Shape t = to_nhwc ? nhwc_shape(s) : nchw_shape(s);
    ++(free_permute(s) ? stats.reshapes : stats.permutes);
    if (free_permute(s)) {
      const ctn_attrs a = attrs_i({t[0], t[1], t[2], t[3]});
      return g.op1(CTN_OP_RESHAPE, u, &a);
    }
    const ctn_attrs a = to_nhwc ? attrs_i({0, 2, 3, 1}) : attrs_i({0, 3, 1, 2});
    return g.op1(CTN_OP_PERMUTE, u, &a);
  }

  // The NHWC node for region node v (its region's inputs already converted into nhwc_of).
  ctn_node convert(ctn_node v, std::vector<ctn_node> &nhwc_of, std::map<ctn_node, ctn_node> &entered) {
    const Node nd = g.node(v);
    std::vector<ctn_node> ins = nd.inputs;
    for (size_t k = 0; k < ins.size(); ++k) {
      const ctn_node u = ins[k];
      if (!act_slot(v, k)) continue;
      if (role[u].kind != Kind::kNone && find(u) == find(v) && role[u].out_nhwc) {
        ins[k] = nhwc_of[u];
      } else if (g.info(u).shape.ndim == 4) {
        auto it = entered.find(u);
        ins[k] = it != entered.end() ? it->second : (entered[u] = permute(u, true));
      } else if (role[v].kind == Kind::kBinary && g.info(u).shape.ndim == 3 && g.info(u).shape[0] != 1) {
        const ctn_attrs a = attrs_i({g.info(u).shape[0]});
        ins[k] = g.op1(CTN_OP_RESHAPE, u, &a);  // [C,1,1] -> [C]
      }
    }
    ctn_attrs a = nd.attrs;
    switch (role[v].kind) {
      case Kind::kConv:
      case Kind::kPool: {
        const uint32_t slot = role[v].kind == Kind::kConv ? conv_layout_slot(g, v) : pool_layout_slot(g, v);
        a.i[slot] = 1;
        a.ni = slot + 1;
        ++(role[v].kind == Kind::kConv ? stats.convs : stats.pools);
        break;
      }
      case Kind::kReduce: a.i[0] = static_cast<int64_t>(nhwc_mask(static_cast<uint64_t>(a.i[0]))); break;
      case Kind::kAxis: a.i[0] = kNhwcPos[a.i[0] < 0 ? a.i[0] + 4 : a.i[0]]; break;
      case Kind::kShuffle: shuffle_attrs(v, &a); break;
      default: break;
    }
    return g.add_op(*nd.op, static_cast<uint32_t>(ins.size()), ins.data(), a);
  }

  void run() {
    find_regions();
    const auto cost = region_costs();
    std::vector<char> convert_root(g.size(), 0);
    for (const auto &[root, c] : cost)
      if (c.first > 0 && c.second < 2 * c.first) convert_root[root] = 1, ++stats.regions;
    if (!stats.regions) return;
    std::vector<ctn_node> nhwc_of(g.size(), CTN_NODE_NONE);
    std::map<ctn_node, ctn_node> entered;
    std::vector<std::pair<ctn_node, ctn_node>> replaced;  // old node, its NCHW result
    for (ctn_node v : order) {
      if (role[v].kind == Kind::kNone || !convert_root[find(v)]) continue;
      const ctn_node nv = convert(v, nhwc_of, entered);
      nhwc_of.resize(g.size(), CTN_NODE_NONE);
      nhwc_of[v] = nv;
      if (!role[v].out_nhwc) replaced.emplace_back(v, nv);
      else if (leaves(v)) replaced.emplace_back(v, permute(nv, false));
    }
    for (const auto &[old, now] : replaced) rw.set(old, now);
    rw.resolve_all(roots);
  }

};

// Whether the plan is an inference plan: no assignment, no gradient made by ctn_grad, not
// data-parallel.
bool inference_plan(const CompileState &cs) {
  if (cs.dp || cs.roots.size() > cs.n_user_outputs) return false;
  for (const Node &nd : cs.g.nodes())
    if (nd.grad_uses_from != 0) return false;
  return true;
}

}  // namespace

void convert_layout(CompileState &cs) {
  if (!cs.enabled(CTN_PASS_LAYOUT) || cs.precision != CTN_PRECISION_F32 || cs.prefs.empty()) return;
  Backend &b = *cs.prefs[0];
  // The layout attribute is never shown to a backend built against an older header (ops.h).
  if (b.abi_minor < 7 || !inference_plan(cs)) return;
  LayoutPass pass{cs.g, cs.rw, b, cs.roots, cs.layout_stats, {}, {}, {}, {}, {}};
  pass.run();
}

}  // namespace ctn
