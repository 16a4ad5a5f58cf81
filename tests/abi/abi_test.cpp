// The plugin loader against deliberately broken plugins (tests/abi/plugins/). Each rejection
// must carry the right status and a message that names the file and the reason, must show up
// in the plugin report, and must leave the context fully usable for the good CPU plugin.
#include <gtest/gtest.h>

#include <chutney/backend.h>
#include <chutney/chutney.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ctn_test;

namespace {

std::string Version(unsigned major, unsigned minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Loads the real CPU backend into `ctx` and proves it still computes correctly. Skips (with a
// reason) only when this build has no CPU plugin at all.
void ExpectCpuStillWorks(ctn_context *ctx) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) {
    GTEST_SKIP() << "no CPU plugin in this build: " << CTN_TEST_CPU_PLUGIN;
  }
  ctn_status st = ctn_context_load_plugin(ctx, CTN_TEST_CPU_PLUGIN);
  ASSERT_EQ(st, CTN_OK) << Describe(st);
  ExpectSmallGraphRunsOn(ctx, "cpu");
}

// Finds a backend of `ctx` by name; returns false when absent.
bool FindBackend(ctn_context *ctx, const std::string &name, ctn_backend_info *out) {
  uint32_t n = 0;
  if (ctn_context_backend_count(ctx, &n) != CTN_OK) return false;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    if (ctn_context_backend_info(ctx, i, &info) != CTN_OK) return false;
    if (info.name && name == info.name) {
      *out = info;
      return true;
    }
  }
  return false;
}

// `name` is known and available, at the host's ABI major and minor `minor`.
void ExpectAvailableAt(ctn_context *ctx, const char *name, uint32_t minor, ctn_backend_info *info) {
  ASSERT_TRUE(FindBackend(ctx, name, info)) << name;
  EXPECT_EQ(info->available, 1u);
  EXPECT_EQ(info->abi_major, static_cast<uint32_t>(CTN_ABI_MAJOR));
  EXPECT_EQ(info->abi_minor, minor);
}

struct BrokenCase {
  const char *label;
  std::string path;
  ctn_status code;
  std::vector<std::string> words;  // must all appear in ctn_last_error()
  const char *verdict;             // word expected on the plugin report line
};

void PrintTo(const BrokenCase &c, std::ostream *os) { *os << c.label; }

class BrokenPlugin : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPlugin, RejectedWithReasonAndContextKeepsWorking) {
  const BrokenCase &c = GetParam();
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);

  ctn_status st = ctn_context_load_plugin(ctx.get(), c.path.c_str());
  const std::string msg = ctn_last_error();
  EXPECT_EQ(st, c.code) << Describe(st);
  EXPECT_NE(msg.find(BaseName(c.path)), std::string::npos)
      << "the message should name the file: " << msg;
  for (const std::string &w : c.words)
    EXPECT_NE(msg.find(w), std::string::npos) << "missing '" << w << "' in: " << msg;

  const std::string line = ReportLine(ctx.get(), BaseName(c.path));
  EXPECT_NE(line.find(c.verdict), std::string::npos)
      << "report line for " << BaseName(c.path) << " should say " << c.verdict << ": '" << line
      << "'";

  ExpectCpuStillWorks(ctx.get());
}

std::vector<BrokenCase> BrokenCases() {
  return {
      {"no_entry", CTN_TEST_PLUGIN_NO_ENTRY, CTN_ERR_PLUGIN, {"ctn_plugin_query"}, "rejected"},
      {"wrong_major",
       CTN_TEST_PLUGIN_WRONG_MAJOR,
       CTN_ERR_PLUGIN,
       {Version(CTN_ABI_MAJOR + 1, CTN_ABI_MINOR), Version(CTN_ABI_MAJOR, CTN_ABI_MINOR)},
       "rejected"},
      {"null_query", CTN_TEST_PLUGIN_NULL_QUERY, CTN_ERR_PLUGIN, {"NULL"}, "rejected"},
      {"bad_kind", CTN_TEST_PLUGIN_BAD_KIND, CTN_ERR_PLUGIN, {"kind", "99"}, "rejected"},
      {"truncated", CTN_TEST_PLUGIN_TRUNCATED, CTN_ERR_PLUGIN, {"struct_size", "8"}, "rejected"},
      {"init_fails",
       CTN_TEST_PLUGIN_INIT_FAILS,
       CTN_ERR_UNAVAILABLE,
       {"no such device (test)"},
       "unavailable"},
      {"missing_file",
       std::string(CTN_TEST_PLUGIN_DIR) + "/ctn-test-does-not-exist.so",
       CTN_ERR_PLUGIN,
       {},
       "rejected"},
  };
}

INSTANTIATE_TEST_SUITE_P(abi, BrokenPlugin, ::testing::ValuesIn(BrokenCases()),
                         [](const auto &info) { return std::string(info.param.label); });

TEST(abi, VersionsAgree) {
  EXPECT_EQ(ctn_abi_version(), static_cast<uint32_t>(CTN_ABI_VERSION));
  EXPECT_EQ(std::string(ctn_version_string()),
            Version(CTN_VERSION_MAJOR, CTN_VERSION_MINOR) + "." +
                std::to_string(CTN_VERSION_PATCH));
}

TEST(abi, LoadPluginRejectsNullArguments) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  EXPECT_EQ(ctn_context_load_plugin(nullptr, CTN_TEST_PLUGIN_OLDER_MINOR),
            CTN_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(ctn_last_error(), "");
  EXPECT_EQ(ctn_context_load_plugin(ctx.get(), nullptr), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(ctn_last_error(), "");
}

TEST(abi, FileThatIsNotASharedObjectIsRejected) {
  const std::string path = ::testing::TempDir() + "ctn-test-garbage.so";
  FILE *f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("this is not an ELF file\n", f);
  std::fclose(f);
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  ctn_status st = ctn_context_load_plugin(ctx.get(), path.c_str());
  EXPECT_EQ(st, CTN_ERR_PLUGIN) << Describe(st);
  EXPECT_NE(std::string(ctn_last_error()).find("ctn-test-garbage.so"), std::string::npos)
      << ctn_last_error();
  std::remove(path.c_str());
  ExpectCpuStillWorks(ctx.get());
}

// A descriptor cut right after get_kernel: the host must treat synchronize, set_option and
// get_proc_address as NULL. The bytes after the short descriptor are poisoned pointers, so a
// host that read them would crash here.
TEST(abi, OlderMinorLoadsAndRunsWithMissingSlotsAsNull) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_OLDER_MINOR});
  ASSERT_TRUE(ctx);

  ctn_backend_info info{};
  ASSERT_NO_FATAL_FAILURE(ExpectAvailableAt(ctx.get(), "oldcpu", static_cast<uint32_t>(CTN_ABI_MINOR), &info));
  ASSERT_NE(info.path, nullptr);
  EXPECT_EQ(BaseName(info.path), BaseName(CTN_TEST_PLUGIN_OLDER_MINOR));
  ASSERT_NE(info.description, nullptr);
  EXPECT_NE(std::string(info.description).find("oldcpu"), std::string::npos);

  // set_option is absent: "the backend takes no options", not a call through garbage.
  ctn_status st = ctn_context_set_option(ctx.get(), "oldcpu", "num_threads", "2");
  EXPECT_EQ(st, CTN_ERR_INVALID_ARGUMENT) << Describe(st);

  ExpectSmallGraphRunsOn(ctx.get(), "oldcpu");
  // And twice, so the absent synchronize is exercised between runs as well.
  ExpectSmallGraphRunsOn(ctx.get(), "oldcpu");
  EXPECT_NE(ReportLine(ctx.get(), BaseName(CTN_TEST_PLUGIN_OLDER_MINOR)).find("loaded"),
            std::string::npos);
}

// A plugin from a future minor with extra trailing slots: read only up to what the host knows.
TEST(abi, NewerMinorLoadsAndRuns) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_NEWER_MINOR});
  ASSERT_TRUE(ctx);

  ctn_backend_info info{};
  ASSERT_NO_FATAL_FAILURE(ExpectAvailableAt(ctx.get(), "newcpu", static_cast<uint32_t>(CTN_ABI_MINOR + 1), &info));

  ExpectSmallGraphRunsOn(ctx.get(), "newcpu", /*with_relu=*/false);
  ExpectCpuStillWorks(ctx.get());
}

TEST(abi, OldAndNewMinorsCoexistInOneContext) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_OLDER_MINOR, CTN_TEST_PLUGIN_NEWER_MINOR});
  ASSERT_TRUE(ctx);
  ExpectSmallGraphRunsOn(ctx.get(), "newcpu", /*with_relu=*/false);
  ExpectSmallGraphRunsOn(ctx.get(), "oldcpu");
}

TEST(abi, UnavailableBackendIsListedWithItsReason) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  ctn_status st = ctn_context_load_plugin(ctx.get(), CTN_TEST_PLUGIN_INIT_FAILS);
  ASSERT_EQ(st, CTN_ERR_UNAVAILABLE) << Describe(st);

  ctn_backend_info info{};
  ASSERT_TRUE(FindBackend(ctx.get(), "nodevice", &info)) << "an unavailable backend is still known";
  EXPECT_EQ(info.available, 0u);
  ASSERT_NE(info.description, nullptr);
  EXPECT_NE(std::string(info.description).find("no such device (test)"), std::string::npos)
      << info.description;

  st = ctn_context_set_backends(ctx.get(), "nodevice");
  EXPECT_EQ(st, CTN_ERR_UNAVAILABLE) << Describe(st);
  EXPECT_NE(std::string(ctn_last_error()).find("nodevice"), std::string::npos)
      << ctn_last_error();
  ExpectCpuStillWorks(ctx.get());
}

TEST(abi, KernelExceptionBecomesStatus) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_KERNEL_THROWS});
  ASSERT_TRUE(ctx);

  Graph g = NewGraph(ctx.get());
  ASSERT_TRUE(g);
  const int64_t shape[1] = {4};
  ctn_node a, b, y;
  ASSERT_EQ(ctn_input(g.get(), "a", CTN_F32, 1, shape, &a), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_input(g.get(), "b", CTN_F32, 1, shape, &b), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_add(g.get(), a, b, &y), CTN_OK) << ctn_last_error();
  Plan plan = Compile(g.get(), {y}, "throwcpu");
  ASSERT_TRUE(plan);
  uint32_t steps = 0;
  ASSERT_EQ(ctn_plan_backend_steps(plan.get(), "throwcpu", "add", &steps), CTN_OK);
  EXPECT_EQ(steps, 1u);

  Tensor at = MakeF32({4}, {1, 2, 3, 4}), bt = MakeF32({4}, {1, 1, 1, 1});
  ctn_tensor *out_raw = nullptr;
  ASSERT_EQ(ctn_plan_output_create(plan.get(), 0, &out_raw), CTN_OK) << ctn_last_error();
  Tensor out(out_raw);
  const ctn_node feeds[2] = {a, b};
  const ctn_tensor *values[2] = {at.get(), bt.get()};
  ctn_tensor *outs[1] = {out.get()};
  for (int attempt = 0; attempt < 2; ++attempt) {  // the plan stays usable after a failure
    ctn_status st = ctn_plan_run(plan.get(), 2, feeds, values, 1, outs);
    // A misbehaving plugin (CTN_ERR_PLUGIN) or an unexpected exception (CTN_ERR_INTERNAL):
    // either reading is fair, as long as the text says where it came from.
    EXPECT_TRUE(st == CTN_ERR_PLUGIN || st == CTN_ERR_INTERNAL) << Describe(st);
    const std::string msg = ctn_last_error();
    EXPECT_NE(msg.find("boom from kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("throwcpu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("add"), std::string::npos) << msg;
  }
  ExpectCpuStillWorks(ctx.get());
}

TEST(abi, KernelExceptionInEagerModeBecomesStatus) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_KERNEL_THROWS});
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_set_backends(ctx.get(), "throwcpu"), CTN_OK) << ctn_last_error();
  Graph g = NewGraph(ctx.get(), CTN_GRAPH_EAGER);
  ASSERT_TRUE(g);
  Tensor at = MakeF32({2}, {1, 2});
  ctn_node a, y = CTN_NODE_NONE;
  ASSERT_EQ(ctn_constant(g.get(), at.get(), &a), CTN_OK) << ctn_last_error();
  ctn_status st = ctn_add(g.get(), a, a, &y);
  EXPECT_NE(st, CTN_OK);
  EXPECT_NE(std::string(ctn_last_error()).find("boom from kernel"), std::string::npos)
      << ctn_last_error();
  EXPECT_EQ(y, CTN_NODE_NONE) << "out-param must be untouched on error";
}

// Op namespaces (docs/ABI.md): a name taken by another library never rejects a library. The
// first loaded keeps the unqualified name, each op keeps its qualified one, and the report says
// which op the name resolves to.
TEST(abi, CollidingCustomOpLoadsAndTheFirstKeepsTheName) {
  Context ctx = ContextWith({CTN_TEST_SWISH_PLUGIN, CTN_TEST_PLUGIN_DUP_OP});
  ASSERT_TRUE(ctx);
  ASSERT_NO_FATAL_FAILURE(ExpectReportHas(ctx.get(), "swish resolves to swish-ops::swish of op library \"swish-ops\" "
                                                      "(loaded first); this library's op is dup-ops::swish"));

  // The duplicate's infer accepts i32; swish's rejects it: the first is in charge of "swish",
  // the second is reachable by its qualified name.
  Graph g = NewGraph(ctx.get());
  ASSERT_TRUE(g);
  const int64_t shape[1] = {3};
  ctn_node xi, xf, y = CTN_NODE_NONE;
  ASSERT_EQ(ctn_input(g.get(), "xi", CTN_I32, 1, shape, &xi), CTN_OK);
  ASSERT_EQ(ctn_input(g.get(), "xf", CTN_F32, 1, shape, &xf), CTN_OK);
  EXPECT_EQ(ctn_op(g.get(), "swish", 1, &xi, nullptr, &y), CTN_ERR_DTYPE) << ctn_last_error();
  EXPECT_EQ(ctn_op(g.get(), "swish", 1, &xf, nullptr, &y), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_op(g.get(), "swish-ops::swish", 1, &xi, nullptr, &y), CTN_ERR_DTYPE) << ctn_last_error();
  EXPECT_EQ(ctn_op(g.get(), "dup-ops::swish", 1, &xi, nullptr, &y), CTN_OK) << ctn_last_error();
}

TEST(abi, CollisionInTheOtherOrderKeepsBoth) {
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), CTN_TEST_PLUGIN_DUP_OP), CTN_OK)
      << "alone, dup-ops declares a fresh name: " << ctn_last_error();
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), CTN_TEST_SWISH_PLUGIN), CTN_OK) << ctn_last_error();
  Graph g = NewGraph(ctx.get());
  const int64_t shape[1] = {3};
  ctn_node xi, y = CTN_NODE_NONE;
  ASSERT_EQ(ctn_input(g.get(), "xi", CTN_I32, 1, shape, &xi), CTN_OK);
  EXPECT_EQ(ctn_op(g.get(), "swish", 1, &xi, nullptr, &y), CTN_OK) << "dup-ops was first: " << ctn_last_error();
  EXPECT_EQ(ctn_op(g.get(), "swish-ops::swish", 1, &xi, nullptr, &y), CTN_ERR_DTYPE) << ctn_last_error();
  // swish's other op, which collides with nothing, is there as usual.
  ctn_node xf2[2];
  ASSERT_EQ(ctn_input(g.get(), "a", CTN_F32, 1, shape, &xf2[0]), CTN_OK);
  ASSERT_EQ(ctn_input(g.get(), "b", CTN_F32, 1, shape, &xf2[1]), CTN_OK);
  EXPECT_EQ(ctn_op(g.get(), "swish_grad", 2, xf2, nullptr, &y), CTN_OK) << ctn_last_error();
}

// A library's rules see its own ops first: swish's gradient rule asks host->graph_op for
// "swish_grad" and must get its own (two inputs), not the one-input op of a library that was
// loaded first and holds the plain name.
TEST(abi, LibraryRulesUseTheLibrarysOwnOps) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  Context ctx = ContextWith({CTN_TEST_CPU_PLUGIN, CTN_TEST_PLUGIN_DUP_SWISH_GRAD, CTN_TEST_SWISH_PLUGIN});
  ASSERT_TRUE(ctx);
  Graph g = NewGraph(ctx.get());
  const int64_t shape[1] = {2};
  ctn_node x, y, loss, dx;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  ASSERT_EQ(ctn_op(g.get(), "swish", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_sum(g.get(), y, 0, nullptr, 0, &loss), CTN_OK);
  ASSERT_EQ(ctn_grad(g.get(), loss, 1, &x, &dx), CTN_OK) << ctn_last_error();
  ctn_plan *p = nullptr;
  ASSERT_EQ(ctn_plan_compile(g.get(), 1, &dx, nullptr, &p), CTN_OK) << ctn_last_error();
  Plan plan(p);
  Tensor xt = MakeF32({2}, {0, 1});
  ctn_tensor *o = nullptr;
  ASSERT_EQ(ctn_plan_output_create(p, 0, &o), CTN_OK);
  Tensor ot(o);
  const ctn_tensor *feeds[] = {xt.get()};
  ASSERT_EQ(ctn_plan_run(p, 1, &x, feeds, 1, &o), CTN_OK) << ctn_last_error();
  const std::vector<float> d = ReadF32(o);
  // d/dx x sigmoid(x) = s + x s (1 - s): 0.5 at 0, 0.9277 at 1.
  EXPECT_NEAR(d[0], 0.5, 1e-6);
  EXPECT_NEAR(d[1], 0.9276705, 1e-5);
}

// A library op named like a built-in shadows it for programs (ctn_op with the plain name), while
// ctn::<name>, the typed functions and the core's own rules (composites, gradients) keep using
// the built-in. dup-builtin's "add" has no kernels: a plan that used it would not compile.
TEST(abi, LibraryOpShadowsTheBuiltinForProgramsOnly) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  Context ctx = ContextWith({CTN_TEST_CPU_PLUGIN, CTN_TEST_PLUGIN_DUP_BUILTIN});
  ASSERT_TRUE(ctx);
  const std::string line = ReportLine(ctx.get(), BaseName(CTN_TEST_PLUGIN_DUP_BUILTIN));
  EXPECT_NE(line.find("loaded"), std::string::npos) << line;
  ASSERT_NO_FATAL_FAILURE(ExpectReportHas(ctx.get(), "add resolves to dup-builtin::add (shadows the built-in op; "
                                                      "ctn::add names the built-in)"));

  // The registry lists the library's op as "add" and the built-in as "ctn::add".
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_op_count(ctx.get(), &n), CTN_OK);
  std::string add_origin, ctn_add_origin;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_op_info oi{};
    oi.struct_size = sizeof oi;
    ASSERT_EQ(ctn_context_op_info(ctx.get(), i, &oi), CTN_OK);
    if (std::string(oi.name) == "add") add_origin = oi.origin;
    if (std::string(oi.name) == "ctn::add") ctn_add_origin = oi.origin;
  }
  EXPECT_EQ(add_origin, "dup-builtin");
  EXPECT_EQ(ctn_add_origin, "builtin");

  Graph g = NewGraph(ctx.get());
  const int64_t shape[1] = {3};
  ctn_node x[2], lib_add, builtin_add, typed_add, soft, loss, dx;
  ASSERT_EQ(ctn_input(g.get(), "a", CTN_F32, 1, shape, &x[0]), CTN_OK);
  ASSERT_EQ(ctn_input(g.get(), "b", CTN_F32, 1, shape, &x[1]), CTN_OK);
  ASSERT_EQ(ctn_op(g.get(), "add", 2, x, nullptr, &lib_add), CTN_ERR_INVALID_ARGUMENT)
      << "the library's add takes one input: " << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), "add", 1, x, nullptr, &lib_add), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), "dup-builtin::add", 1, x, nullptr, &lib_add), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), "ctn::add", 2, x, nullptr, &builtin_add), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_add(g.get(), x[0], x[1], &typed_add), CTN_OK) << ctn_last_error();
  // softsign's parts and its gradient use add: the built-in one.
  ASSERT_EQ(ctn_op(g.get(), "softsign", 1, &builtin_add, nullptr, &soft), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_sum(g.get(), soft, 0, nullptr, 0, &loss), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_grad(g.get(), loss, 1, &x[0], &dx), CTN_OK) << ctn_last_error();
  ctn_node outs[] = {soft, dx, typed_add};
  ctn_plan *p = nullptr;
  ASSERT_EQ(ctn_plan_compile(g.get(), 3, outs, nullptr, &p), CTN_OK) << ctn_last_error();
  Plan plan(p);
  Tensor a = MakeF32({3}, {1, -3, 0}), b = MakeF32({3}, {0, 1, 0});
  ctn_tensor *o[3] = {};
  for (uint32_t k = 0; k < 3; ++k) ASSERT_EQ(ctn_plan_output_create(p, k, &o[k]), CTN_OK);
  Tensor t0(o[0]), t1(o[1]), t2(o[2]);
  const ctn_tensor *feeds[] = {a.get(), b.get()};
  ASSERT_EQ(ctn_plan_run(p, 2, x, feeds, 3, o), CTN_OK) << ctn_last_error();
  const std::vector<float> y = ReadF32(o[0]), d = ReadF32(o[1]), want_y = {0.5f, -2.0f / 3.0f, 0.0f},
                           want_d = {0.25f, 1.0f / 9.0f, 1.0f};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(y[k], want_y[k], 1e-6) << k;
    EXPECT_NEAR(d[k], want_d[k], 1e-6) << k;
  }
  EXPECT_EQ(ReadF32(o[2]), (std::vector<float>{1, -2, 0}));
}

// Every candidate found through options.plugin_path is reported with its verdict, and the bad
// ones do not make context creation fail.
TEST(abi, PluginReportListsEveryCandidate) {
  ctn_context_options opts{};
  opts.struct_size = sizeof opts;
  opts.flags = CTN_CONTEXT_NO_AUTOLOAD;
  opts.plugin_path = CTN_TEST_PLUGIN_DIR;
  ctn_context *raw = nullptr;
  ctn_status st = ctn_context_create(&opts, &raw);
  ASSERT_EQ(st, CTN_OK) << Describe(st);
  Context ctx(raw);

  const char *text = nullptr;
  ASSERT_EQ(ctn_context_plugin_report(ctx.get(), &text), CTN_OK);
  ASSERT_NE(text, nullptr);
  SCOPED_TRACE(std::string("report:\n") + text);

  const struct {
    const char *path;
    const char *verdict;
  } expected[] = {
      {CTN_TEST_PLUGIN_OLDER_MINOR, "loaded"},   {CTN_TEST_PLUGIN_NEWER_MINOR, "loaded"},
      {CTN_TEST_PLUGIN_KERNEL_THROWS, "loaded"}, {CTN_TEST_PLUGIN_DUP_OP, "loaded"},
      {CTN_TEST_PLUGIN_INIT_FAILS, "unavailable"}, {CTN_TEST_PLUGIN_NO_ENTRY, "rejected"},
      {CTN_TEST_PLUGIN_WRONG_MAJOR, "rejected"}, {CTN_TEST_PLUGIN_NULL_QUERY, "rejected"},
      {CTN_TEST_PLUGIN_BAD_KIND, "rejected"},    {CTN_TEST_PLUGIN_TRUNCATED, "rejected"},
      {CTN_TEST_PLUGIN_DUP_BUILTIN, "loaded"},  // its "add" shadows the built-in (docs/ABI.md)
  };
  for (const auto &e : expected) {
    const std::string line = ReportLine(ctx.get(), BaseName(e.path));
    EXPECT_NE(line, "") << BaseName(e.path) << " missing from the report";
    EXPECT_NE(line.find(e.verdict), std::string::npos)
        << BaseName(e.path) << " should be " << e.verdict << ": '" << line << "'";
  }
  ctn_backend_info info{};
  EXPECT_TRUE(FindBackend(ctx.get(), "oldcpu", &info));
  EXPECT_TRUE(FindBackend(ctx.get(), "newcpu", &info));
  EXPECT_FALSE(FindBackend(ctx.get(), "cpu", &info)) << "NO_AUTOLOAD must not find the build tree";
  ExpectSmallGraphRunsOn(ctx.get(), "oldcpu");
}

// The default search finds the build tree's own plugins: the CPU backend and the swish library.
TEST(abi, DefaultSearchFindsBuildTreePlugins) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  Context ctx = DefaultContext();
  ASSERT_TRUE(ctx);
  EXPECT_NE(ReportLine(ctx.get(), "ctn-cpu.so").find("loaded"), std::string::npos);
  EXPECT_NE(ReportLine(ctx.get(), BaseName(CTN_TEST_SWISH_PLUGIN)).find("loaded"),
            std::string::npos);
  ctn_backend_info info{};
  ASSERT_TRUE(FindBackend(ctx.get(), "cpu", &info));
  EXPECT_EQ(info.available, 1u);
}

TEST(abi, EnvironmentPluginPathIsSearched) {
  const char *old = std::getenv("CHUTNEY_PLUGIN_PATH");
  const std::string saved = old ? old : "";
  ASSERT_EQ(setenv("CHUTNEY_PLUGIN_PATH", CTN_TEST_PLUGIN_OLDER_MINOR, 1), 0);
  Context ctx = DefaultContext();
  if (old)
    setenv("CHUTNEY_PLUGIN_PATH", saved.c_str(), 1);
  else
    unsetenv("CHUTNEY_PLUGIN_PATH");
  ASSERT_TRUE(ctx);
  ctn_backend_info info{};
  EXPECT_TRUE(FindBackend(ctx.get(), "oldcpu", &info))
      << "CHUTNEY_PLUGIN_PATH naming a file should load it";
}

}  // namespace

// ABI 1.1 plan segments: a backend that records its steps gets them once at compile time and
// replays them per run; its kernels refuse to run outside a replay, so passing proves the host
// used the segment path rather than calling each kernel.
TEST(abi, PlanSegmentsAreRecordedOnceAndReplayedPerRun) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_RECORDING});
  ASSERT_TRUE(ctx);
  // Reach the plugin's counters through its own descriptor (same loaded image).
  void *dl = dlopen(CTN_TEST_PLUGIN_RECORDING, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(dl, nullptr);
  auto query = reinterpret_cast<ctn_plugin_query_fn>(dlsym(dl, CTN_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(query, nullptr);
  auto *desc = reinterpret_cast<const ctn_backend_desc *>(query(CTN_ABI_VERSION, nullptr));
  auto prepared = reinterpret_cast<long (*)(void)>(desc->get_proc_address(nullptr, "reccpu_prepared"));
  auto runs = reinterpret_cast<long (*)(void)>(desc->get_proc_address(nullptr, "reccpu_runs"));
  ASSERT_TRUE(prepared && runs);
  const long p0 = prepared(), r0 = runs();

  Graph g = NewGraph(ctx.get());
  int64_t shape[1] = {4};
  ctn_node x, y, s1, s2;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  ASSERT_EQ(ctn_input(g.get(), "y", CTN_F32, 1, shape, &y), CTN_OK);
  ASSERT_EQ(ctn_add(g.get(), x, y, &s1), CTN_OK);
  ASSERT_EQ(ctn_add(g.get(), s1, x, &s2), CTN_OK);
  Plan plan = Compile(g.get(), {s2}, "reccpu");
  ASSERT_TRUE(plan);
  ctn_plan *p = plan.get();
  EXPECT_EQ(prepared() - p0, 1);  // both steps in one segment
  Tensor xt = MakeF32({4}, {1, 2, 3, 4}), yt = MakeF32({4}, {10, 20, 30, 40});
  ctn_tensor *out = nullptr;
  ASSERT_EQ(ctn_plan_output_create(p, 0, &out), CTN_OK);
  ctn_node fn[2] = {x, y};
  const ctn_tensor *fv[2] = {xt.get(), yt.get()};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ctn_plan_run(p, 2, fn, fv, 1, &out), CTN_OK) << ctn_last_error();
  EXPECT_EQ(runs() - r0, 3);
  EXPECT_EQ(ReadF32(out), (std::vector<float>{12, 24, 36, 48}));
  ctn_tensor_release(out);
  plan.reset();
  dlclose(dl);
}

// ABI 1.7 constant inputs: get_kernel's signature marks the inputs that are constants of the
// plan (a constant, or a reshape view of one), not a fed input or a variable (its value may be
// assigned); reccpu records ctn_sig_const_inputs of the last "add" it was asked for.
TEST(abi, SignatureMarksConstantInputsOfThePlan) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_RECORDING});
  ASSERT_TRUE(ctx);
  void *proc = nullptr, *state = nullptr;
  ASSERT_EQ(ctn_context_backend_proc(ctx.get(), "reccpu", "reccpu_const_inputs", &proc, &state), CTN_OK)
      << ctn_last_error();
  auto seen = reinterpret_cast<uint64_t (*)(void)>(proc);
  ASSERT_NE(seen, nullptr);
  int64_t shape[1] = {4};
  Tensor cv = MakeF32({4}, {1, 2, 3, 4}), c2v = MakeF32({2, 2}, {5, 6, 7, 8}), vv = MakeF32({4}, {9, 9, 9, 9});
  {
    Graph g = NewGraph(ctx.get());
    ctn_node x, c, s;
    ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
    ASSERT_EQ(ctn_constant(g.get(), cv.get(), &c), CTN_OK);
    ASSERT_EQ(ctn_add(g.get(), x, c, &s), CTN_OK);
    Plan p = Compile(g.get(), {s}, "reccpu");
    ASSERT_TRUE(p);
    EXPECT_EQ(seen(), uint64_t{2}) << "input 1 is a constant, input 0 is fed";
    Tensor xt = MakeF32({4}, {10, 20, 30, 40});
    std::vector<Tensor> outs = RunOnce(p.get(), {x}, {xt.get()});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(ReadF32(outs[0].get()), (std::vector<float>{11, 22, 33, 44}));
  }
  {
    Graph g = NewGraph(ctx.get());
    ctn_node x, c2, r, s;
    ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
    ASSERT_EQ(ctn_constant(g.get(), c2v.get(), &c2), CTN_OK);
    ASSERT_EQ(ctn_reshape(g.get(), c2, 1, shape, &r), CTN_OK);
    ASSERT_EQ(ctn_add(g.get(), r, x, &s), CTN_OK);
    Plan p = Compile(g.get(), {s}, "reccpu");
    ASSERT_TRUE(p);
    EXPECT_EQ(seen(), uint64_t{1}) << "a reshape of a constant is a constant";
  }
  {
    Graph g = NewGraph(ctx.get());
    ctn_node x, v, s;
    ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
    ASSERT_EQ(ctn_variable(g.get(), "v", vv.get(), &v), CTN_OK);
    ASSERT_EQ(ctn_add(g.get(), x, v, &s), CTN_OK);
    Plan p = Compile(g.get(), {s}, "reccpu");
    ASSERT_TRUE(p);
    EXPECT_EQ(seen(), uint64_t{0}) << "a variable may be assigned: not a constant";
  }
}

// A plugin built against 1.6 sees a smaller struct_size: ctn_sig_const_inputs gives 0 for it.
TEST(abi, ConstInputsReadOnlyWhereStructSizeCoversThem) {
  ctn_op_signature sig{};
  sig.const_inputs = 5;
  sig.struct_size = sizeof sig;
  EXPECT_EQ(ctn_sig_const_inputs(&sig), uint64_t{5});
  sig.struct_size = static_cast<uint32_t>(offsetof(ctn_op_signature, const_inputs));  // a 1.6 host's size
  EXPECT_EQ(ctn_sig_const_inputs(&sig), uint64_t{0});
}
