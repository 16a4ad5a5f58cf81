// Compile: copy the graph, run the passes, place every node on a backend, insert transfers at
// device boundaries, plan memory, prepare kernels. Run: feed, call kernels in order, fetch.
#include "exec/plan.h"

#include <chutney/ops.h>

#include "exec/select.h"
#include "passes/passes.h"
#include "planner/planner.h"
#include "util/status.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

namespace ctn {

namespace {

bool inplace_candidate(const Node &nd, const ctn_kernel &k, const Graph &g) {
  if (!(k.flags & CTN_KERNEL_INPLACE_OK) || nd.inputs.empty()) return false;
  const ValueInfo &a = g.info(nd.inputs[0]);
  return a.dtype == nd.info.dtype && a.shape == nd.info.shape;
}

}  // namespace

Plan::Plan(Graph &user, uint32_t n_out, const ctn_node *outs, const ctn_compile_options *opts) : ctx_(user.context()) {
  if (user.eager()) fail(CTN_ERR_STATE, "ctn_plan_compile: the graph is eager; create it with flags 0 to compile it");
  if (n_out && !outs) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_compile: outputs is NULL");
  for (uint32_t i = 0; i < n_out; ++i) user.check(outs[i], "ctn_plan_compile");
  const uint32_t disable = opts ? opts->disable : 0;
  std::vector<Backend *> prefs = opts && opts->backends ? ctx_->parse_preference(opts->backends) : ctx_->preferred();
  if (prefs.empty()) fail(CTN_ERR_UNAVAILABLE, "ctn_plan_compile: no backend is available in this context");

  Graph g(ctx_, false);
  g.copy_nodes_from(user);
  std::vector<ctn_node> roots(outs, outs + n_out);
  const size_t n_user_outputs = roots.size();
  for (size_t v = 0; v < g.size(); ++v)
    if (g.node(static_cast<ctn_node>(v)).kind == NodeKind::Assign) roots.push_back(static_cast<ctn_node>(v));

  // --- passes ---
  PassStats ps;
  Rewriter rw(g);
  Backend *host = nullptr;
  for (auto &b : ctx_->backends)
    if (b->available && b->host_memory() && !host) host = b.get();
  simplify_and_fold(rw, !(disable & CTN_PASS_SIMPLIFY), !(disable & CTN_PASS_CONSTANT_FOLDING), host, ps);
  rw.resolve_all(roots);
  if (!(disable & CTN_PASS_FUSION)) fuse_matmul_bias_act(rw, roots, prefs[0], ps);
  std::vector<ctn_node> order = (disable & CTN_PASS_DCE) ? std::vector<ctn_node>() : schedule(g, roots);
  if (!(disable & CTN_PASS_DCE)) {
    // Every reader of an assigned variable is scheduled before the assignments' value
    // computations (forward and backward before the optimizer step), so those can write
    // straight into the variables' storage (see "assign elision" below).
    std::vector<char> assigned(g.size(), 0), assign_value(g.size(), 0);
    for (ctn_node v : order)
      if (g.node(v).kind == NodeKind::Assign) {
        assigned[g.node(v).inputs[0]] = 1;
        assign_value[g.node(v).inputs[1]] = 1;
      }
    std::vector<ctn_node> early(roots.begin(), roots.begin() + static_cast<std::ptrdiff_t>(n_user_outputs));
    for (ctn_node v : order) {
      const Node &nd = g.node(v);
      if (nd.kind != NodeKind::Op || assign_value[v]) continue;
      for (ctn_node in : nd.inputs)
        if (assigned[in]) {
          early.push_back(v);
          break;
        }
    }
    early.insert(early.end(), roots.begin() + static_cast<std::ptrdiff_t>(n_user_outputs), roots.end());
    order = schedule(g, early);
  }
  if (disable & CTN_PASS_DCE) {
    std::vector<ctn_node> all;
    for (size_t v = 0; v < g.size(); ++v) {
      const Node &nd = g.node(static_cast<ctn_node>(v));
      if (rw.resolve(static_cast<ctn_node>(v)) == v && nd.kind != NodeKind::Constant) all.push_back(static_cast<ctn_node>(v));
    }
    all.insert(all.end(), roots.begin(), roots.end());
    order = schedule(g, all);
  }
  // Assignments run last, so that every read of a variable in a run sees its old value.
  std::stable_partition(order.begin(), order.end(),
                        [&](ctn_node v) { return g.node(v).kind != NodeKind::Assign; });

  // --- placement ---
  std::vector<Backend *> dev(g.size(), nullptr);
  std::vector<ctn_kernel> kern(g.size());
  for (ctn_node v : order) {
    const Node &nd = g.node(v);
    if (nd.kind == NodeKind::Op) {
      if ((nd.op->flags & OP_VIEW_RESHAPE)) {
        dev[v] = dev[nd.inputs[0]];
        continue;
      }
      std::vector<ctn_tensor_desc> in;
      for (ctn_node i : nd.inputs) in.push_back(make_desc(g.info(i)));
      ctn_tensor_desc od = make_desc(nd.info);
      std::string reasons;
      for (Backend *b : prefs) {
        std::string why;
        if (select_kernel(*b, *nd.op, static_cast<uint32_t>(in.size()), in.data(), od, nd.attrs, &kern[v], &why)) {
          dev[v] = b;
          break;
        }
        reasons += (reasons.empty() ? "" : "; ") + b->name + ": " + why;
      }
      if (!dev[v]) {
        std::vector<ValueInfo> vi;
        for (ctn_node i : nd.inputs) vi.push_back(g.info(i));
        fail(CTN_ERR_UNSUPPORTED, "%s(%s): no backend can run it (%s)", nd.op->name.c_str(),
             values_str(vi.data(), static_cast<uint32_t>(vi.size())).c_str(), reasons.c_str());
      }
    } else if (nd.kind == NodeKind::Assign) {
      dev[v] = dev[nd.inputs[0]];
    }
    // Leaves live where their first consumer runs.
    for (ctn_node i : nd.inputs)
      if (!dev[i]) dev[i] = dev[v] ? dev[v] : prefs[0];
    if (!dev[v]) dev[v] = prefs[0];
  }
  for (ctn_node v : order)
    if (!dev[v]) dev[v] = prefs[0];

  // --- assign elision: an assignment's value is computed directly into the variable ---
  // Legal when the value is an op with no other consumer, on the variable's device, that reads
  // the variable only as input 0 through an in-place-capable kernel (or not at all), and every
  // other reader of the variable runs before it.
  std::vector<char> elided(g.size(), 0);
  std::unordered_map<ctn_node, ctn_node> write_into;  // value node -> variable node
  if (!(disable & CTN_PASS_MEMORY_REUSE)) {
    std::vector<uint32_t> consumers(g.size(), 0), pos(g.size(), 0), assigns_of(g.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) {
      pos[order[i]] = static_cast<uint32_t>(i);
      for (ctn_node in : g.node(order[i]).inputs) ++consumers[in];
      if (g.node(order[i]).kind == NodeKind::Assign) ++assigns_of[g.node(order[i]).inputs[0]];
    }
    for (size_t i = 0; i < n_user_outputs; ++i) ++consumers[roots[i]];
    for (ctn_node a : order) {
      const Node &an = g.node(a);
      if (an.kind != NodeKind::Assign) continue;
      const ctn_node var = an.inputs[0], x = an.inputs[1];
      const Node &xn = g.node(x);
      if (xn.kind != NodeKind::Op || (xn.op->flags & OP_VIEW_RESHAPE) || consumers[x] != 1 || assigns_of[var] != 1 ||
          dev[x] != dev[var] || write_into.count(x))
        continue;
      bool ok = true;
      for (size_t k = 0; k < xn.inputs.size(); ++k)
        if (xn.inputs[k] == var && (k != 0 || !(kern[x].flags & CTN_KERNEL_INPLACE_OK))) ok = false;
      for (ctn_node r : order) {
        if (!ok) break;
        if (r == x || r == a) continue;
        const Node &rn = g.node(r);
        for (ctn_node in : rn.inputs)
          if (in == var && (pos[r] > pos[x] || (rn.kind == NodeKind::Op && (rn.op->flags & OP_VIEW_RESHAPE)))) ok = false;
      }
      if (!ok) continue;
      elided[a] = 1;
      write_into[x] = var;
    }
  }

  // --- values, transfers and the step list (planner view) ---
  std::map<std::pair<ctn_node, Backend *>, int> value_of;
  std::vector<PlanValue> pv;
  auto device_index = [&](Backend *b) {
    auto it = std::find(devices_.begin(), devices_.end(), b);
    if (it != devices_.end()) return static_cast<int>(it - devices_.begin());
    devices_.push_back(b);
    return static_cast<int>(devices_.size() - 1);
  };
  auto new_value = [&](const ValueInfo &info, Backend *b, bool persistent, int alias) {
    Value val;
    val.dev = b;
    val.info = info;
    val.bytes = static_cast<uint64_t>(info.shape.numel()) * dtype_size(info.dtype);
    values_.push_back(val);
    PlanValue p;
    p.bytes = val.bytes;
    p.device = device_index(b);
    p.persistent = persistent;
    p.alias_of = alias;
    pv.push_back(p);
    return static_cast<int>(values_.size() - 1);
  };
  struct Pending {
    ctn_node node;  // CTN_NODE_NONE for transfers
    int src = -1;
  };
  std::vector<PlanStep> psteps;
  std::vector<Pending> pend;
  std::vector<std::vector<int>> step_inputs;
  // Value of node v as seen on device b (inserting a transfer when it lives elsewhere).
  auto value_on = [&](ctn_node v, Backend *b) {
    auto it = value_of.find({v, b});
    if (it != value_of.end()) return it->second;
    int src = value_of.at({v, dev[v]});
    int m = new_value(g.info(v), b, false, -1);
    value_of[{v, b}] = m;
    psteps.push_back(PlanStep{{src}, m, false});
    pend.push_back(Pending{CTN_NODE_NONE, src});
    return m;
  };
  for (ctn_node v : order) {
    const Node &nd = g.node(v);
    switch (nd.kind) {
      case NodeKind::Input:
      case NodeKind::Constant:
      case NodeKind::Variable: {
        int id = new_value(nd.info, dev[v], true, -1);
        value_of[{v, dev[v]}] = id;
        if (nd.kind == NodeKind::Input) feeds_.push_back(Feed{v, id, nd.name});
        if (nd.kind == NodeKind::Variable) variables_[v] = id;
        break;
      }
      case NodeKind::Op: {
        if (nd.op->flags & OP_VIEW_RESHAPE) {
          int src = value_of.at({nd.inputs[0], dev[nd.inputs[0]]});
          value_of[{v, dev[v]}] = new_value(nd.info, dev[v], false, src);
          break;
        }
        PlanStep ps_;
        for (ctn_node i : nd.inputs) ps_.inputs.push_back(value_on(i, dev[v]));
        auto target = write_into.find(v);
        if (target != write_into.end()) {
          // Elided assignment: the output is the variable's own storage.
          ps_.output = new_value(nd.info, dev[v], false, value_of.at({target->second, dev[target->second]}));
        } else {
          ps_.output = new_value(nd.info, dev[v], false, -1);
          ps_.inplace_ok = !(disable & CTN_PASS_MEMORY_REUSE) && inplace_candidate(nd, kern[v], g);
        }
        value_of[{v, dev[v]}] = ps_.output;
        psteps.push_back(ps_);
        pend.push_back(Pending{v, -1});
        break;
      }
      case NodeKind::Assign: {
        int var = value_of.at({nd.inputs[0], dev[nd.inputs[0]]});
        Backend *b = dev[nd.inputs[0]];
        if (elided[v]) {  // the value was computed in place: nothing left to copy
          value_of[{v, b}] = new_value(nd.info, b, false, var);
          ++stats_.n_assign_elided;
          break;
        }
        // A copy kernel on the variable's device writes the new value into its storage.
        ctn_tensor_desc d = make_desc(nd.info);
        std::string why;
        if (!select_kernel(*b, *ctx_->find_op(CTN_OP_COPY), 1, &d, d, ctn_attrs{}, &kern[v], &why))
          fail(CTN_ERR_UNSUPPORTED, "ctn_assign: backend %s cannot copy %s%s (%s)", b->name.c_str(),
               dtype_name(nd.info.dtype), shape_str(nd.info.shape).c_str(), why.c_str());
        PlanStep ps_;
        ps_.inputs.push_back(value_on(nd.inputs[1], b));
        ps_.output = var;
        value_of[{v, b}] = new_value(nd.info, b, false, var);
        psteps.push_back(ps_);
        pend.push_back(Pending{v, -1});
        break;
      }
    }
  }
  for (size_t i = 0; i < n_user_outputs; ++i) {
    int id = value_of.at({roots[i], dev[roots[i]]});
    outputs_.push_back(id);
    pv[static_cast<size_t>(id)].is_output = true;
  }

  // --- memory ---
  MemoryPlan mp = plan_memory(pv, psteps, static_cast<int>(devices_.size()), !(disable & CTN_PASS_MEMORY_REUSE));
  std::vector<void *> arena(devices_.size(), nullptr);
  for (size_t d = 0; d < devices_.size(); ++d) {
    arena[d] = devices_[d]->alloc(mp.arena_bytes[d]);
    buffers_.push_back({devices_[d], arena[d]});
  }
  uint64_t persistent = 0;
  for (size_t i = 0; i < values_.size(); ++i) {
    Value &val = values_[i];
    if (pv[i].alias_of >= 0) continue;
    if (pv[i].persistent) {
      val.handle = val.dev->alloc(val.bytes);
      buffers_.push_back({val.dev, val.handle});
      persistent += val.bytes;
    } else {
      val.handle = arena[static_cast<size_t>(pv[i].device)];
      val.offset = mp.offset[i];
    }
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    int r = static_cast<int>(i);
    while (pv[static_cast<size_t>(r)].alias_of >= 0) r = pv[static_cast<size_t>(r)].alias_of;
    values_[i].handle = values_[static_cast<size_t>(r)].handle;
    values_[i].offset = values_[static_cast<size_t>(r)].offset;
  }
  // Constants and variables' initial values.
  for (ctn_node v : order) {
    const Node &nd = g.node(v);
    if ((nd.kind == NodeKind::Constant || nd.kind == NodeKind::Variable) && nd.value) {
      const Value &val = values_[static_cast<size_t>(value_of.at({v, dev[v]}))];
      val.dev->upload(val.handle, val.offset, nd.value->data(), val.bytes);
    }
  }

  // --- steps ---
  size_t total_in = 0;
  for (auto &s : psteps) total_in += s.inputs.size();
  in_descs_.reserve(total_in);
  uint64_t staging = 0;
  std::vector<uint64_t> workspace(devices_.size(), 0);
  for (size_t si = 0; si < psteps.size(); ++si) {
    Step st;
    const PlanStep &p = psteps[si];
    auto desc_of = [&](int id) {
      const Value &val = values_[static_cast<size_t>(id)];
      ctn_tensor_desc d = make_desc(val.info);
      d.data = val.handle;
      d.offset = val.offset;
      return d;
    };
    st.out = desc_of(p.output);
    st.in_first = in_descs_.size();
    st.n_in = static_cast<uint32_t>(p.inputs.size());
    for (int id : p.inputs) in_descs_.push_back(desc_of(id));
    if (pend[si].node == CTN_NODE_NONE) {
      st.transfer = true;
      st.src = p.inputs[0];
      st.dst = p.output;
      st.b = values_[static_cast<size_t>(p.output)].dev;
      st.op = "transfer";
      staging = std::max(staging, values_[static_cast<size_t>(p.output)].bytes);
    } else {
      ctn_node v = pend[si].node;
      const Node &nd = g.node(v);
      st.b = values_[static_cast<size_t>(p.output)].dev;
      st.kernel = kern[v];
      kern[v] = ctn_kernel{};
      st.op = nd.kind == NodeKind::Assign ? "assign" : nd.op->name;
      size_t d = static_cast<size_t>(device_index(st.b));
      workspace[d] = std::max(workspace[d], st.kernel.workspace_size);
    }
    steps_.push_back(std::move(st));
  }
  // Attributes must outlive the private graph: keep copies next to the steps.
  attrs_.resize(steps_.size());
  for (size_t si = 0; si < steps_.size(); ++si) {
    Step &st = steps_[si];
    ctn_node v = pend[si].node;
    if (v != CTN_NODE_NONE && g.node(v).kind == NodeKind::Op) attrs_[si] = g.node(v).attrs;
    st.args.attrs = &attrs_[si];
    st.args.n_inputs = st.n_in;
    st.args.n_outputs = 1;
    st.args.inputs = in_descs_.data() + st.in_first;
    st.args.outputs = &st.out;
  }
  workspace_.resize(devices_.size(), nullptr);
  for (size_t d = 0; d < devices_.size(); ++d)
    if (workspace[d]) {
      workspace_[d] = devices_[d]->alloc(workspace[d]);
      buffers_.push_back({devices_[d], workspace_[d]});
    }
  for (Step &st : steps_) {
    if (st.transfer || !st.kernel.workspace_size) continue;
    st.args.workspace = workspace_[static_cast<size_t>(device_index(st.b))];
    st.args.workspace_size = st.kernel.workspace_size;
  }
  staging_.resize(staging);
  fed_.assign(feeds_.size(), nullptr);

  // Segments: consecutive kernel steps on a backend that records plans go to it as one unit.
  calls_.reserve(steps_.size());
  for (size_t si = 0; si < steps_.size();) {
    Segment seg;
    seg.first = si;
    seg.b = steps_[si].b;
    const bool records = !steps_[si].transfer && seg.b->desc.plan_prepare && seg.b->desc.plan_run &&
                         seg.b->desc.plan_release;
    size_t end = si + 1;
    if (records)
      while (end < steps_.size() && !steps_[end].transfer && steps_[end].b == seg.b) ++end;
    seg.count = end - si;
    if (records) {
      size_t c0 = calls_.size();
      for (size_t k = si; k < end; ++k) calls_.push_back(ctn_plan_call{&steps_[k].kernel, &steps_[k].args});
      Backend::Serial serial(*seg.b);
      take_plugin_error();
      CTN_CHECK_PLUGIN(seg.b->desc.plan_prepare(seg.b->state, static_cast<uint32_t>(seg.count), calls_.data() + c0,
                                                &seg.handle),
                       "backend " + seg.b->name + ": plan_prepare");
    }
    segments_.push_back(seg);
    si = end;
  }
  for (size_t v = 0; v < kern.size(); ++v)
    if (kern[v].state) dev[v]->release(kern[v]);

  // --- report ---
  stats_.struct_size = sizeof stats_;
  stats_.n_nodes = static_cast<uint32_t>(user.size());
  stats_.n_steps = static_cast<uint32_t>(steps_.size());
  stats_.n_fused = ps.fused;
  stats_.n_folded = ps.folded;
  stats_.n_inplace = mp.n_inplace;
  stats_.planned_peak_bytes = mp.peak_bytes;
  stats_.naive_bytes = mp.naive_bytes;
  stats_.persistent_bytes = persistent;
  if (const char *pe = std::getenv("CHUTNEY_PROFILE"); pe && *pe && std::strcmp(pe, "0") != 0) {
    profile_ = true;
    profile_steps_ = std::strcmp(pe, "steps") == 0;
    profile_ns_.assign(steps_.size(), 0.0);
  }
  describe_ = format("plan: %zu steps, planned peak %llu bytes (naive %llu), persistent %llu bytes\n", steps_.size(),
                     static_cast<unsigned long long>(mp.peak_bytes), static_cast<unsigned long long>(mp.naive_bytes),
                     static_cast<unsigned long long>(persistent));
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step &st = steps_[si];
    describe_ += format("%4zu  %-18s %-7s %s%s @%llu%s\n", si, st.op.c_str(), st.b->name.c_str(),
                        dtype_name(st.out.dtype), shape_str(values_[static_cast<size_t>(psteps[si].output)].info.shape).c_str(),
                        static_cast<unsigned long long>(st.out.offset), mp.inplace[si] ? " (in place)" : "");
  }
}

void Plan::profile_report() const {
  if (!profile_runs_) return;
  double total = 0;
  for (double v : profile_ns_) total += v;
  struct Row {
    std::string key;
    double ns = 0;
    uint32_t steps = 0;
  };
  std::vector<Row> rows;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step &st = steps_[k];
    std::string key = (st.transfer ? std::string("transfer") : st.op) + " @" + (st.b ? st.b->name : "-");
    if (profile_steps_) {
      key += " [";
      for (uint32_t d = 0; d < st.out.ndim; ++d) key += (d ? "," : "") + std::to_string(st.out.shape[d]);
      key += "]";
    }
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row &r) { return r.key == key; });
    if (it == rows.end()) it = rows.insert(rows.end(), Row{key});
    it->ns += profile_ns_[k];
    ++it->steps;
  }
  std::sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.ns > b.ns; });
  std::fprintf(stderr, "chutney profile: %zu steps, %llu runs, %.3f ms per run\n", steps_.size(),
               static_cast<unsigned long long>(profile_runs_), total / 1e6 / static_cast<double>(profile_runs_));
  std::fprintf(stderr, "  %-48s %6s %12s %7s\n", "op @backend", "steps", "ms/run", "share");
  for (const Row &r : rows)
    std::fprintf(stderr, "  %-48s %6u %12.4f %6.1f%%\n", r.key.c_str(), r.steps,
                 r.ns / 1e6 / static_cast<double>(profile_runs_), total > 0 ? 100.0 * r.ns / total : 0.0);
}

Plan::~Plan() {
  try {
    profile_report();
  } catch (...) {
  }
  for (Segment &seg : segments_)
    if (seg.handle) {
      try {
        Backend::Serial serial(*seg.b);
        seg.b->desc.plan_release(seg.b->state, seg.handle);
      } catch (...) {
      }
    }
  for (Step &st : steps_)
    if (st.b) st.b->release(st.kernel);
  for (auto &[b, h] : buffers_) b->free(h);
}

void Plan::run(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_out,
               ctn_tensor *const *outputs) {
  // Every argument is checked before anything is uploaded or run: a call that fails leaves the
  // variables (and every other buffer of the plan) as they were.
  if (n_feeds && (!feed_nodes || !feed_values)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed arrays are NULL");
  if (n_out && !outputs) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: outputs is NULL");
  if (n_out > outputs_.size())
    fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: %u outputs requested, the plan has %zu", n_out, outputs_.size());
  for (uint32_t i = 0; i < n_out; ++i) {
    const Tensor *t = reinterpret_cast<const Tensor *>(outputs[i]);
    if (!t) continue;
    const ValueInfo &info = values_[static_cast<size_t>(outputs_[i])].info;
    if (t->dtype != info.dtype || t->shape != info.shape || !t->is_contiguous())
      fail(CTN_ERR_SHAPE, "ctn_plan_run: output %u is %s%s; the tensor given is %s%s%s (create it with "
           "ctn_plan_output_create)", i, dtype_name(info.dtype), shape_str(info.shape).c_str(),
           dtype_name(t->dtype), shape_str(t->shape).c_str(), t->is_contiguous() ? "" : " non-contiguous");
  }
  std::fill(fed_.begin(), fed_.end(), nullptr);
  for (uint32_t i = 0; i < n_feeds; ++i) {
    size_t k = 0;
    while (k < feeds_.size() && feeds_[k].node != feed_nodes[i]) ++k;
    if (k == feeds_.size()) continue;  // an input the outputs do not need: ignored
    const Tensor *t = reinterpret_cast<const Tensor *>(feed_values[i]);
    if (!t) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed for input \"%s\" is NULL", feeds_[k].name.c_str());
    const Value &val = values_[static_cast<size_t>(feeds_[k].value)];
    if (t->dtype != val.info.dtype)
      fail(CTN_ERR_DTYPE, "ctn_plan_run: input \"%s\" expects %s, the feed is %s", feeds_[k].name.c_str(),
           dtype_name(val.info.dtype), dtype_name(t->dtype));
    if (t->shape != val.info.shape)
      fail(CTN_ERR_SHAPE, "ctn_plan_run: input \"%s\" expects shape %s, the feed is %s", feeds_[k].name.c_str(),
           shape_str(val.info.shape).c_str(), shape_str(t->shape).c_str());
    if (!t->is_contiguous())
      fail(CTN_ERR_STATE, "ctn_plan_run: the feed for \"%s\" is not contiguous (use ctn_tensor_contiguous)",
           feeds_[k].name.c_str());
    fed_[k] = t;
  }
  for (size_t k = 0; k < feeds_.size(); ++k)
    if (!fed_[k]) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: input \"%s\" (node %u) was not fed", feeds_[k].name.c_str(), feeds_[k].node);
  for (size_t k = 0; k < feeds_.size(); ++k) {
    const Value &val = values_[static_cast<size_t>(feeds_[k].value)];
    val.dev->upload(val.handle, val.offset, fed_[k]->data(), val.bytes);
  }
  if (profile_) ++profile_runs_;
  for (const Segment &seg : segments_) {
    if (seg.handle) {
      take_plugin_error();
      ctn_status s;
      try {
        Backend::Serial serial(*seg.b);
        s = seg.b->desc.plan_run(seg.b->state, seg.handle);
      } catch (...) {
        fail(CTN_ERR_PLUGIN, "backend %s: plan_run threw", seg.b->name.c_str());
      }
      if (s != CTN_OK) {
        std::string m = take_plugin_error();
        fail(s, "backend %s: running steps %zu..%zu: %s", seg.b->name.c_str(), seg.first, seg.first + seg.count - 1,
             m.empty() ? status_name(s) : m.c_str());
      }
      continue;
    }
    for (size_t k = seg.first; k < seg.first + seg.count; ++k) {
      const Step &st = steps_[k];
      const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      struct Stamp {  // adds the step's time on every exit from this iteration
        Plan *p;
        size_t k;
        std::chrono::steady_clock::time_point t0;
        ~Stamp() {
          if (!p->profile_) return;
          for (Backend *b : p->devices_) b->sync();
          p->profile_ns_[k] += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        }
      } stamp{this, k, t0};
      if (st.transfer) {
        const Value &s = values_[static_cast<size_t>(st.src)], &d = values_[static_cast<size_t>(st.dst)];
        s.dev->sync();
        s.dev->download(s.handle, s.offset, staging_.data(), s.bytes);
        d.dev->upload(d.handle, d.offset, staging_.data(), d.bytes);
        continue;
      }
      call_kernel(st.kernel, st.args, st.op.c_str(), *st.b);
    }
  }
  for (Backend *b : devices_) b->sync();
  for (uint32_t i = 0; i < n_out; ++i) {
    Tensor *t = reinterpret_cast<Tensor *>(outputs[i]);
    if (!t) continue;  // checked above
    const Value &val = values_[static_cast<size_t>(outputs_[i])];
    val.dev->download(val.handle, val.offset, t->data(), val.bytes);
  }
}

const ValueInfo &Plan::output_info(uint32_t i) const {
  if (i >= outputs_.size())
    fail(CTN_ERR_INVALID_ARGUMENT, "output index %u is out of range (the plan has %zu outputs)", i, outputs_.size());
  return values_[static_cast<size_t>(outputs_[i])].info;
}

Tensor Plan::read_variable(ctn_node var) const {
  auto it = variables_.find(var);
  if (it == variables_.end()) fail(CTN_ERR_INVALID_ARGUMENT, "node %u is not a variable used by this plan", var);
  const Value &val = values_[static_cast<size_t>(it->second)];
  Tensor t = Tensor::empty(val.info.dtype, val.info.shape);
  val.dev->download(val.handle, val.offset, t.data(), val.bytes);
  return t;
}

void Plan::write_variable(ctn_node var, const Tensor &t) {
  auto it = variables_.find(var);
  if (it == variables_.end()) fail(CTN_ERR_INVALID_ARGUMENT, "node %u is not a variable used by this plan", var);
  const Value &val = values_[static_cast<size_t>(it->second)];
  if (t.dtype != val.info.dtype || t.shape != val.info.shape)
    fail(CTN_ERR_SHAPE, "variable %u is %s%s, the value is %s%s", var, dtype_name(val.info.dtype),
         shape_str(val.info.shape).c_str(), dtype_name(t.dtype), shape_str(t.shape).c_str());
  Tensor c = t.contiguous();
  val.dev->upload(val.handle, val.offset, c.data(), val.bytes);
}

uint32_t Plan::backend_steps(const char *backend, const char *op) const {
  uint32_t n = 0;
  for (const Step &st : steps_)
    if (st.b->name == backend && (!op || st.op == op)) ++n;
  return n;
}

}  // namespace ctn
