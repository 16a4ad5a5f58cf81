// ABI 1.2 for op libraries: ctn_context_add_oplib (an op library defined by a function of this
// process), callbacks that receive the op definition and its user_data (one trampoline per
// callback serving several ops, as a Rust, Go or Python binding would write it), the
// non-variadic host->set_error_message, ctn_context_backend_proc, and libraries built for the
// older minors 1.0 and 1.1 still loading and running next to them.
#include <gtest/gtest.h>

#include <chutney/chutney.h>
#include <chutney/oplib.h>
#include <chutney/ops.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ctn_test;

namespace {

// ---- an in-process op library: two ops, one function per callback ---------------------------

struct OpData {
  float k;  // y = k * x
  const char *name;
};
OpData kScale2{2.0f, "inproc_scale2"};
OpData kScale3{3.0f, "inproc_scale3"};

const ctn_host_api *g_host = nullptr;
std::atomic<int> g_made{0}, g_released{0}, g_runs{0}, g_bad_callback{0};

// Every callback checks that what it received is consistent: op->user_data == user_data.
void check(const ctn_op_def *op, void *user_data) {
  if (!op || op->user_data != user_data || std::strcmp(op->name, static_cast<OpData *>(user_data)->name) != 0)
    ++g_bad_callback;
}

ctn_status tramp_infer(const ctn_host_api *host, const ctn_op_def *op, void *user_data, uint32_t n,
                       const ctn_tensor_desc *in, const ctn_attrs *, ctn_tensor_desc *out) {
  check(op, user_data);
  if (n != 1 || in[0].dtype != CTN_F32) {
    if (!CTN_STRUCT_HAS(ctn_host_api, host, set_error_message)) return CTN_ERR_DTYPE;
    std::string m = std::string(op->name) + ": takes one f32 input (set_error_message, no format: 100%s)";
    return host->set_error_message(CTN_ERR_DTYPE, m.c_str());
  }
  out->dtype = in[0].dtype;
  out->ndim = in[0].ndim;
  for (uint32_t k = 0; k < in[0].ndim; ++k) out->shape[k] = in[0].shape[k];
  return CTN_OK;
}

ctn_status tramp_grad(const ctn_host_api *host, const ctn_op_def *op, void *user_data, ctn_graph *g, uint32_t,
                      const ctn_node *, ctn_node, ctn_node grad_out, const ctn_attrs *, ctn_node *grad_inputs) {
  check(op, user_data);
  ctn_node k;
  ctn_status st = host->graph_scalar(g, CTN_F32, static_cast<OpData *>(user_data)->k, &k);
  if (st != CTN_OK) return st;
  ctn_node args[2] = {grad_out, k};
  return host->graph_op(g, "mul", 2, args, nullptr, &grad_inputs[0]);
}

void release_state(void *state) {
  ++g_released;
  delete static_cast<float *>(state);
}

ctn_status tramp_make(const ctn_host_api *, const ctn_op_def *op, void *user_data, const char *backend, uint32_t,
                      const ctn_tensor_desc *, const ctn_tensor_desc *, const ctn_attrs *, ctn_kernel *out) {
  check(op, user_data);
  if (!backend || !*backend) ++g_bad_callback;
  ++g_made;
  out->fn = nullptr;  // run through ctn_op_kernel.run
  out->state = new float(static_cast<OpData *>(user_data)->k);
  out->release = release_state;
  out->workspace_size = 0;
  out->flags = 0;
  out->reserved = 0;
  return CTN_OK;
}

ctn_status tramp_run(const ctn_op_def *op, void *user_data, void *state, const ctn_kernel_args *a) {
  check(op, user_data);
  ++g_runs;
  const float k = *static_cast<float *>(state);
  const auto *x = reinterpret_cast<const float *>(static_cast<const char *>(a->inputs[0].data) + a->inputs[0].offset);
  auto *y = reinterpret_cast<float *>(static_cast<char *>(a->outputs[0].data) + a->outputs[0].offset);
  int64_t n = 1;
  for (uint32_t d = 0; d < a->outputs[0].ndim; ++d) n *= a->outputs[0].shape[d];
  for (int64_t i = 0; i < n; ++i) y[i] = k * x[i];
  return CTN_OK;
}

const ctn_op_kernel kKernels[] = {{sizeof(ctn_op_kernel), 0, "cpu", tramp_make, tramp_run}};

ctn_op_def Def(OpData *d) {
  ctn_op_def o{};
  o.struct_size = sizeof o;
  o.n_inputs = 1;
  o.name = d->name;
  o.doc = "k * x";
  o.user_data = d;
  o.infer_ex = tramp_infer;
  o.grad_ex = tramp_grad;
  o.n_kernels_ex = 1;
  o.kernels_ex = kKernels;
  return o;
}

const ctn_op_def kOps[] = {Def(&kScale2), Def(&kScale3)};

ctn_oplib_desc Desc(const char *name, uint32_t n_ops, const ctn_op_def *ops) {
  ctn_oplib_desc d{};
  d.header = {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, name};
  d.n_ops = n_ops;
  d.ops = ops;
  return d;
}

const ctn_oplib_desc kLib = Desc("inproc", 2, kOps);

const ctn_plugin_header *inproc_query(uint32_t, const ctn_host_api *host) {
  g_host = host;
  return &kLib.header;
}

// A library redefining the built-in "add".
ctn_op_def AddDef() {
  ctn_op_def o = Def(&kScale2);
  o.name = "add";
  return o;
}
const ctn_op_def kAddOps[] = {AddDef()};
const ctn_oplib_desc kAddLib = Desc("steals-add", 1, kAddOps);
const ctn_plugin_header *add_query(uint32_t, const ctn_host_api *) { return &kAddLib.header; }

// Op namespaces: a library declaring its ops' domain in their names, and one claiming ctn::.
ctn_op_def NamedDef(const char *name) {
  ctn_op_def o = Def(&kScale2);
  o.name = name;
  return o;
}
const ctn_op_def kDomainOps[] = {NamedDef("com.example::scale2x")};
const ctn_oplib_desc kDomainLib = Desc("example-lib", 1, kDomainOps);
const ctn_plugin_header *domain_query(uint32_t, const ctn_host_api *) { return &kDomainLib.header; }
const ctn_op_def kReservedOps[] = {NamedDef("ctn::scale2x")};
const ctn_oplib_desc kReservedLib = Desc("claims-ctn", 1, kReservedOps);
const ctn_plugin_header *reserved_query(uint32_t, const ctn_host_api *) { return &kReservedLib.header; }

// A backend header: not an op library.
const ctn_plugin_header kBackendHeader = {sizeof(ctn_plugin_header), CTN_ABI_MAJOR, CTN_ABI_MINOR,
                                          CTN_PLUGIN_BACKEND, 0, "not-an-oplib"};
const ctn_plugin_header *backend_query(uint32_t, const ctn_host_api *) { return &kBackendHeader; }

const ctn_plugin_header *null_query(uint32_t, const ctn_host_api *) { return nullptr; }

// A library built against a future major.
const ctn_oplib_desc kFutureLib = [] {
  ctn_oplib_desc d = Desc("future", 0, nullptr);
  d.header.abi_major = CTN_ABI_MAJOR + 1;
  return d;
}();
const ctn_plugin_header *future_query(uint32_t, const ctn_host_api *) { return &kFutureLib.header; }

Context CpuContext() {
  Context ctx = IsolatedContext();
  if (!ctx) return ctx;
  if (ctn_context_load_plugin(ctx.get(), CTN_TEST_CPU_PLUGIN) != CTN_OK) return Context();
  return ctx;
}

// y = op(x) and d sum(y) / dx on the CPU, lazily.
void RunScale(ctn_context *ctx, const char *op, float k) {
  Graph g = NewGraph(ctx);
  ASSERT_TRUE(g);
  const int64_t shape[] = {2, 3};
  ctn_node x, y, loss, dx;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 2, shape, &x), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), op, 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_sum(g.get(), y, 0, nullptr, 0, &loss), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_grad(g.get(), loss, 1, &x, &dx), CTN_OK) << ctn_last_error();
  Plan plan = Compile(g.get(), {y, dx});
  ASSERT_TRUE(plan);
  uint32_t steps = 0;
  ASSERT_EQ(ctn_plan_backend_steps(plan.get(), "cpu", op, &steps), CTN_OK);
  EXPECT_EQ(steps, 1u) << op << " should run on the cpu backend";
  const std::vector<float> xv = {1, -2, 3, 0.5f, 0, -4};
  Tensor xt = MakeF32({2, 3}, xv);
  std::vector<Tensor> outs = RunOnce(plan.get(), {x}, {xt.get()}, 2);
  ASSERT_EQ(outs.size(), 2u);
  std::vector<float> yv = ReadF32(outs[0].get()), dv = ReadF32(outs[1].get());
  ASSERT_EQ(yv.size(), xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_FLOAT_EQ(yv[i], k * xv[i]) << op << " element " << i;
    EXPECT_FLOAT_EQ(dv[i], k) << op << " gradient element " << i;
  }
}

}  // namespace

TEST(oplib12, AbiIsOnePointTwo) {
  // 1.2 or a later minor of major 1 (1.3 added whole-graph files and ONNX export).
  EXPECT_EQ(ctn_abi_version(), static_cast<uint32_t>((1u << 16) | CTN_ABI_MINOR));
  EXPECT_GE(CTN_ABI_MINOR, 2);
}

TEST(oplib12, InProcessLibraryWithOneTrampolinePerCallbackServesTwoOps) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  g_made = g_released = g_runs = g_bad_callback = 0;
  {
    Context ctx = CpuContext();
    ASSERT_TRUE(ctx);
    ctn_status st = ctn_context_add_oplib(ctx.get(), inproc_query);
    ASSERT_EQ(st, CTN_OK) << Describe(st);
    ASSERT_NE(g_host, nullptr);
    EXPECT_GE(g_host->abi_minor, 2);
    EXPECT_TRUE(CTN_STRUCT_HAS(ctn_host_api, g_host, set_error_message));
    const std::string line = ReportLine(ctx.get(), "<in-process>");
    EXPECT_NE(line.find("loaded"), std::string::npos) << line;
    EXPECT_NE(line.find("inproc_scale2, inproc_scale3"), std::string::npos) << line;

    RunScale(ctx.get(), "inproc_scale2", 2.0f);
    RunScale(ctx.get(), "inproc_scale3", 3.0f);
    EXPECT_EQ(g_runs.load(), 2);
    EXPECT_GE(g_made.load(), 2);
    EXPECT_EQ(g_bad_callback.load(), 0) << "a callback got an op definition that does not match its user_data";

    // Eager too: the kernel is made once per signature and reused.
    Graph eg = NewGraph(ctx.get(), CTN_GRAPH_EAGER);
    Tensor xt = MakeF32({3}, {1, 2, 3});
    ctn_node x, y;
    ASSERT_EQ(ctn_constant(eg.get(), xt.get(), &x), CTN_OK);
    ASSERT_EQ(ctn_op(eg.get(), "inproc_scale3", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
    ctn_tensor *v = nullptr;
    ASSERT_EQ(ctn_graph_value(eg.get(), y, &v), CTN_OK) << ctn_last_error();
    Tensor vt(v);
    EXPECT_EQ(ReadF32(v), (std::vector<float>{3, 6, 9}));
  }
  // Every kernel state the library made was released through its release function.
  EXPECT_EQ(g_made.load(), g_released.load());
}

TEST(oplib12, SetErrorMessageIsRecordedVerbatim) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), inproc_query), CTN_OK) << ctn_last_error();
  Graph g = NewGraph(ctx.get());
  const int64_t shape[] = {2};
  ctn_node x, y = 12345;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F64, 1, shape, &x), CTN_OK);
  ctn_status st = ctn_op(g.get(), "inproc_scale2", 1, &x, nullptr, &y);
  EXPECT_EQ(st, CTN_ERR_DTYPE);
  EXPECT_EQ(y, 12345u) << "out-parameter must be untouched on failure";
  const std::string msg = ctn_last_error();
  EXPECT_NE(msg.find("inproc_scale2: takes one f32 input (set_error_message, no format: 100%s)"), std::string::npos)
      << msg;
}

TEST(oplib12, InProcessAdmissionRejectsLikeAFile) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), inproc_query), CTN_OK) << ctn_last_error();

  struct Case {
    ctn_plugin_query_fn q;
    std::vector<std::string> words;
  } cases[] = {
      {inproc_query, {"<in-process>", "an op library named \"inproc\" is already loaded from <in-process>"}},
      {reserved_query, {"\"ctn::scale2x\"", "the domain ctn is reserved"}},
      {backend_query, {"\"not-an-oplib\" is a backend", "op libraries only"}},
      {null_query, {"returned NULL"}},
      {future_query, {"ABI major mismatch", "future"}},
  };
  for (const Case &c : cases) {
    ctn_status st = ctn_context_add_oplib(ctx.get(), c.q);
    EXPECT_EQ(st, CTN_ERR_PLUGIN) << Describe(st);
    const std::string msg = ctn_last_error();
    for (const std::string &w : c.words) EXPECT_NE(msg.find(w), std::string::npos) << "missing '" << w << "' in " << msg;
  }
  const char *report = nullptr;
  ASSERT_EQ(ctn_context_plugin_report(ctx.get(), &report), CTN_OK);
  const std::string r = report;
  size_t rejected = 0;
  for (size_t pos = 0; (pos = r.find("rejected    <in-process>", pos)) != std::string::npos; ++pos) ++rejected;
  EXPECT_EQ(rejected, 5u) << r;
  // The first library survives the rejections.
  Graph g = NewGraph(ctx.get());
  const int64_t shape[] = {2};
  ctn_node x, y;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  EXPECT_EQ(ctn_op(g.get(), "inproc_scale2", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_context_add_oplib(nullptr, inproc_query), CTN_ERR_INVALID_ARGUMENT);
  // A name taken by a built-in op is not a reason to refuse (docs/ABI.md, op namespaces).
  EXPECT_EQ(ctn_context_add_oplib(ctx.get(), add_query), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_context_add_oplib(ctx.get(), nullptr), CTN_ERR_INVALID_ARGUMENT);
}

TEST(oplib12, OlderMinorOpLibrariesLoadAndRunBesideA12One) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  Context ctx = CpuContext();
  ASSERT_TRUE(ctx);
  for (const char *path : {CTN_TEST_PLUGIN_OPLIB_1_0, CTN_TEST_PLUGIN_OPLIB_1_1}) {
    ctn_status st = ctn_context_load_plugin(ctx.get(), path);
    ASSERT_EQ(st, CTN_OK) << path << ": " << Describe(st);
  }
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), inproc_query), CTN_OK) << ctn_last_error();
  EXPECT_NE(ReportLine(ctx.get(), BaseName(CTN_TEST_PLUGIN_OPLIB_1_0)).find("(ABI 1.0)"), std::string::npos);
  EXPECT_NE(ReportLine(ctx.get(), BaseName(CTN_TEST_PLUGIN_OPLIB_1_1)).find("(ABI 1.1)"), std::string::npos);
  for (const char *prefix : {"old10", "old11"}) {
    Graph g = NewGraph(ctx.get());
    const int64_t shape[] = {3};
    ctn_node x, a, b, loss, dx;
    ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
    // plus1(twice(x)): both elements of the old 56-byte array are read right.
    ASSERT_EQ(ctn_op(g.get(), (std::string(prefix) + "_twice").c_str(), 1, &x, nullptr, &a), CTN_OK) << ctn_last_error();
    ASSERT_EQ(ctn_op(g.get(), (std::string(prefix) + "_plus1").c_str(), 1, &a, nullptr, &b), CTN_OK) << ctn_last_error();
    ASSERT_EQ(ctn_op(g.get(), "inproc_scale3", 1, &b, nullptr, &b), CTN_OK) << ctn_last_error();
    ASSERT_EQ(ctn_sum(g.get(), b, 0, nullptr, 0, &loss), CTN_OK);
    ASSERT_EQ(ctn_grad(g.get(), loss, 1, &x, &dx), CTN_OK) << ctn_last_error();
    Plan plan = Compile(g.get(), {b, dx});
    ASSERT_TRUE(plan);
    Tensor xt = MakeF32({3}, {1, 2, -3});
    std::vector<Tensor> outs = RunOnce(plan.get(), {x}, {xt.get()}, 2);
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(ReadF32(outs[0].get()), (std::vector<float>{9, 15, -15})) << prefix;  // 3 (2x + 1)
    EXPECT_EQ(ReadF32(outs[1].get()), (std::vector<float>{6, 6, 6})) << prefix;
  }
}

TEST(oplib12, BackendProcReachesExtrasWithTheirState) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  Context ctx = CpuContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_set_num_threads(ctx.get(), 3), CTN_OK) << ctn_last_error();
  void *proc = nullptr, *state = nullptr;
  ctn_status st = ctn_context_backend_proc(ctx.get(), "cpu", "ctn_cpu_num_threads", &proc, &state);
  ASSERT_EQ(st, CTN_OK) << Describe(st);
  ASSERT_NE(proc, nullptr);
  auto num_threads = reinterpret_cast<int (*)(void *)>(proc);
  EXPECT_EQ(num_threads(state), 3);

  void *untouched = &st;
  EXPECT_EQ(ctn_context_backend_proc(ctx.get(), "cpu", "no_such_extra", &untouched, nullptr), CTN_ERR_UNSUPPORTED);
  EXPECT_EQ(untouched, static_cast<void *>(&st));
  EXPECT_NE(std::string(ctn_last_error()).find("no_such_extra"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_context_backend_proc(ctx.get(), "nope", "x", &untouched, nullptr), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("\"nope\""), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_context_backend_proc(ctx.get(), "cpu", "ctn_cpu_num_threads", nullptr, nullptr),
            CTN_ERR_INVALID_ARGUMENT);
}

// ---- the op registry (ctn_context_op_count / _op_info / _op_support) --------------------------

namespace {

bool FindOp(ctn_context *ctx, const std::string &name, ctn_op_info *out, uint32_t *index = nullptr) {
  uint32_t n = 0;
  if (ctn_context_op_count(ctx, &n) != CTN_OK) return false;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_op_info oi{};
    oi.struct_size = sizeof oi;
    if (ctn_context_op_info(ctx, i, &oi) != CTN_OK) return false;
    if (name == oi.name) {
      *out = oi;
      if (index) *index = i;
      return true;
    }
  }
  return false;
}

}  // namespace

TEST(registry, BuiltInOpsComeFirstWithArityAttributesAndOrigin) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_op_count(ctx.get(), &n), CTN_OK);
  EXPECT_GE(n, 74u) << "ops.h lists 74 ops";
  std::set<std::string> names;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_op_info oi{};
    oi.struct_size = sizeof oi;
    ASSERT_EQ(ctn_context_op_info(ctx.get(), i, &oi), CTN_OK) << ctn_last_error();
    EXPECT_TRUE(names.insert(oi.name).second) << "op listed twice: " << oi.name;
    EXPECT_STREQ(oi.origin, "builtin");
    EXPECT_STREQ(oi.origin_path, "");
  }
  ctn_op_info oi{};
  ASSERT_TRUE(FindOp(ctx.get(), "add", &oi));
  EXPECT_EQ(oi.n_inputs, 2);
  EXPECT_EQ(oi.differentiable, 1u);
  EXPECT_EQ(oi.flags & CTN_OP_INFO_ELEMENTWISE, CTN_OP_INFO_ELEMENTWISE);
  EXPECT_STREQ(oi.attributes, "");
  ASSERT_TRUE(FindOp(ctx.get(), "leaky_relu", &oi));
  EXPECT_STREQ(oi.attributes, "f[0] slope");
  ASSERT_TRUE(FindOp(ctx.get(), "concat", &oi));
  EXPECT_EQ(oi.n_inputs, -1);
  EXPECT_EQ(oi.flags & CTN_OP_INFO_ELEMENTWISE, 0u);
  ASSERT_TRUE(FindOp(ctx.get(), "relu_grad", &oi));
  EXPECT_EQ(oi.differentiable, 0u);
  ASSERT_TRUE(FindOp(ctx.get(), "conv2d", &oi));
  EXPECT_NE(std::string(oi.attributes).find("groups"), std::string::npos) << oi.attributes;

  ctn_op_info bad{};
  bad.struct_size = sizeof bad;
  EXPECT_EQ(ctn_context_op_info(ctx.get(), n, &bad), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("out of range"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_context_op_count(nullptr, &n), CTN_ERR_INVALID_ARGUMENT);
}

TEST(registry, LibrariesAppendTheirOpsWithTheirOrigin) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  uint32_t before = 0, after = 0;
  ASSERT_EQ(ctn_context_op_count(ctx.get(), &before), CTN_OK);
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), CTN_TEST_PLUGIN_OPLIB_1_0), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), inproc_query), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_context_op_count(ctx.get(), &after), CTN_OK);
  EXPECT_EQ(after, before + 4);
  ctn_op_info oi{};
  uint32_t idx = 0;
  ASSERT_TRUE(FindOp(ctx.get(), "old10_twice", &oi, &idx));
  EXPECT_EQ(idx, before);
  EXPECT_STREQ(oi.origin, "old10-ops");
  EXPECT_EQ(BaseName(oi.origin_path), BaseName(CTN_TEST_PLUGIN_OPLIB_1_0));
  EXPECT_STREQ(oi.doc, "2 x");
  EXPECT_EQ(oi.differentiable, 1u);
  ASSERT_TRUE(FindOp(ctx.get(), "inproc_scale3", &oi, &idx));
  EXPECT_EQ(idx, before + 3);
  EXPECT_STREQ(oi.origin, "inproc");
  EXPECT_STREQ(oi.origin_path, "<in-process>");
  EXPECT_EQ(oi.n_inputs, 1);
  EXPECT_STREQ(oi.doc, "k * x");
}

TEST(registry, OlderSmallerStructsGetOnlyTheirFields) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  // ctn_op_info as a caller compiled against a header that ended after `name` would pass it.
  struct {
    ctn_op_info info;
    char guard[8];
  } op;
  std::memset(&op, 0x5a, sizeof op);
  op.info.struct_size = static_cast<uint32_t>(offsetof(ctn_op_info, attributes));
  ASSERT_EQ(ctn_context_op_info(ctx.get(), 0, &op.info), CTN_OK) << ctn_last_error();
  EXPECT_NE(op.info.name, nullptr);
  const unsigned char *rest = reinterpret_cast<const unsigned char *>(&op.info.attributes);
  for (size_t k = 0; k < sizeof op - offsetof(ctn_op_info, attributes); ++k)
    ASSERT_EQ(rest[k], 0x5a) << "byte " << k << " past struct_size was written";
  op.info.struct_size = 4;
  EXPECT_EQ(ctn_context_op_info(ctx.get(), 0, &op.info), CTN_ERR_INVALID_ARGUMENT);

  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), CTN_TEST_CPU_PLUGIN), CTN_OK);
  struct {
    ctn_backend_info info;
    char guard[8];
  } bi;
  std::memset(&bi, 0x5a, sizeof bi);
  bi.info.struct_size = static_cast<uint32_t>(offsetof(ctn_backend_info, path));  // an older, shorter struct
  ASSERT_EQ(ctn_context_backend_info(ctx.get(), 0, &bi.info), CTN_OK) << ctn_last_error();
  EXPECT_STREQ(bi.info.name, "cpu");
  EXPECT_EQ(bi.info.available, 1u);
  rest = reinterpret_cast<const unsigned char *>(&bi.info.path);
  for (size_t k = 0; k < sizeof bi - offsetof(ctn_backend_info, path); ++k)
    ASSERT_EQ(rest[k], 0x5a) << "byte " << k << " past struct_size was written";
}

TEST(registry, OpSupportAsksTheBackendAndGivesItsReason) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  Context ctx = CpuContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), CTN_TEST_PLUGIN_RECORDING), CTN_OK) << ctn_last_error();
  ctn_context_load_plugin(ctx.get(), CTN_TEST_PLUGIN_INIT_FAILS);  // unavailable on purpose
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), CTN_TEST_PLUGIN_OPLIB_1_1), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), inproc_query), CTN_OK) << ctn_last_error();

  struct Case {
    const char *backend, *op;
    ctn_dtype dtype;
    int32_t supported;
    const char *reason_has;
  } cases[] = {
      {"cpu", "add", CTN_F32, 1, ""},
      {"cpu", "matmul", CTN_F64, 1, ""},
      {"cpu", "conv2d", CTN_F32, 1, ""},
      {"cpu", "cross_entropy", CTN_F32, 1, ""},
      {"cpu", "embedding_grad", CTN_F64, 1, ""},
      {"cpu", "adam_apply", CTN_F32, 1, ""},
      {"cpu", "cast", CTN_I32, 1, ""},
      {"cpu", "exp", CTN_I32, 0, "does not take i32"},
      {"reccpu", "add", CTN_F32, 1, ""},
      {"reccpu", "add", CTN_F64, 0, "reccpu: only f32"},
      {"reccpu", "matmul", CTN_F32, 0, "reccpu"},
      {"cpu", "inproc_scale2", CTN_F32, 1, ""},
      {"cpu", "inproc_scale2", CTN_F64, 0, "takes one f32 input"},
      {"reccpu", "inproc_scale3", CTN_F32, 1, ""},  // a "cpu" kernel on a host-memory backend
      {"cpu", "old11_plus1", CTN_F32, 1, ""},
  };
  for (const Case &c : cases) {
    int32_t ok = -1;
    const char *reason = nullptr;
    ctn_status st = ctn_context_op_support(ctx.get(), c.backend, c.op, c.dtype, &ok, &reason);
    ASSERT_EQ(st, CTN_OK) << c.backend << " " << c.op << ": " << Describe(st);
    EXPECT_EQ(ok, c.supported) << c.backend << " " << c.op << " " << ctn_dtype_name(c.dtype) << ": " << reason;
    ASSERT_NE(reason, nullptr);
    if (c.supported) EXPECT_STREQ(reason, "");
    else EXPECT_NE(std::string(reason).find(c.reason_has), std::string::npos) << reason;
  }
  // Every built-in op runs on the CPU backend for f32 (what docs/OPS.md's cpu column shows); the
  // integer ops of int8 quantization (since 1.6) take 8-bit data, and are asked about u8.
  const std::set<std::string> int8_data = {CTN_OP_MATMUL_INTEGER, CTN_OP_QLINEAR_MATMUL, CTN_OP_CONV2D_INTEGER,
                                           CTN_OP_QLINEAR_CONV2D, CTN_OP_QLINEAR_ADD};
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_op_count(ctx.get(), &n), CTN_OK);
  for (uint32_t i = 0; i < n; ++i) {
    ctn_op_info oi{};
    oi.struct_size = sizeof oi;
    ASSERT_EQ(ctn_context_op_info(ctx.get(), i, &oi), CTN_OK);
    if (std::strcmp(oi.origin, "builtin") != 0) continue;
    int32_t ok = 0;
    const char *reason = nullptr;
    const ctn_dtype dt = int8_data.count(oi.name) ? CTN_U8 : CTN_F32;
    ASSERT_EQ(ctn_context_op_support(ctx.get(), "cpu", oi.name, dt, &ok, &reason), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ok, 1) << oi.name << ": " << reason;
  }

  int32_t ok = 7;
  EXPECT_EQ(ctn_context_op_support(ctx.get(), "cpu", "no_such_op", CTN_F32, &ok, nullptr), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_context_op_support(ctx.get(), "nope", "add", CTN_F32, &ok, nullptr), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_context_op_support(ctx.get(), "cpu", "add", static_cast<ctn_dtype>(99), &ok, nullptr),
            CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_context_op_support(ctx.get(), "nodevice", "add", CTN_F32, &ok, nullptr), CTN_ERR_UNAVAILABLE);
  EXPECT_EQ(ok, 7) << "out-parameter must be untouched on failure";
}

// Op namespaces: "domain::name" in ctn_op_def.name declares the op's domain; the op answers to
// its plain name and to the qualified one, the registry lists it under its plain name.
TEST(oplib12, OpNamesDeclareTheirDomain) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), domain_query), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), add_query), CTN_OK) << ctn_last_error();
  Graph g = NewGraph(ctx.get());
  const int64_t shape[] = {2};
  ctn_node x, y;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  EXPECT_EQ(ctn_op(g.get(), "scale2x", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_op(g.get(), "com.example::scale2x", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_op(g.get(), "example-lib::scale2x", 1, &x, nullptr, &y), CTN_ERR_INVALID_ARGUMENT)
      << "the declared domain replaces the library's name";
  // "add" is steals-add's (one input), ctn::add the built-in (two).
  EXPECT_EQ(ctn_op(g.get(), "add", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_op(g.get(), "steals-add::add", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  ctn_node xx[] = {x, x};
  EXPECT_EQ(ctn_op(g.get(), "ctn::add", 2, xx, nullptr, &y), CTN_OK) << ctn_last_error();
  std::set<std::string> names;
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_op_count(ctx.get(), &n), CTN_OK);
  for (uint32_t i = 0; i < n; ++i) {
    ctn_op_info oi{};
    oi.struct_size = sizeof oi;
    ASSERT_EQ(ctn_context_op_info(ctx.get(), i, &oi), CTN_OK);
    EXPECT_TRUE(names.insert(oi.name).second) << "listed twice: " << oi.name;
  }
  EXPECT_TRUE(names.count("scale2x"));
  EXPECT_TRUE(names.count("add"));
  EXPECT_TRUE(names.count("ctn::add"));
  ExpectReportHas(ctx.get(), "op library \"example-lib\" (ABI 1." + std::to_string(CTN_ABI_MINOR) + "): com.example::scale2x");
}

// The core's rewrites are about built-in ops: a library op named "neg" (here y = 2 x) applied
// twice is not simplified away as neg(neg(x)) = x would be, and ctn::neg stays the built-in.
TEST(oplib12, RewritesNeverMistakeALibraryOpForTheBuiltin) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  static const ctn_op_def neg_ops[] = {NamedDef("neg")};
  static const ctn_oplib_desc neg_lib = Desc("steals-neg", 1, neg_ops);
  Context ctx = CpuContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_add_oplib(ctx.get(), [](uint32_t, const ctn_host_api *) { return &neg_lib.header; }), CTN_OK)
      << ctn_last_error();
  Graph g = NewGraph(ctx.get());
  const int64_t shape[] = {3};
  ctn_node x, a, b, c, d;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  ASSERT_EQ(ctn_op(g.get(), "neg", 1, &x, nullptr, &a), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), "neg", 1, &a, nullptr, &b), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), "ctn::neg", 1, &x, nullptr, &c), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), "ctn::neg", 1, &c, nullptr, &d), CTN_OK) << ctn_last_error();
  Plan plan = Compile(g.get(), {b, d});
  ASSERT_TRUE(plan);
  Tensor xt = MakeF32({3}, {1, -2, 3});
  std::vector<Tensor> outs = RunOnce(plan.get(), {x}, {xt.get()}, 2);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(ReadF32(outs[0].get()), (std::vector<float>{4, -8, 12})) << "the library's op, twice";
  EXPECT_EQ(ReadF32(outs[1].get()), (std::vector<float>{1, -2, 3})) << "the built-in, twice";
}
