// libFuzzer target for the graph builder through the C API: the input is a little program of
// random calls (inputs, scalars, constants, variables, any op by name with random inputs and
// attributes, some through their typed builders, assignments, gradients), failing and
// succeeding calls interleaved, then a plan compiled over the last nodes (under a memory budget
// or not, some passes disabled or not) and run with zero-filled feeds when it is small, then
// compiled again with other options, or the same calls on an eager graph. Every call must
// return a status; nothing may crash, abort, hang, read out of bounds or hit undefined
// behaviour; a failed call must not change the graph's node count; and no call may fail with
// CTN_ERR_INTERNAL (a bug by the project's own definition: the target aborts then, so the
// fuzzer reports it).
//
// Build with clang: tools/test.d/25-fuzz.sh (libFuzzer, ASan+UBSan); without libFuzzer the
// replay driver runs tests/fuzz/corpus/graph (meson test fuzz_graph_replay).
#include <chutney/chutney.h>

#include "alloc_cap.h"
#include "raw_dtype.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Reader {
  const uint8_t *p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t u8() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v = v << 8 | u8();
    return v;
  }
  uint64_t u64() { return static_cast<uint64_t>(u32()) << 32 | u32(); }
  // Mostly small values, sometimes extreme ones: the edges are where the bugs are.
  int64_t dim() {
    uint8_t b = u8();
    if (b < 200) return b % 6;
    switch (b % 8) {
      case 0: return -1;
      case 1: return -static_cast<int64_t>(u8());
      case 2: return INT64_MAX;
      case 3: return INT64_MIN;
      case 4: return int64_t(1) << (u8() % 63);
      case 5: return static_cast<int64_t>(u64());
      default: return u8();
    }
  }
  double value() {
    uint8_t b = u8();
    if (b < 160) return static_cast<double>(static_cast<int8_t>(u8())) / 4;
    double v;
    uint64_t bits = u64();
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  // Out-of-range dtypes cross the ABI as integers (raw_dtype.c); the library must check them
  // before use.
  int32_t dtype() {
    uint8_t b = u8();
    return b < 240 ? b % 6 : static_cast<int32_t>(static_cast<int8_t>(u8()));
  }
};

// The allocation cap (alloc_cap.c) must hold, or a corpus input planning 17 GB gets it (and
// MALLOC_PERTURB_ touches it): one allocation just over the cap must fail. Called through a
// volatile pointer, so that the compiler cannot fold the malloc/free pair away.
void check_allocation_cap() {
  const size_t cap = fuzz_alloc_cap_bytes();
  if (!cap) return;
  void *(*volatile alloc)(size_t) = std::malloc;
  void *p = alloc(cap + 1);
  if (p) {
    std::fprintf(stderr, "fuzz_graph: an allocation of %zu bytes passed the cap (alloc_cap.c)\n", cap + 1);
    std::abort();
  }
}

ctn_context *context() {
  static ctn_context *ctx = [] {
    check_allocation_cap();
    ctn_context *c = nullptr;
    if (ctn_context_create(nullptr, &c) != CTN_OK) {
      std::fprintf(stderr, "fuzz_graph: no context: %s\n", ctn_last_error());
      std::abort();
    }
    ctn_context_set_num_threads(c, 1);
    return c;
  }();
  return ctx;
}

// FUZZ_GRAPH_TRACE=1 prints every call and its status (to read what a corpus entry does).
const bool kTrace = std::getenv("FUZZ_GRAPH_TRACE") != nullptr;

void check(ctn_status s, const char *what) {
  if (kTrace) std::fprintf(stderr, "fuzz_graph: %s -> %d%s%s\n", what, static_cast<int>(s), s ? ": " : "", s ? ctn_last_error() : "");
  if (s == CTN_ERR_INTERNAL) {
    std::fprintf(stderr, "fuzz_graph: %s returned CTN_ERR_INTERNAL: %s\n", what, ctn_last_error());
    std::abort();
  }
}

bool small_tensor(int32_t dt, uint32_t nd, const int64_t *shape) {
  (void)dt;
  int64_t n = 1;
  for (uint32_t k = 0; k < nd; ++k) {
    if (shape[k] < 0 || shape[k] > 64) return false;
    n *= shape[k];
    if (n > 4096) return false;
  }
  return true;
}

ctn_tensor *make_tensor(Reader &r) {
  int32_t dt = r.dtype();
  uint32_t nd = r.u8() % 5;
  int64_t shape[4];
  for (uint32_t k = 0; k < nd; ++k) shape[k] = r.dim();
  if (!small_tensor(dt, nd, shape)) return nullptr;
  ctn_tensor *t = nullptr;
  check(raw_tensor_create(dt, nd, shape, nullptr, &t), "ctn_tensor_create");
  if (t) {
    void *data = nullptr;
    int64_t numel = 0;
    if (ctn_tensor_data(t, &data) == CTN_OK && ctn_tensor_numel(t, &numel) == CTN_OK) {
      size_t bytes = static_cast<size_t>(numel) * raw_dtype_size(dt);
      auto *b = static_cast<uint8_t *>(data);
      for (size_t i = 0; i < bytes; ++i) b[i] = r.u8();
    }
  }
  return t;
}

// The program being built: its graph, the nodes made so far and the inputs among them.
struct Program {
  ctn_graph *g = nullptr;
  uint32_t flags = 0;
  std::vector<ctn_node> nodes, inputs;
  ctn_node pick(Reader &rd) const {
    if (nodes.empty() || rd.u8() == 255) return static_cast<ctn_node>(rd.u32());
    return nodes[rd.u8() % nodes.size()];
  }
};

ctn_status add_input(Reader &r, Program &p, ctn_node *out) {
  int32_t dt = r.dtype();
  uint32_t nd = r.u8() % 6;
  int64_t shape[5];
  for (uint32_t k = 0; k < nd; ++k) shape[k] = r.dim();
  ctn_status s = raw_input(p.g, nullptr, dt, nd, shape, out);
  if (kTrace) {
    std::fprintf(stderr, "fuzz_graph: input dtype %d shape", static_cast<int>(dt));
    for (uint32_t k = 0; k < nd; ++k) std::fprintf(stderr, " %lld", static_cast<long long>(shape[k]));
    std::fprintf(stderr, " (%s graph)\n", p.flags & CTN_GRAPH_EAGER ? "eager" : "lazy");
  }
  check(s, "ctn_input");
  if (s == CTN_OK) p.inputs.push_back(*out);
  return s;
}

ctn_status add_leaf(Reader &r, Program &p, ctn_node *out) {
  ctn_tensor *t = make_tensor(r);
  if (!t) return CTN_OK;
  ctn_status s;
  if (r.u8() & 1) {
    s = ctn_constant(p.g, t, out);
    check(s, "ctn_constant");
  } else {
    s = ctn_variable(p.g, nullptr, t, out);
    check(s, "ctn_variable");
  }
  ctn_tensor_release(t);
  return s;
}

// where, embedding and broadcast_to with their own arity go through their typed builders
// (whose argument checks are their own), with the same random, mostly wrong, dtypes and shapes;
// the bytes read are those of the call by name, so older corpus inputs keep their meaning.
bool typed_call(Program &p, const char *op, uint32_t n, const ctn_node *in, const ctn_attrs &at, ctn_status *s,
                ctn_node *out) {
  if (n == 3 && std::strcmp(op, "where") == 0) {
    *s = ctn_where(p.g, in[0], in[1], in[2], out);
  } else if (n == 2 && std::strcmp(op, "embedding") == 0) {
    *s = ctn_embedding(p.g, in[0], in[1], out);
  } else if (n == 1 && std::strcmp(op, "broadcast_to") == 0 && at.ni <= CTN_ATTR_INTS) {
    *s = ctn_broadcast_to(p.g, in[0], at.ni, at.i, out);
  } else {
    return false;
  }
  check(*s, op);
  return true;
}

// The op names the fuzzer calls: every op of the context's registry (ctn_context_op_info: the
// built-in ops in table order, so a new op is fuzzed without touching this file), then a name
// no op has.
const std::vector<std::string> &op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    uint32_t n = 0;
    if (ctn_context_op_count(context(), &n) != CTN_OK) n = 0;
    for (uint32_t i = 0; i < n; ++i) {
      ctn_op_info info;
      std::memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      if (ctn_context_op_info(context(), i, &info) == CTN_OK && info.name) v.push_back(info.name);
    }
    if (v.empty()) {
      std::fprintf(stderr, "fuzz_graph: the context lists no ops: %s\n", ctn_last_error());
      std::abort();
    }
    v.push_back("no_such_op");
    return v;
  }();
  return names;
}

ctn_status add_op(Reader &r, Program &p, ctn_node *out) {
  const std::vector<std::string> &names = op_names();
  const char *op = names[r.u8() % names.size()].c_str();
  uint32_t n = r.u8() % 5;
  ctn_node in[4];
  for (uint32_t k = 0; k < n; ++k) in[k] = p.pick(r);
  ctn_attrs at;
  std::memset(&at, 0, sizeof at);
  uint8_t ni = r.u8(), nf = r.u8();
  // Counts past the arrays' size are an attack the library must refuse.
  at.ni = ni < 240 ? ni % (CTN_ATTR_INTS + 1) : ni;
  at.nf = nf < 240 ? nf % (CTN_ATTR_FLOATS + 1) : nf;
  for (uint32_t k = 0; k < CTN_ATTR_INTS && k < at.ni; ++k) at.i[k] = r.dim();
  for (uint32_t k = 0; k < CTN_ATTR_FLOATS && k < at.nf; ++k) at.f[k] = r.value();
  ctn_status s;
  if (typed_call(p, op, n, in, at, &s, out)) return s;
  s = ctn_op(p.g, op, n, in, &at, out);
  check(s, op);
  return s;
}

// One builder call. A call that fails must leave the graph as it was: the node count is the
// part of that a caller can see, so the target aborts when a failed call changed it.
void builder_step(Reader &r, Program &p) {
  uint32_t before = 0, after = 0;
  ctn_graph_node_count(p.g, &before);
  ctn_node out = CTN_NODE_NONE;
  ctn_status s = CTN_OK;
  switch (r.u8() % 8) {
    case 0: s = add_input(r, p, &out); break;
    case 1: {
      int32_t dt = r.dtype();
      s = raw_scalar(p.g, dt, r.value(), &out);
      check(s, "ctn_scalar");
      break;
    }
    case 2:
    case 3: s = add_leaf(r, p, &out); break;
    case 4: {
      ctn_node v = p.pick(r), x = p.pick(r);
      s = ctn_assign(p.g, v, x, &out);
      check(s, "ctn_assign");
      break;
    }
    case 5: {
      ctn_node loss = p.pick(r);
      ctn_node wrt[2] = {p.pick(r), p.pick(r)}, grads[2];
      s = ctn_grad(p.g, loss, 1 + (r.u8() & 1), wrt, grads);
      check(s, "ctn_grad");
      if (s == CTN_OK) out = grads[0];
      break;
    }
    default: s = add_op(r, p, &out); break;
  }
  ctn_graph_node_count(p.g, &after);
  if (s != CTN_OK && after != before) {
    std::fprintf(stderr, "fuzz_graph: a failed call (status %d: %s) changed the graph from %u to %u nodes\n",
                 static_cast<int>(s), ctn_last_error(), before, after);
    std::abort();
  }
  if (s == CTN_OK && out != CTN_NODE_NONE) p.nodes.push_back(out);
}

// Half the plans compile under a memory budget, so the recomputation pass
// (core/passes/recompute.cpp) is fuzzed too; a budget below a graph's minimum is a clean compile
// error. Some compile with passes disabled (dead-code elimination off schedules every node in
// creation order: an assignment elided before its variable was found that way). Huge plans are
// bounded by the allocation cap (alloc_cap.c), which tests the library's out-of-memory path.
ctn_compile_options compile_options(Reader &r) {
  ctn_compile_options opt;
  std::memset(&opt, 0, sizeof opt);
  opt.struct_size = sizeof opt;
  const uint8_t budget = r.u8();
  opt.memory_budget = budget & 1 ? (budget & 2 ? CTN_MEMORY_BUDGET_AUTO : uint64_t(budget) << 12) : 0;
  const uint8_t disable = r.u8();  // read after the budget: older corpus inputs end before it
  opt.disable = disable & 0x20 ? disable & 0x1f : 0;
  return opt;
}

// Runs a small plan with zero-filled feeds (a plan whose inputs are not small, or whose arena
// is 64 MiB or more, is compiled but not run).
void run_plan(const Program &p, ctn_plan *plan, size_t n_outs) {
  std::vector<ctn_tensor *> feeds;
  bool ok = true;
  for (ctn_node in : p.inputs) {
    int32_t dt = 0;
    uint32_t nd = 0;
    int64_t shape[8];
    if (raw_node_info(p.g, in, &dt, &nd, nullptr) != CTN_OK || nd > 8 || raw_node_info(p.g, in, &dt, &nd, shape) != CTN_OK ||
        nd > 8 || !small_tensor(dt, nd, shape)) {
      ok = false;
      break;
    }
    ctn_tensor *t = nullptr;
    if (raw_tensor_create(dt, nd, shape, nullptr, &t) != CTN_OK) {
      ok = false;
      break;
    }
    void *data = nullptr;
    int64_t numel = 0;
    if (ctn_tensor_data(t, &data) == CTN_OK && ctn_tensor_numel(t, &numel) == CTN_OK)
      std::memset(data, 0, static_cast<size_t>(numel) * raw_dtype_size(dt));
    feeds.push_back(t);
  }
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  if (ok && ctn_plan_stats_get(plan, &st) == CTN_OK && st.planned_peak_bytes < (uint64_t(64) << 20)) {
    std::vector<ctn_tensor *> results(n_outs, nullptr);
    for (size_t k = 0; k < n_outs; ++k) check(ctn_plan_output_create(plan, static_cast<uint32_t>(k), &results[k]), "ctn_plan_output_create");
    bool have = true;
    for (ctn_tensor *t : results) have = have && t;
    if (have)
      check(ctn_plan_run(plan, static_cast<uint32_t>(p.inputs.size()), p.inputs.data(), feeds.data(),
                         static_cast<uint32_t>(results.size()), results.data()),
            "ctn_plan_run");
    for (ctn_tensor *t : results) ctn_tensor_release(t);
  }
  for (ctn_tensor *t : feeds) ctn_tensor_release(t);
}

// A plan over the last nodes, run when small; then, while the input lasts, the same outputs
// compiled again with other options, with a budget where the first had none and the reverse.
void compile_and_run(Reader &r, const Program &p) {
  uint32_t n_out = 1 + r.u8() % 3;
  if (n_out > p.nodes.size()) n_out = static_cast<uint32_t>(p.nodes.size());
  std::vector<ctn_node> outs(p.nodes.end() - n_out, p.nodes.end());
  if (r.u8() & 1) outs.push_back(p.nodes[r.u8() % p.nodes.size()]);  // possibly pinned twice
  const ctn_compile_options opt = compile_options(r);
  ctn_plan *plan = nullptr;
  check(ctn_plan_compile(p.g, static_cast<uint32_t>(outs.size()), outs.data(), &opt, &plan), "ctn_plan_compile");
  if (plan) run_plan(p, plan, outs.size());
  ctn_plan_release(plan);
  if (r.empty()) return;
  ctn_compile_options again = compile_options(r);
  if ((again.memory_budget != 0) == (opt.memory_budget != 0))
    again.memory_budget = opt.memory_budget ? 0 : CTN_MEMORY_BUDGET_AUTO;
  plan = nullptr;
  check(ctn_plan_compile(p.g, static_cast<uint32_t>(outs.size()), outs.data(), &again, &plan), "ctn_plan_compile");
  ctn_plan_release(plan);
}

void run_program(Reader &r) {
  Program p;
  p.flags = r.u8() & 1 ? CTN_GRAPH_EAGER : 0;
  check(ctn_graph_create(context(), p.flags, &p.g), "ctn_graph_create");
  if (!p.g) return;
  for (int step = 0; step < 24 && !r.empty(); ++step) builder_step(r, p);
  if (!(p.flags & CTN_GRAPH_EAGER) && !p.nodes.empty()) compile_and_run(r, p);
  ctn_graph_release(p.g);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader r{data, size};
  run_program(r);
  return 0;
}
