// ctn_plan_run, and the plan around the Program that compiling built (compile/compile.h: the
// stages, and their order in kStages of compile/pipeline.cpp).
//
// Running: check every argument, upload the feeds, call each step (or segment) in order,
// synchronise, download the outputs.
#include "exec/plan.h"

#include "exec/select.h"
#include "util/status.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ctn {

namespace {

// The first step whose output (a kernel's, or a transfer's destination) overlaps a variable's
// memory; the step count when none does (an inference plan).
size_t first_variable_write(const Program &prog) {
  auto writes_variable = [&](const void *handle, uint64_t offset, uint64_t bytes) {
    for (const auto &kv : prog.variables) {
      const Program::Value &v = prog.values[static_cast<size_t>(kv.second)];
      if (v.handle == handle && offset < v.offset + v.bytes && v.offset < offset + bytes) return true;
    }
    return false;
  };
  for (size_t k = 0; k < prog.steps.size(); ++k) {
    const Program::Step &st = prog.steps[k];
    if (st.transfer) {
      const Program::Value &d = prog.values[static_cast<size_t>(st.dst)];
      if (writes_variable(d.handle, d.offset, d.bytes)) return k;
    } else {
      uint64_t n = 1;
      for (uint32_t i = 0; i < st.out.ndim; ++i) n *= static_cast<uint64_t>(st.out.shape[i]);
      if (writes_variable(st.out.data, st.out.offset, std::max<uint64_t>(n, 1) * dtype_size(static_cast<ctn_dtype>(st.out.dtype))))
        return k;
    }
  }
  return prog.steps.size();
}

}  // namespace

Plan::Plan(const Graph &user, const ProgramBuilder &build) {
  build(prog_);
  fed_.assign(prog_.feeds.size(), nullptr);
  user_nodes_ = static_cast<uint32_t>(user.size());
  user_kinds_.reserve(user_nodes_);
  for (uint32_t v = 0; v < user_nodes_; ++v) user_kinds_.push_back(user.node(v).kind);
  commit_step_ = first_variable_write(prog_);
  if (const char *pe = std::getenv("CHUTNEY_PROFILE"); pe && *pe && std::strcmp(pe, "0") != 0) {
    profile_ = true;
    profile_steps_ = std::strcmp(pe, "steps") == 0;
    profile_ns_.assign(prog_.steps.size(), 0.0);
  }
}

int Program::device_index(Backend *b) {
  auto it = std::find(devices.begin(), devices.end(), b);
  if (it != devices.end()) return static_cast<int>(it - devices.begin());
  devices.push_back(b);
  return static_cast<int>(devices.size() - 1);
}

Program::~Program() {
  for (Segment &seg : segments)
    if (seg.handle) {
      try {
        Backend::Serial serial(*seg.b);
        seg.b->desc.plan_release(seg.b->state, seg.handle);
      } catch (...) {
      }
    }
  for (Step &st : steps)
    if (st.b) st.b->release(st.kernel);
  for (auto &[b, h] : buffers) b->free(h);
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
  for (size_t k = 0; k < prog_.steps.size(); ++k) {
    const Program::Step &st = prog_.steps[k];
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
  std::fprintf(stderr, "chutney profile: %zu steps, %llu runs, %.3f ms per run\n", prog_.steps.size(),
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
  // prog_ releases segments, kernels and buffers.
}

// Every argument is checked before anything is uploaded or run: a call that fails leaves the
// variables (and every other buffer of the plan) as they were.
void Plan::check_args(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_out,
                      ctn_tensor *const *outputs) {
  if (n_feeds && (!feed_nodes || !feed_values)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed arrays are NULL");
  if (n_out && !outputs) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: outputs is NULL");
  if (n_out > prog_.outputs.size())
    fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: %u outputs requested, the plan has %zu", n_out, prog_.outputs.size());
  for (uint32_t i = 0; i < n_out; ++i) {
    const Tensor *t = reinterpret_cast<const Tensor *>(outputs[i]);
    if (!t) continue;
    const ValueInfo &info = prog_.values[static_cast<size_t>(prog_.outputs[i])].info;
    if (t->dtype != info.dtype || t->shape != info.shape || !t->is_contiguous())
      fail(CTN_ERR_SHAPE, "ctn_plan_run: output %u is %s%s; the tensor given is %s%s%s (create it with "
           "ctn_plan_output_create)", i, dtype_name(info.dtype), shape_str(info.shape).c_str(),
           dtype_name(t->dtype), shape_str(t->shape).c_str(), t->is_contiguous() ? "" : " non-contiguous");
  }
  std::fill(fed_.begin(), fed_.end(), nullptr);
  static const char *const kKindNames[] = {"an input", "a constant", "a variable", "an op", "an assignment"};
  for (uint32_t i = 0; i < n_feeds; ++i) {
    const ctn_node node = feed_nodes[i];
    size_t k = 0;
    while (k < prog_.feeds.size() && prog_.feeds[k].node != node) ++k;
    if (k == prog_.feeds.size()) {
      // Not needed by these outputs: fine for an input of the graph (one feed list may serve a
      // training and an evaluation plan), a mistake for anything else.
      if (node >= user_nodes_)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed %u names node %u, which is not a node of the graph this plan "
             "was compiled from (it has %u nodes)", i, node, user_nodes_);
      if (user_kinds_[node] != NodeKind::Input)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed %u names node %u, which is %s, not a ctn_input", i, node,
             kKindNames[static_cast<int>(user_kinds_[node])]);
      for (uint32_t j = 0; j < i; ++j)
        if (feed_nodes[j] == node) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: input node %u is fed twice (feeds %u and %u)", node, j, i);
      continue;
    }
    if (fed_[k])
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: input \"%s\" (node %u) is fed twice", prog_.feeds[k].name.c_str(), node);
    const Tensor *t = reinterpret_cast<const Tensor *>(feed_values[i]);
    if (!t) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: feed for input \"%s\" is NULL", prog_.feeds[k].name.c_str());
    const Program::Value &val = prog_.values[static_cast<size_t>(prog_.feeds[k].value)];
    if (t->dtype != val.info.dtype)
      fail(CTN_ERR_DTYPE, "ctn_plan_run: input \"%s\" expects %s, the feed is %s", prog_.feeds[k].name.c_str(),
           dtype_name(val.info.dtype), dtype_name(t->dtype));
    if (t->shape != val.info.shape)
      fail(CTN_ERR_SHAPE, "ctn_plan_run: input \"%s\" expects shape %s, the feed is %s", prog_.feeds[k].name.c_str(),
           shape_str(val.info.shape).c_str(), shape_str(t->shape).c_str());
    if (!t->is_contiguous())
      fail(CTN_ERR_STATE, "ctn_plan_run: the feed for \"%s\" is not contiguous (use ctn_tensor_contiguous)",
           prog_.feeds[k].name.c_str());
    fed_[k] = t;
  }
  for (size_t k = 0; k < prog_.feeds.size(); ++k)
    if (!fed_[k]) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run: input \"%s\" (node %u) was not fed", prog_.feeds[k].name.c_str(), prog_.feeds[k].node);
}

void Plan::stop_if_asked(const RunControl &rc, size_t step) const {
  if (step >= commit_step_) return;  // variables are being written: the run completes
  if (rc.cancel && rc.cancel->load(std::memory_order_relaxed))
    fail(CTN_ERR_CANCELLED, "ctn_plan_run: cancelled (ctn_cancel_request) before step %zu of %zu; the variables are "
         "unchanged", step, prog_.steps.size());
  if (rc.has_deadline && std::chrono::steady_clock::now() > rc.deadline)
    fail(CTN_ERR_CANCELLED, "ctn_plan_run: the run passed its deadline (timeout_us %llu) before step %zu of %zu; the "
         "variables are unchanged", static_cast<unsigned long long>(rc.timeout_us), step, prog_.steps.size());
}

void Plan::run(uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_out,
               ctn_tensor *const *outputs, const RunControl *rc) {
  if (staged_) return staged_->run(n_feeds, feed_nodes, feed_values, n_out, outputs, rc);
  check_args(n_feeds, feed_nodes, feed_values, n_out, outputs);
  if (rc) stop_if_asked(*rc, 0);
  for (size_t k = 0; k < prog_.feeds.size(); ++k) {
    const Program::Value &val = prog_.values[static_cast<size_t>(prog_.feeds[k].value)];
    val.dev->upload(val.handle, val.offset, fed_[k]->data(), val.bytes);
  }
  if (profile_) ++profile_runs_;
  run_steps(rc);
  for (Backend *b : prog_.devices) b->sync();
  for (uint32_t i = 0; i < n_out; ++i) {
    Tensor *t = reinterpret_cast<Tensor *>(outputs[i]);
    if (!t) continue;  // checked above
    const Program::Value &val = prog_.values[static_cast<size_t>(prog_.outputs[i])];
    val.dev->download(val.handle, val.offset, t->data(), val.bytes);
  }
}

void Plan::run_steps(const RunControl *rc) {
  const bool per_step = rc && rc->check_numerics;  // recorded segments are replayed step by step then
  for (const Program::Segment &seg : prog_.segments) {
    if (rc) stop_if_asked(*rc, seg.first);
    if (seg.handle && !per_step) {
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
      if (rc && k > seg.first) stop_if_asked(*rc, k);
      const Program::Step &st = prog_.steps[k];
      const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      struct Stamp {  // adds the step's time on every exit from this iteration
        Plan *p;
        size_t k;
        std::chrono::steady_clock::time_point t0;
        ~Stamp() {
          if (!p->profile_) return;
          for (Backend *b : p->prog_.devices) b->sync();
          p->profile_ns_[k] += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        }
      } stamp{this, k, t0};
      if (st.transfer) {
        const Program::Value &s = prog_.values[static_cast<size_t>(st.src)], &d = prog_.values[static_cast<size_t>(st.dst)];
        s.dev->sync();
        s.dev->download(s.handle, s.offset, prog_.staging.data(), s.bytes);
        d.dev->upload(d.handle, d.offset, prog_.staging.data(), d.bytes);
        continue;
      }
      call_kernel(st.kernel, st.args, st.op.c_str(), *st.b);
      if (per_step) check_numerics(k);
    }
  }
}

namespace {

// Index of the first NaN or infinity of the float tensor `d` (f32, f64, f16, bf16) on backend
// `b`, and how many there are; -1 when all are finite (or the dtype is not a float).
std::pair<int64_t, int64_t> first_nonfinite(Backend &b, const ctn_tensor_desc &d) {
  if (!dtype_is_float(d.dtype)) return {-1, 0};
  int64_t n = 1;
  for (uint32_t i = 0; i < d.ndim; ++i) n *= d.shape[i];
  std::vector<double> host((static_cast<size_t>(n) * dtype_size(d.dtype) + 7) / 8);  // aligned
  b.sync();
  if (n > 0) b.download(d.data, d.offset, host.data(), static_cast<size_t>(n) * dtype_size(d.dtype));
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    float_element(d.dtype, host.data(), i, &v);
    if (!std::isfinite(v)) {
      if (first < 0) first = i;
      ++count;
    }
  }
  return {first, count};
}

std::string desc_str(const ctn_tensor_desc &d) {
  std::string s = std::string(dtype_name(static_cast<ctn_dtype>(d.dtype))) + "[";
  for (uint32_t i = 0; i < d.ndim; ++i) s += (i ? ", " : "") + std::to_string(d.shape[i]);
  return s + "]";
}

}  // namespace

void Plan::check_numerics(size_t step) const {
  const Program::Step &st = prog_.steps[step];
  const auto [first, count] = first_nonfinite(*st.b, st.out);
  if (first < 0) return;
  std::string inputs;
  for (uint32_t i = 0; i < st.n_in; ++i) {
    const ctn_tensor_desc &d = prog_.in_descs[st.in_first + i];
    const auto [f, c] = first_nonfinite(*st.b, d);
    inputs += format("%s#%u %s %s", i ? ", " : "", i, desc_str(d).c_str(),
                     f < 0 ? "finite" : format("already non-finite (%lld values)", static_cast<long long>(c)).c_str());
  }
  const std::string node = st.node == CTN_NODE_NONE ? std::string("no node")
                           : st.node < user_nodes_  ? format("node %u", st.node)
                                                    : format("node %u, made by the compiler's fusion", st.node);
  fail(CTN_ERR_NUMERICS, "check_numerics: step %zu (%s, %s, on %s) produced %lld non-finite values of %s (the first "
       "at element %lld); inputs: %s", step, st.op.c_str(), node.c_str(), st.b->name.c_str(), static_cast<long long>(count),
       desc_str(st.out).c_str(), static_cast<long long>(first), inputs.empty() ? "none" : inputs.c_str());
}

const ValueInfo &Plan::output_info(uint32_t i) const {
  if (staged_) return staged_->output_info(i);
  if (i >= prog_.outputs.size())
    fail(CTN_ERR_INVALID_ARGUMENT, "output index %u is out of range (the plan has %zu outputs)", i, prog_.outputs.size());
  return prog_.values[static_cast<size_t>(prog_.outputs[i])].info;
}

Tensor Plan::read_variable(ctn_node var) const {
  auto it = prog_.variables.find(var);
  if (it == prog_.variables.end()) fail(CTN_ERR_INVALID_ARGUMENT, "node %u is not a variable used by this plan", var);
  const Program::Value &val = prog_.values[static_cast<size_t>(it->second)];
  Tensor t = Tensor::empty(val.info.dtype, val.info.shape);
  val.dev->download(val.handle, val.offset, t.data(), val.bytes);
  return t;
}

void Plan::write_variable(ctn_node var, const Tensor &t) {
  auto it = prog_.variables.find(var);
  if (it == prog_.variables.end()) fail(CTN_ERR_INVALID_ARGUMENT, "node %u is not a variable used by this plan", var);
  const Program::Value &val = prog_.values[static_cast<size_t>(it->second)];
  if (t.dtype != val.info.dtype || t.shape != val.info.shape)
    fail(CTN_ERR_SHAPE, "variable %u is %s%s, the value is %s%s", var, dtype_name(val.info.dtype),
         shape_str(val.info.shape).c_str(), dtype_name(t.dtype), shape_str(t.shape).c_str());
  Tensor c = t.contiguous();
  val.dev->upload(val.handle, val.offset, c.data(), val.bytes);
}

uint32_t Plan::backend_steps(const char *backend, const char *op) const {
  uint32_t n = 0;
  for (const Program::Step &st : prog_.steps)
    if (st.b->name == backend && (!op || st.op == op)) ++n;
  return n;
}

}  // namespace ctn
