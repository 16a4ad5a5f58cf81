// Compile stage budget_memory (compile/compile.h): a memory budget met by recomputation (rematerialisation,
// "gradient checkpointing" chosen by the compiler).
//
// When the planned peak of the schedule exceeds ctn_compile_options.memory_budget, values are
// dropped after their early uses and recomputed just before their late ones (a forward
// activation that the backward pass reads again). The choice is a greedy over the schedule in
// the manner of XLA's HLO rematerialisation pass: at the step where the live bytes peak, among
// the values live across it but not read by it, take the one with the most bytes saved per
// FLOP of recomputation; repeat until the planned peak fits. A dropped value is recomputed
// from the nearest values still live at the point of use: an input that is itself no longer
// live is recomputed too, back to kept values or leaves (the segments of Chen et al. 2016,
// "Training deep nets with sublinear memory cost", found by the greedy instead of fixed at
// sqrt(n)). The copies run the same op with the same attributes on the same inputs on the same
// backend, so their results are bit-identical to the dropped ones; dropout draws its mask from
// (seed, step) inputs, so it regenerates the same mask. A copy that reads a variable runs before
// anything writes that variable. Op-library ops are never recomputed (nothing says they are
// deterministic). The planned peak is measured by plan_memory over the values lower_to_steps
// will build, so the budget bounds ctn_plan_stats.planned_peak_bytes.
#include "compile/compile.h"
#include "compile/data_parallel.h"
#include "exec/select.h"
#include "util/status.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace ctn {

namespace {

bool is_view(const Node &nd) { return nd.kind == NodeKind::Op && (nd.op->flags & OP_VIEW_RESHAPE); }

uint64_t numel(const ValueInfo &v) { return static_cast<uint64_t>(v.shape.numel()); }
uint64_t bytes_of(const ValueInfo &v) { return numel(v) * dtype_size(v.dtype); }

// A FLOP estimate as an integer, saturated at 2^52: declared shapes may be astronomically large
// (a double past uint64 made the cast undefined, found by fuzz_graph), and the plan's total of
// such estimates must not wrap either.
uint64_t sat_flops(double f) {
  constexpr double kMax = 4503599627370496.0;  // 2^52
  return f >= kMax ? static_cast<uint64_t>(kMax) : f <= 0 ? 0 : static_cast<uint64_t>(f);
}

// Estimated floating-point operations of one node: 2·M·N·K for matmuls, 2 per multiply-add of
// a convolution, else one per element read or written (the larger).
uint64_t flops_of(const Graph &g, ctn_node v) {
  const Node &nd = g.node(v);
  if (nd.kind != NodeKind::Op || is_view(nd)) return 0;
  const std::string &op = nd.op->name;
  const uint64_t out = numel(nd.info);
  if ((op == "matmul" || op == "matmul_bias_act") && nd.inputs.size() >= 2 && out) {
    // A[.., M, K] · B[.., K, N] = C[.., M, N]: |A|·|B| / |C| = K² (exact without batching).
    const double k = std::sqrt(static_cast<double>(numel(g.info(nd.inputs[0]))) *
                               static_cast<double>(numel(g.info(nd.inputs[1]))) / static_cast<double>(out));
    return sat_flops(2.0 * static_cast<double>(out) * std::max(1.0, std::round(k)));
  }
  if ((op == "conv2d" || op == "conv_transpose2d") && nd.inputs.size() >= 2) {
    const ValueInfo &w = g.info(nd.inputs[1]);
    const uint64_t lead = w.shape.ndim ? static_cast<uint64_t>(std::max<int64_t>(1, w.shape[0])) : 1;
    const uint64_t big = op == "conv2d" ? out : numel(g.info(nd.inputs[0]));
    return sat_flops(2.0 * static_cast<double>(big) * static_cast<double>(numel(w) / lead));
  }
  double in = 0;
  for (ctn_node i : nd.inputs) in += static_cast<double>(numel(g.info(i)));
  return sat_flops(std::max(static_cast<double>(out), in));
}

bool inplace_candidate(const Node &nd, const ctn_kernel &k, const Graph &g) {
  if (!(k.flags & CTN_KERNEL_INPLACE_OK) || nd.inputs.empty()) return false;
  const ValueInfo &a = g.info(nd.inputs[0]);
  return a.dtype == nd.info.dtype && a.shape == nd.info.shape;
}

// The planned peak of `order` as lower_to_steps and plan_memory will see it: one value per node
// on its device, views sharing their source, a transfer value where a step reads a node that
// lives on another device (an assignment is assumed to copy on the variable's device).
uint64_t simulate(const CompileState &cs, const std::vector<ctn_node> &order) {
  const Graph &g = cs.g;
  const bool reuse = cs.enabled(CTN_PASS_MEMORY_REUSE);
  std::map<std::pair<ctn_node, Backend *>, int> val;
  std::vector<PlanValue> pv;
  std::vector<PlanStep> ps;
  std::vector<Backend *> devs;
  auto add = [&](ctn_node v, Backend *b, bool persistent, int alias) {
    PlanValue p;
    p.bytes = bytes_of(g.info(v));
    auto it = std::find(devs.begin(), devs.end(), b);
    if (it == devs.end()) it = devs.insert(devs.end(), b);
    p.device = static_cast<int>(it - devs.begin());
    p.persistent = persistent;
    p.alias_of = alias;
    pv.push_back(p);
    return static_cast<int>(pv.size() - 1);
  };
  auto home = [&](ctn_node v) { return val.at({v, cs.placed.dev[v]}); };
  auto on = [&](ctn_node v, Backend *b) {
    auto it = val.find({v, b});
    if (it != val.end()) return it->second;
    const int src = home(v), m = add(v, b, false, -1);
    val[{v, b}] = m;
    ps.push_back(PlanStep{{src}, m, false});
    return m;
  };
  for (ctn_node v : order) {
    const Node &nd = g.node(v);
    Backend *const b = cs.placed.dev[v];
    switch (nd.kind) {
      case NodeKind::Input:
      case NodeKind::Constant:
      case NodeKind::Variable: val[{v, b}] = add(v, b, true, -1); break;
      case NodeKind::Op: {
        if (is_view(nd)) {
          val[{v, b}] = add(v, b, false, home(nd.inputs[0]));
          break;
        }
        PlanStep s;
        for (ctn_node i : nd.inputs) s.inputs.push_back(on(i, b));
        auto wi = cs.elision.write_into.find(v);
        if (wi != cs.elision.write_into.end()) {
          s.output = add(v, b, false, home(wi->second));
        } else {
          s.output = add(v, b, false, -1);
          s.inplace_ok = reuse && inplace_candidate(nd, cs.placed.kern[v], g);
        }
        val[{v, b}] = s.output;
        ps.push_back(std::move(s));
        break;
      }
      case NodeKind::Assign: {
        Backend *vb = cs.placed.dev[nd.inputs[0]];
        const int var = home(nd.inputs[0]);
        if (!cs.elision.elided[v]) ps.push_back(PlanStep{{on(nd.inputs[1], vb)}, var, false});
        val[{v, vb}] = add(v, vb, false, var);
        break;
      }
    }
  }
  for (size_t i = 0; i < cs.n_user_outputs; ++i) pv[static_cast<size_t>(home(cs.roots[i]))].is_output = true;
  return plan_memory(pv, ps, static_cast<int>(devs.size()), reuse).peak_bytes;
}

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max() / 2;
constexpr size_t kTrials = 48;  // candidates tried on the planner per step

// Liveness of the current order at node granularity.
struct Live {
  std::vector<int64_t> pos;                   // per node: position in the order, -1 if absent
  std::vector<std::vector<ctn_node>> users;   // per node: consumers in the order
  std::vector<ctn_node> root;                 // per node: its storage (views resolved)
  std::vector<int64_t> last;                  // per storage root: position of the last read
  std::vector<char> arena;                    // per node: an arena value of its own
  std::vector<uint64_t> at;                   // per position: bytes of arena values live there
};

Live liveness(const CompileState &cs, const std::vector<ctn_node> &order) {
  const Graph &g = cs.g;
  Live L;
  L.pos.assign(g.size(), -1);
  L.users.assign(g.size(), {});
  L.root.resize(g.size());
  L.last.assign(g.size(), -1);
  L.arena.assign(g.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    const ctn_node v = order[i];
    const Node &nd = g.node(v);
    L.pos[v] = static_cast<int64_t>(i);
    L.root[v] = is_view(nd) || (nd.kind == NodeKind::Assign) ? L.root[nd.inputs[0]] : v;
    L.arena[v] = nd.kind == NodeKind::Op && !is_view(nd) && !cs.elision.write_into.count(v);
    L.last[L.root[v]] = std::max(L.last[L.root[v]], static_cast<int64_t>(i));
    for (ctn_node in : nd.inputs) {
      L.users[in].push_back(v);
      L.last[L.root[in]] = std::max(L.last[L.root[in]], static_cast<int64_t>(i));
    }
  }
  for (size_t i = 0; i < cs.n_user_outputs; ++i) L.last[L.root[cs.roots[i]]] = kEnd;
  std::vector<int64_t> delta(order.size() + 1, 0);
  for (ctn_node v : order)
    if (L.arena[v]) {
      const int64_t b = static_cast<int64_t>(bytes_of(g.info(v)));
      delta[static_cast<size_t>(L.pos[v])] += b;
      const int64_t end = std::min<int64_t>(L.last[v], static_cast<int64_t>(order.size()) - 1);
      delta[static_cast<size_t>(end) + 1] -= b;
    }
  L.at.assign(order.size(), 0);
  int64_t run = 0;
  for (size_t i = 0; i < order.size(); ++i) L.at[i] = static_cast<uint64_t>(run += delta[i]);
  return L;
}

// A plan for dropping one value: the nodes to copy (inputs before their readers), the point
// of insertion, and the cost.
struct Remat {
  ctn_node value = CTN_NODE_NONE;
  std::vector<ctn_node> chain;  // originals to copy, in dependency order; chain.back() == value
  int64_t point = 0;            // the copies run just before the node at this position
  uint64_t flops = 0;
};

class Budgeter {
 public:
  explicit Budgeter(CompileState &cs) : cs_(cs), g_(cs.g) {}

  // Writers of variables: a copy reading a variable must run before the first of them.
  void note_writers() {
    writer_pos_.assign(g_.size(), kEnd);
    for (size_t i = 0; i < cs_.order.size(); ++i) {
      const ctn_node v = cs_.order[i];
      const Node &nd = g_.node(v);
      ctn_node var = CTN_NODE_NONE;
      if (nd.kind == NodeKind::Assign && !cs_.elision.elided[v]) var = nd.inputs[0];
      auto wi = cs_.elision.write_into.find(v);
      if (wi != cs_.elision.write_into.end()) var = wi->second;
      if (var != CTN_NODE_NONE) writer_pos_[var] = std::min<int64_t>(writer_pos_[var], static_cast<int64_t>(i));
    }
  }

  bool cloneable(ctn_node v) const {
    const Node &nd = g_.node(v);
    // A collective is never run twice: every rank must make the same calls (collective.h).
    return nd.kind == NodeKind::Op && !nd.op->ext && !is_collective_op(nd.op) && !cs_.elision.write_into.count(v) &&
           v < cs_.placed.kern.size() &&
           (is_view(nd) || cs_.placed.kern[v].state || cs_.placed.kern[v].fn);
  }

  // Can w be read at `point` as it is? Otherwise it joins the chain (recursively).
  bool need(const Live &L, ctn_node w, int64_t point, Remat &r, std::vector<char> &seen, int depth) const {
    if (seen[w]) return true;
    const Node &nd = g_.node(w);
    const ctn_node root = L.root[w];
    const NodeKind rk = g_.node(root).kind;
    if (rk == NodeKind::Input || rk == NodeKind::Constant || rk == NodeKind::Variable) {
      return point <= writer_pos_[root];
    }
    if (L.last[root] >= point) return true;  // live there anyway
    if (depth > 64 || !cloneable(w)) return false;
    seen[w] = 1;
    for (ctn_node in : nd.inputs)
      if (!need(L, in, point, r, seen, depth + 1)) return false;
    r.chain.push_back(w);
    r.flops += flops_of(g_, w);
    return true;
  }

  // The values that can be dropped at peak position t, best bytes per FLOP first.
  std::vector<Remat> candidates(const Live &L, int64_t t) const {
    std::vector<std::pair<double, Remat>> found;
    const auto &order = cs_.order;
    for (int64_t i = 0; i < t; ++i) {
      const ctn_node v = order[static_cast<size_t>(i)];
      if (!L.arena[v] || L.last[v] <= t || L.last[v] >= kEnd || !cloneable(v)) continue;
      // Not read at t (directly or through a view), and the first read after t.
      int64_t point = kEnd;
      bool read_at_t = false;
      for_each_read(L, v, [&](ctn_node u) { read_at_t = read_at_t || L.pos[u] == t; });
      for_each_node(L, v, [&](ctn_node u) {
        if (L.pos[u] > t) point = std::min(point, L.pos[u]);
      });
      if (read_at_t || point >= kEnd) continue;
      Remat r;
      r.value = v;
      std::vector<char> seen(g_.size(), 0);
      bool ok = true;
      for (ctn_node in : g_.node(v).inputs)
        if (!(ok = need(L, in, point, r, seen, 1))) break;
      if (!ok) continue;
      r.chain.push_back(v);
      r.flops += flops_of(g_, v);
      r.point = point;
      const double score = static_cast<double>(bytes_of(g_.info(v))) / static_cast<double>(r.flops + 1);
      found.emplace_back(score, std::move(r));
    }
    std::stable_sort(found.begin(), found.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
    std::vector<Remat> out;
    for (auto &f : found) out.push_back(std::move(f.second));
    return out;
  }

  // Reads of v's storage: its consumers, and the consumers of its views (transitively).
  template <class F>
  void for_each_read(const Live &L, ctn_node v, F &&f) const {
    for (ctn_node u : L.users[v]) {
      if (is_view(g_.node(u))) for_each_read(L, u, f);
      else f(u);
    }
  }

  // Every consumer of v's storage, views included.
  template <class F>
  void for_each_node(const Live &L, ctn_node v, F &&f) const {
    for (ctn_node u : L.users[v]) {
      f(u);
      if (is_view(g_.node(u))) for_each_node(L, u, f);
    }
  }

  // Copies the chain, points every read of the value after t at the copy, inserts the copies.
  // Without kernels (a trial), the changed inputs are logged in `undo` for rollback().
  void apply(const Live &L, int64_t t, const Remat &r, bool kernels) {
    kernels_ = kernels;
    undo_.clear();
    std::vector<ctn_node> made;
    std::vector<ctn_node> map(g_.size(), CTN_NODE_NONE);
    for (ctn_node w : r.chain) {
      const Node src = g_.node(w);  // a copy: add_op may move the node storage
      std::vector<ctn_node> ins;
      for (ctn_node in : src.inputs) ins.push_back(map[in] != CTN_NODE_NONE ? map[in] : in);
      map[w] = copy_node(w, src, ins, true);
      made.push_back(map[w]);
    }
    redirect(L, t, r.value, map[r.value], made);
    cs_.order.insert(cs_.order.begin() + r.point, made.begin(), made.end());
  }

  // Undoes a trial apply: inputs and order back (the copies stay in the graph, unused).
  void rollback(const std::vector<ctn_node> &order) {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) g_.node(it->first).inputs = it->second;
    undo_.clear();
    cs_.order = order;
  }

 private:
  ctn_node copy_node(ctn_node w, const Node &src, const std::vector<ctn_node> &ins, bool recompute) {
    const ctn_node c = g_.add_op(*src.op, static_cast<uint32_t>(ins.size()), ins.data(), src.attrs);
    cs_.placed.dev.push_back(cs_.placed.dev[w]);
    cs_.placed.kern.push_back(ctn_kernel{});
    cs_.elision.elided.push_back(0);
    cs_.recomputed.resize(g_.size(), 0);
    cs_.recomputed[c] = recompute && !is_view(src);
    if (kernels_ && !is_view(src)) {
      std::vector<ctn_tensor_desc> in;
      for (ctn_node i : ins) in.push_back(make_desc(g_.info(i)));
      std::string why;
      if (!select_kernel(*cs_.placed.dev[c], *src.op, static_cast<uint32_t>(in.size()), in.data(), make_desc(g_.info(c)),
                         src.attrs, &cs_.placed.kern[c], &why))
        fail(CTN_ERR_INTERNAL, "memory budget: backend %s declined to recompute %s: %s", cs_.placed.dev[c]->name.c_str(),
             src.op->name.c_str(), why.c_str());
    }
    return c;
  }

  // Reads of `from` after t go to `to`; views of `from` read after t get copies over `to`.
  void redirect(const Live &L, int64_t t, ctn_node from, ctn_node to, std::vector<ctn_node> &made) {
    for (ctn_node u : L.users[from]) {
      if (L.pos[u] > t) {
        undo_.emplace_back(u, g_.node(u).inputs);
        for (ctn_node &in : g_.node(u).inputs)
          if (in == from) in = to;
      } else if (is_view(g_.node(u))) {
        bool late = false;
        for_each_read(L, u, [&](ctn_node x) { late = late || L.pos[x] > t; });
        if (!late) continue;
        const Node src = g_.node(u);
        const ctn_node c = copy_node(u, src, {to}, false);
        made.push_back(c);
        redirect(L, t, u, c, made);
      }
    }
  }

  CompileState &cs_;
  Graph &g_;
  std::vector<int64_t> writer_pos_;
  bool kernels_ = true;
  std::vector<std::pair<ctn_node, std::vector<ctn_node>>> undo_;
};

std::string describe_node(const Graph &g, ctn_node v) {
  const Node &nd = g.node(v);
  return nd.op->name + " " + dtype_name(nd.info.dtype) + shape_str(nd.info.shape);
}

}  // namespace

void budget_memory(CompileState &cs) {
  Graph &g = cs.g;
  cs.recomputed.assign(g.size(), 0);
  ctn_plan_memory_report &rep = cs.out.memory;
  rep.struct_size = sizeof rep;
  const uint64_t budget = cs.memory_budget;
  const uint64_t peak0 = simulate(cs, cs.order);
  rep.peak_without_budget = peak0;
  auto finish = [&] {
    uint64_t total = 0, extra = 0;
    uint32_t n = 0;
    cs.out.recomputed.clear();
    for (ctn_node v : cs.order) {
      total += flops_of(g, v);
      if (v < cs.recomputed.size() && cs.recomputed[v]) {
        extra += flops_of(g, v);
        ++n;
        cs.out.recomputed += describe_node(g, v) + "\n";
      }
    }
    rep.flops = total;
    rep.extra_flops = extra;
    rep.n_recomputed = n;
  };
  if (budget == 0 || (budget != CTN_MEMORY_BUDGET_AUTO && peak0 <= budget)) {
    rep.budget = budget;
    finish();
    return;
  }
  Budgeter bud(cs);
  // The best state seen: the order and every node's inputs (copies made after it are dropped
  // from the order; the kernels no step takes are released with the CompileState).
  uint64_t best = peak0;
  std::vector<ctn_node> best_order = cs.order;
  std::vector<std::vector<ctn_node>> best_inputs;
  auto snapshot = [&] {
    best_order = cs.order;
    best_inputs.resize(g.size());
    for (size_t v = 0; v < g.size(); ++v) best_inputs[v] = g.node(static_cast<ctn_node>(v)).inputs;
  };
  snapshot();
  const size_t max_iter = 8 * cs.order.size() + 16;
  for (size_t it = 0; it < max_iter; ++it) {
    if (budget != CTN_MEMORY_BUDGET_AUTO && best <= budget) break;
    bud.note_writers();
    const Live L = liveness(cs, cs.order);
    const int64_t t =
        static_cast<int64_t>(std::max_element(L.at.begin(), L.at.end()) - L.at.begin());  // first maximum
    // Try the most promising few on the real planner; take the one that lowers the planned peak
    // most per FLOP, else (several values may have to go before the peak moves) the best bytes
    // per FLOP at t among those that do not raise it.
    std::vector<Remat> cands = bud.candidates(L, t);
    const uint64_t cur = simulate(cs, cs.order);
    const std::vector<ctn_node> order0 = cs.order;
    int pick = -1;
    double pick_gain = -1;
    for (size_t k = 0; k < cands.size() && k < kTrials; ++k) {
      bud.apply(L, t, cands[k], false);
      const uint64_t trial = simulate(cs, cs.order);
      bud.rollback(order0);
      if (trial > cur) continue;
      const double gain = static_cast<double>(cur - trial) / static_cast<double>(cands[k].flops + 1);
      if (gain > pick_gain) {
        pick_gain = gain;
        pick = static_cast<int>(k);
      }
    }
    if (pick < 0) break;
    const Remat &r = cands[static_cast<size_t>(pick)];
    bud.apply(L, t, r, true);
    const uint64_t peak = simulate(cs, cs.order);
    if (peak < best) {
      best = peak;
      snapshot();
    }
  }
  // Back to the best state (the last one unless later steps made it worse).
  cs.order = best_order;
  for (size_t v = 0; v < best_inputs.size(); ++v) g.node(static_cast<ctn_node>(v)).inputs = best_inputs[v];
  if (budget == CTN_MEMORY_BUDGET_AUTO || best > budget) rep.minimum_bytes = best;
  if (budget != CTN_MEMORY_BUDGET_AUTO && best > budget)
    fail(CTN_ERR_OUT_OF_MEMORY,
         "ctn_plan_compile: memory budget %llu bytes is below the minimum this plan reaches by recomputation, "
         "%llu bytes (planned peak without a budget: %llu bytes)",
         static_cast<unsigned long long>(budget), static_cast<unsigned long long>(best),
         static_cast<unsigned long long>(peak0));
  rep.budget = budget == CTN_MEMORY_BUDGET_AUTO ? best : budget;
  finish();
}

}  // namespace ctn
