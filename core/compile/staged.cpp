// Plans over ops with data-dependent output shapes (OP_DATA_DEPENDENT, since 1.6): run in stages.
//
// A node is *blocked* while its value is unknown and it is a data-dependent op or reads a blocked
// node. One run repeats, until every output is known:
//  1. a stage: the unblocked nodes that something blocked reads, and the unblocked outputs, are
//     computed by an ordinary compiled plan of the part of the graph behind them, in which every
//     value already known is an input of its actual shape (the stage's plan is cached per those
//     shapes, so a run whose shapes repeat compiles nothing);
//  2. the data-dependent ops whose inputs are all known are evaluated on the host
//     (OpDef::evaluate), which gives them their actual shape.
// Re-adding a stage's nodes to its graph re-infers every shape from the actual ones, so what
// follows a data-dependent op is planned (memory, kernels) for the shape it produced. The order
// of stages depends only on the graph, never on the data. Graphs without such ops never get here.
#include <chutney/ops.h>

#include "compile/compile.h"
#include "exec/plan.h"
#include "tensor/handle.h"
#include "util/status.h"

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctn {

namespace {

constexpr size_t kMaxCachedStages = 64;  // compiled stage plans kept per plan (oldest dropped)

struct StagePlan {
  std::unique_ptr<Plan> plan;
  std::vector<ctn_node> fed;      // user-graph nodes fed, in the order of `feed_ids`
  std::vector<ctn_node> feed_ids;  // their input nodes in the stage graph
  std::vector<ctn_node> targets;   // user-graph nodes the stage computes, one output each
};

// Reshape and broadcast_to take their target shape as attributes, which a graph built over an
// upper bound holds as numbers (the ONNX importer's gathers reshape their result to the bound).
// When exactly one dim of the input differs from its bound, the target dim that carried that
// extent takes the actual one: for reshape the dim that starts at the same element offset with
// the bound's extent, for broadcast_to the dim aligned with it from the right.
void adapt_target_shape(const OpDef &op, const Shape &bound, const Shape &actual, ctn_attrs &a) {
  const bool reshape = op.name == CTN_OP_RESHAPE;
  if ((!reshape && op.name != CTN_OP_BROADCAST_TO) || bound.ndim != actual.ndim || bound == actual) return;
  uint32_t changed = bound.ndim;
  for (uint32_t k = 0; k < bound.ndim; ++k)
    if (bound[k] != actual[k]) {
      if (changed != bound.ndim) return;  // two dims changed: no single dim carries the extent
      changed = k;
    }
  if (!reshape) {
    const uint32_t j = changed + a.ni - bound.ndim;
    if (a.ni >= bound.ndim && a.i[j] == bound[changed]) a.i[j] = actual[changed];
    return;
  }
  int64_t before = 1, at = 1;
  for (uint32_t k = 0; k < changed; ++k) before *= bound[k];
  for (uint32_t j = 0; j < a.ni; at *= a.i[j], ++j)
    if (at == before && a.i[j] == bound[changed]) {
      a.i[j] = actual[changed];
      return;
    }
}

class Staged final : public StagedRun {
 public:
  Staged(const Graph &user, uint32_t n_out, const ctn_node *outs, const ctn_compile_options *opts)
      : g_(user.context(), false), outs_(outs, outs + n_out) {
    g_.copy_nodes_from(user);
    if (opts) {  // kept for the stages' compiles: the backend list is copied (the caller's may go)
      opts_ = *opts;
      has_opts_ = true;
      if (opts->backends) backends_ = opts->backends;
      opts_.backends = opts->backends ? backends_.c_str() : nullptr;
    }
    for (ctn_node o : outs_) user.check(o, "ctn_plan_compile");
    describe_ = "staged plan (data-dependent shapes): " + std::to_string(n_out) +
                " outputs; stages are compiled on the first run of each set of shapes";
  }

  void run(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_out,
           ctn_tensor *const *outputs, const RunControl *rc) override {
    check_outputs(n_out, outputs);
    std::unordered_map<ctn_node, Tensor> known = take_feeds(n_feeds, feed_nodes, feed_values);
    for (uint32_t stage = 0;; ++stage) {
      std::vector<char> blocked = find_blocked(known);
      bool done = true;
      for (ctn_node o : outs_) done = done && (known.count(o) || leaf(g_.node(o)));
      if (done) break;
      std::vector<ctn_node> targets, ready;
      pick(blocked, known, &targets, &ready);
      if (targets.empty() && ready.empty())
        fail(CTN_ERR_INTERNAL, "staged plan: stage %u has nothing to compute, yet outputs are unknown", stage);
      if (!targets.empty()) run_stage(stage, targets, known, rc);
      for (ctn_node d : ready) evaluate(d, known);
    }
    for (uint32_t i = 0; i < n_out; ++i)
      if (outputs[i]) give(*reinterpret_cast<Tensor *>(outputs[i]), value_of(outs_[i], known));
  }

  const ValueInfo &output_info(uint32_t i) const override {
    if (i >= outs_.size()) fail(CTN_ERR_INVALID_ARGUMENT, "output index %u is out of range (the plan has %zu outputs)", i, outs_.size());
    return g_.info(outs_[i]);
  }
  uint32_t n_outputs() const override { return static_cast<uint32_t>(outs_.size()); }
  const std::string &describe() const override { return describe_; }

 private:
  Graph g_;  // a copy of the user's graph
  std::vector<ctn_node> outs_;
  ctn_compile_options opts_{};
  bool has_opts_ = false;
  std::string backends_;
  std::string describe_;
  std::map<std::string, StagePlan> cache_;

  static bool leaf(const Node &n) { return n.kind == NodeKind::Constant || n.kind == NodeKind::Variable; }
  // A known value, or a constant's (a variable's initial) value.
  const Tensor &value_of(ctn_node v, const std::unordered_map<ctn_node, Tensor> &known) const {
    return leaf(g_.node(v)) ? *g_.node(v).value : known.at(v);
  }

  void check_outputs(uint32_t n_out, ctn_tensor *const *outputs) const {
    if (n_out && !outputs) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: outputs is NULL");
    if (n_out > outs_.size()) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: %u outputs requested, the plan has %zu", n_out, outs_.size());
    for (uint32_t i = 0; i < n_out; ++i) {
      const Tensor *t = reinterpret_cast<const Tensor *>(outputs[i]);
      if (t && t->dtype != g_.info(outs_[i]).dtype)
        fail(CTN_ERR_DTYPE, "ctn_plan_run: output %u is %s; the tensor given is %s (create it with ctn_plan_output_create)",
             i, dtype_name(g_.info(outs_[i]).dtype), dtype_name(t->dtype));
    }
  }

  std::unordered_map<ctn_node, Tensor> take_feeds(uint32_t n, const ctn_node *nodes, const ctn_tensor *const *values) const {
    if (n && (!nodes || !values)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed arrays are NULL");
    std::unordered_map<ctn_node, Tensor> known;
    for (uint32_t i = 0; i < n; ++i) {
      const ctn_node node = nodes[i];
      if (node >= g_.size() || g_.node(node).kind != NodeKind::Input)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed %u names node %u, which is not a ctn_input of the graph", i, node);
      const Tensor *t = reinterpret_cast<const Tensor *>(values[i]);
      const Node &in = g_.node(node);
      if (!t) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed for input \"%s\" is NULL", in.name.c_str());
      if (t->dtype != in.info.dtype || t->shape != in.info.shape)
        fail(t->dtype != in.info.dtype ? CTN_ERR_DTYPE : CTN_ERR_SHAPE, "ctn_plan_run: input \"%s\" expects %s%s, the feed is %s%s",
             in.name.c_str(), dtype_name(in.info.dtype), shape_str(in.info.shape).c_str(), dtype_name(t->dtype),
             shape_str(t->shape).c_str());
      if (!known.emplace(node, *t).second) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: input \"%s\" is fed twice", in.name.c_str());
    }
    return known;
  }

  std::vector<char> find_blocked(const std::unordered_map<ctn_node, Tensor> &known) const {
    std::vector<char> blocked(g_.size(), 0);
    for (ctn_node v = 0; v < g_.size(); ++v) {
      const Node &n = g_.node(v);
      if (known.count(v) || n.kind != NodeKind::Op) continue;
      bool b = (n.op->flags & OP_DATA_DEPENDENT) != 0;
      for (ctn_node x : n.inputs) b = b || blocked[x];
      blocked[v] = b;
    }
    return blocked;
  }

  // targets: unknown, unblocked values that a blocked node (or the outputs) read; ready: the
  // data-dependent ops every input of which is known or a target.
  void pick(const std::vector<char> &blocked, const std::unordered_map<ctn_node, Tensor> &known,
            std::vector<ctn_node> *targets, std::vector<ctn_node> *ready) const {
    std::vector<char> need(g_.size(), 0), want(g_.size(), 0);
    for (ctn_node o : outs_) need[o] = 1;
    for (ctn_node v = static_cast<ctn_node>(g_.size()); v-- > 0;) {
      if (!need[v] || known.count(v)) continue;
      const Node &n = g_.node(v);
      if (!blocked[v]) {
        want[v] = !leaf(n);  // a stage computes it (and what it reads); leaves are read in place
        continue;
      }
      bool all_free = true;
      for (ctn_node x : n.inputs) {
        need[x] = 1;
        all_free = all_free && !blocked[x];
      }
      if ((n.op->flags & OP_DATA_DEPENDENT) && all_free) ready->push_back(v);
    }
    for (ctn_node v = 0; v < g_.size(); ++v)
      if (want[v]) {
        if (g_.node(v).kind == NodeKind::Input)
          fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: input \"%s\" (node %u) was not fed", g_.node(v).name.c_str(), v);
        targets->push_back(v);
      }
  }

  void run_stage(uint32_t stage, const std::vector<ctn_node> &targets, std::unordered_map<ctn_node, Tensor> &known,
                 const RunControl *rc) {
    std::vector<ctn_node> fed = inputs_of(targets, known);
    std::string key = std::to_string(stage);
    for (ctn_node v : fed) key += "|" + std::to_string(v) + shape_str(known.at(v).shape);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      if (cache_.size() >= kMaxCachedStages) cache_.clear();
      it = cache_.emplace(key, compile_stage(targets, fed, known)).first;
    }
    StagePlan &sp = it->second;
    std::vector<ctn_tensor> outs;
    outs.reserve(sp.targets.size());
    for (uint32_t i = 0; i < sp.targets.size(); ++i) {
      const ValueInfo &vi = sp.plan->output_info(i);
      outs.emplace_back(Tensor::empty(vi.dtype, vi.shape));
    }
    std::vector<ctn_tensor> in_vals;
    in_vals.reserve(fed.size());
    for (ctn_node v : fed) in_vals.emplace_back(known.at(v).contiguous());
    std::vector<const ctn_tensor *> in_ptrs;
    std::vector<ctn_tensor *> out_ptrs;
    for (ctn_tensor &t : in_vals) in_ptrs.push_back(&t);
    for (ctn_tensor &t : outs) out_ptrs.push_back(&t);
    sp.plan->run(static_cast<uint32_t>(fed.size()), sp.feed_ids.data(), in_ptrs.data(), static_cast<uint32_t>(outs.size()),
                 out_ptrs.data(), rc);
    for (size_t i = 0; i < sp.targets.size(); ++i) known.emplace(sp.targets[i], static_cast<Tensor &>(outs[i]));
  }

  // The known values the stage behind `targets` reads (its inputs), in node order.
  std::vector<ctn_node> inputs_of(const std::vector<ctn_node> &targets, const std::unordered_map<ctn_node, Tensor> &known) const {
    std::vector<char> need(g_.size(), 0);
    for (ctn_node t : targets) need[t] = 1;
    std::vector<ctn_node> fed;
    for (ctn_node v = static_cast<ctn_node>(g_.size()); v-- > 0;) {
      if (!need[v]) continue;
      if (known.count(v)) {
        fed.insert(fed.begin(), v);
        continue;
      }
      for (ctn_node x : g_.node(v).inputs) need[x] = 1;
    }
    return fed;
  }

  StagePlan compile_stage(const std::vector<ctn_node> &targets, const std::vector<ctn_node> &fed,
                          const std::unordered_map<ctn_node, Tensor> &known) const {
    Graph sg(g_.context(), false);
    std::unordered_map<ctn_node, ctn_node> map;
    StagePlan sp;
    sp.fed = fed;
    for (ctn_node v : fed) {
      const Tensor &t = known.at(v);
      map[v] = sg.add_input(g_.node(v).name.empty() ? ("value" + std::to_string(v)).c_str() : g_.node(v).name.c_str(),
                            t.dtype, t.shape);
      sp.feed_ids.push_back(map[v]);
    }
    std::vector<ctn_node> mapped;
    for (ctn_node t : targets) mapped.push_back(add_node(sg, t, map));
    sp.targets = targets;
    const ctn_compile_options *o = has_opts_ ? &opts_ : nullptr;
    sp.plan = std::make_unique<Plan>(sg, [&](Program &prog) {
      compile_program(sg, static_cast<uint32_t>(mapped.size()), mapped.data(), o, prog);
    });
    return sp;
  }

  // Adds node v (and what it reads) to the stage graph: known values are already its inputs,
  // constants and variables (their initial values) become constants, ops are re-inferred.
  ctn_node add_node(Graph &sg, ctn_node v, std::unordered_map<ctn_node, ctn_node> &map) const {
    if (auto it = map.find(v); it != map.end()) return it->second;
    const Node &n = g_.node(v);
    ctn_node r;
    if (n.kind == NodeKind::Constant || n.kind == NodeKind::Variable) {
      r = sg.add_constant(*n.value);
    } else {
      std::vector<ctn_node> in;
      for (ctn_node x : n.inputs) in.push_back(add_node(sg, x, map));
      ctn_attrs a = n.attrs;
      if (!in.empty()) adapt_target_shape(*n.op, g_.info(n.inputs[0]).shape, sg.info(in[0]).shape, a);
      try {
        r = sg.add_op(*n.op, static_cast<uint32_t>(in.size()), in.data(), a);
      } catch (const Error &e) {
        fail(e.code(), "staged plan: node %u (%s) does not take the actual shapes of the values before it (%s); an "
             "attribute fixed at build time from an upper bound?", v, n.op->name.c_str(), e.what());
      }
    }
    map[v] = r;
    return r;
  }

  void evaluate(ctn_node d, std::unordered_map<ctn_node, Tensor> &known) const {
    const Node &n = g_.node(d);
    std::vector<Tensor> vals;
    for (ctn_node x : n.inputs) vals.push_back(value_of(x, known).contiguous());
    std::vector<const Tensor *> in;
    for (const Tensor &t : vals) in.push_back(&t);
    known.emplace(d, n.op->evaluate(*n.op, in.data(), static_cast<uint32_t>(in.size()), n.attrs));
  }

  // The output takes the value: in place when the shape is the same, else a new storage.
  static void give(Tensor &out, const Tensor &v) {
    if (out.shape == v.shape && out.is_contiguous()) {
      if (v.nbytes()) std::memcpy(out.data(), v.contiguous().data(), v.nbytes());
      return;
    }
    out = v.contiguous();
  }
};

}  // namespace

bool needs_stages(const Graph &g, uint32_t n_out, const ctn_node *outs) {
  std::vector<char> need(g.size(), 0);
  for (uint32_t i = 0; i < n_out; ++i)
    if (outs && outs[i] < g.size()) need[outs[i]] = 1;
  for (ctn_node v = static_cast<ctn_node>(g.size()); v-- > 0;) {
    const Node &n = g.node(v);
    if (n.kind == NodeKind::Assign) need[v] = 1;
    if (!need[v]) continue;
    if (n.kind == NodeKind::Op && (n.op->flags & OP_DATA_DEPENDENT)) return true;
    for (ctn_node x : n.inputs) need[x] = 1;
  }
  return false;
}

std::unique_ptr<StagedRun> make_staged_run(const Graph &user, uint32_t n_out, const ctn_node *outs,
                                           const ctn_compile_options *opts) {
  if (n_out && !outs) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_compile: outputs is NULL");
  if (opts && opts->data_parallel)
    fail(CTN_ERR_UNSUPPORTED, "ctn_plan_compile: a plan over data-dependent shapes (nonzero, unique, ...) cannot be "
         "data-parallel");
  for (const Node &n : user.nodes())
    if (n.kind == NodeKind::Assign)
      fail(CTN_ERR_UNSUPPORTED, "ctn_plan_compile: a plan over data-dependent shapes (nonzero, unique, ...) cannot "
           "assign variables (training through them is not supported)");
  return std::make_unique<Staged>(user, n_out, outs, opts);
}

}  // namespace ctn
