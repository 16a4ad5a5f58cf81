// The frozen compatibility suite (tests/abi/compat, docs/ABI.md "Compatibility policy"): op
// libraries and backends built with strict C99 flags against the headers of ABI 1.0, 1.1, 1.2
// and 1.3 exactly as released (and their sources against today's headers) load into this library
// and run: ops, gradients, forward mode where the library has it, backends' graphs. Their
// "softsign" predates the built-in of that name (1.2): the library's op must win for programs
// that name it plainly, ctn::softsign must name the built-in, and the report must say so.
#include <gtest/gtest.h>

#include <chutney/chutney.h>
#include <chutney/desc.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ctn_test;

namespace {

struct CompatLib {
  const char *path;
  const char *name;     // the library's name, its ops' domain
  unsigned minor;       // the ABI minor of the headers it was built against
  bool has_jvp;         // a 1.2-era source (tangent rules)
};

const CompatLib kLibs[] = {
    {CTN_COMPAT_OPLIB_1_0, "compat10", 0, false},
    {CTN_COMPAT_OPLIB_1_1, "compat11", 1, false},
    {CTN_COMPAT_OPLIB_1_2, "compat12", 2, true},
    {CTN_COMPAT_OPLIB_1_3, "compat13", 3, true},
    {CTN_COMPAT_OPLIB_1_4, "compat14", 4, true},
    {CTN_COMPAT_OPLIB_1_5, "compat15", 5, true},
    {CTN_COMPAT_OPLIB_1_6, "compat16", 6, true},
    {CTN_COMPAT_OPLIB_SRC11, "compat11src", CTN_ABI_MINOR, false},
    {CTN_COMPAT_OPLIB_SRC12, "compat12src", CTN_ABI_MINOR, true},
};

Context CpuContext() {
  Context ctx = IsolatedContext();
  if (ctx && ctn_context_load_plugin(ctx.get(), CTN_TEST_CPU_PLUGIN) != CTN_OK) return nullptr;
  return ctx;
}

std::string Report(ctn_context *ctx) {
  const char *r = nullptr;
  return ctn_context_plugin_report(ctx, &r) == CTN_OK && r ? r : "";
}

// Runs `outs` of `g` with x fed, returns every output as f32.
std::vector<std::vector<float>> RunPlan(ctn_graph *g, ctn_node x, const std::vector<float> &xv,
                                    const std::vector<ctn_node> &outs) {
  std::vector<std::vector<float>> r;
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, static_cast<uint32_t>(outs.size()), outs.data(), nullptr, &p), CTN_OK)
      << ctn_last_error();
  if (!p) return r;
  Plan plan(p);
  Tensor xt = MakeF32({static_cast<int64_t>(xv.size())}, xv);
  std::vector<ctn_tensor *> o(outs.size(), nullptr);
  std::vector<Tensor> keep;
  for (uint32_t k = 0; k < outs.size(); ++k) {
    EXPECT_EQ(ctn_plan_output_create(p, k, &o[k]), CTN_OK);
    keep.emplace_back(o[k]);
  }
  const ctn_tensor *feeds[] = {xt.get()};
  EXPECT_EQ(ctn_plan_run(p, 1, &x, feeds, static_cast<uint32_t>(o.size()), o.data()), CTN_OK) << ctn_last_error();
  for (ctn_tensor *t : o) r.push_back(ReadF32(t));
  return r;
}

void ExpectNear(const std::vector<float> &got, const std::vector<double> &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << what << " [" << k << "]";
}

const std::vector<float> kX = {-2.0f, -0.5f, 0.0f, 3.0f};

std::vector<double> Apply(double (*f)(double)) {
  std::vector<double> r;
  for (float x : kX) r.push_back(f(x));
  return r;
}

class CompatOpLib : public ::testing::TestWithParam<CompatLib> {};

TEST_P(CompatOpLib, LoadsAndItsOpsGradientsAndNamesWork) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  const CompatLib &lib = GetParam();
  Context ctx = CpuContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), lib.path), CTN_OK) << ctn_last_error();
  const std::string name = lib.name, report = Report(ctx.get());
  EXPECT_NE(report.find("op library \"" + name + "\" (ABI 1." + std::to_string(lib.minor) + "): softsign, " + name +
                        "_cube"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("softsign resolves to " + name + "::softsign (shadows the built-in op; ctn::softsign names "
                        "the built-in)"),
            std::string::npos)
      << report;

  Graph g = NewGraph(ctx.get());
  const int64_t shape[] = {4};
  ctn_node x, plain, qualified, builtin, cube, s1, s2, d_soft, d_cube;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  ASSERT_EQ(ctn_op(g.get(), "softsign", 1, &x, nullptr, &plain), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), (name + "::softsign").c_str(), 1, &x, nullptr, &qualified), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), "ctn::softsign", 1, &x, nullptr, &builtin), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_op(g.get(), (name + "_cube").c_str(), 1, &x, nullptr, &cube), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_sum(g.get(), plain, 0, nullptr, 0, &s1), CTN_OK);
  ASSERT_EQ(ctn_sum(g.get(), cube, 0, nullptr, 0, &s2), CTN_OK);
  ASSERT_EQ(ctn_grad(g.get(), s1, 1, &x, &d_soft), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_grad(g.get(), s2, 1, &x, &d_cube), CTN_OK) << ctn_last_error();
  std::vector<ctn_node> outs = {plain, qualified, builtin, cube, d_soft, d_cube};
  ctn_node t_soft = CTN_NODE_NONE;
  if (lib.has_jvp) {
    ctn_node tangent;
    ASSERT_EQ(ctn_scalar(g.get(), CTN_F32, 1.0, &tangent), CTN_OK);
    ASSERT_EQ(ctn_broadcast_to(g.get(), tangent, 1, shape, &tangent), CTN_OK) << ctn_last_error();
    ASSERT_EQ(ctn_jvp(g.get(), 1, &plain, 1, &x, &tangent, &t_soft), CTN_OK) << ctn_last_error();
    outs.push_back(t_soft);
  }
  const auto r = RunPlan(g.get(), x, kX, outs);
  ASSERT_EQ(r.size(), outs.size());
  const auto lib_soft = Apply([](double v) { return 2 * v / (1 + std::fabs(v)); });
  const auto lib_dsoft = Apply([](double v) { return 2 / ((1 + std::fabs(v)) * (1 + std::fabs(v))); });
  ExpectNear(r[0], lib_soft, "plain softsign is the library's");
  ExpectNear(r[1], lib_soft, name + "::softsign");
  ExpectNear(r[2], Apply([](double v) { return v / (1 + std::fabs(v)); }), "ctn::softsign is the built-in");
  ExpectNear(r[3], Apply([](double v) { return v * v * v; }), "cube");
  ExpectNear(r[4], lib_dsoft, "the library's softsign gradient");
  ExpectNear(r[5], Apply([](double v) { return 3 * v * v; }), "cube gradient");
  if (lib.has_jvp) ExpectNear(r[6], lib_dsoft, "the library's softsign tangent");

  // The registry says which op each name is.
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_op_count(ctx.get(), &n), CTN_OK);
  std::string plain_origin, ctn_origin;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_op_info oi{};
    oi.struct_size = sizeof oi;
    ASSERT_EQ(ctn_context_op_info(ctx.get(), i, &oi), CTN_OK);
    if (std::string(oi.name) == "softsign") plain_origin = oi.origin;
    if (std::string(oi.name) == "ctn::softsign") ctn_origin = oi.origin;
  }
  EXPECT_EQ(plain_origin, name);
  EXPECT_EQ(ctn_origin, "builtin");
}

INSTANTIATE_TEST_SUITE_P(compat, CompatOpLib, ::testing::ValuesIn(kLibs),
                         [](const auto &info) { return std::string(info.param.name); });

// All of them at once: every one loads; the first loaded keeps "softsign", each keeps its
// qualified name, and the report says where each name goes.
TEST(compat, EveryOpLibraryTogether) {
  if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
  Context ctx = CpuContext();
  ASSERT_TRUE(ctx);
  for (const CompatLib &lib : kLibs) ASSERT_EQ(ctn_context_load_plugin(ctx.get(), lib.path), CTN_OK) << ctn_last_error();
  const std::string report = Report(ctx.get());
  for (const CompatLib &lib : kLibs) {
    const std::string name = lib.name;
    if (name == "compat10") continue;
    EXPECT_NE(report.find("softsign resolves to compat10::softsign of op library \"compat10\" (loaded first); this "
                          "library's op is " + name + "::softsign"),
              std::string::npos)
        << report;
  }
  Graph g = NewGraph(ctx.get());
  const int64_t shape[] = {4};
  ctn_node x;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  std::vector<ctn_node> outs;
  for (const CompatLib &lib : kLibs) {
    ctn_node y;
    ASSERT_EQ(ctn_op(g.get(), (std::string(lib.name) + "::softsign").c_str(), 1, &x, nullptr, &y), CTN_OK)
        << ctn_last_error();
    outs.push_back(y);
    ASSERT_EQ(ctn_op(g.get(), (std::string(lib.name) + "_cube").c_str(), 1, &x, nullptr, &y), CTN_OK)
        << ctn_last_error();
    outs.push_back(y);
  }
  const auto r = RunPlan(g.get(), x, kX, outs);
  ASSERT_EQ(r.size(), outs.size());
  for (size_t k = 0; k < r.size(); k += 2) {
    ExpectNear(r[k], Apply([](double v) { return 2 * v / (1 + std::fabs(v)); }), kLibs[k / 2].name);
    ExpectNear(r[k + 1], Apply([](double v) { return v * v * v; }), kLibs[k / 2].name);
  }
}

struct CompatBackend {
  const char *path;
  const char *name;
  unsigned minor;
};

class CompatBackendTest : public ::testing::TestWithParam<CompatBackend> {};

TEST_P(CompatBackendTest, LoadsAndRunsAGraph) {
  const CompatBackend &b = GetParam();
  Context ctx = IsolatedContext();
  ASSERT_TRUE(ctx);
  ASSERT_EQ(ctn_context_load_plugin(ctx.get(), b.path), CTN_OK) << ctn_last_error();
  EXPECT_NE(ReportLine(ctx.get(), BaseName(b.path)).find("(ABI 1." + std::to_string(b.minor) + ")"), std::string::npos)
      << ReportLine(ctx.get(), BaseName(b.path));
  ExpectSmallGraphRunsOn(ctx.get(), b.name, /*with_relu=*/false);
}

const CompatBackend kBackends[] = {
    {CTN_COMPAT_BACKEND_1_0, "vend10", 0},
    {CTN_COMPAT_BACKEND_1_1, "vend11", 1},
    {CTN_COMPAT_BACKEND_1_2, "vend12", 2},
    {CTN_COMPAT_BACKEND_1_3, "vend13", 3},
    {CTN_COMPAT_BACKEND_1_4, "vend14", 4},
    {CTN_COMPAT_BACKEND_1_5, "vend15", 5},
    {CTN_COMPAT_BACKEND_1_6, "vend16", 6},
    {CTN_COMPAT_BACKEND_SRC, "vendsrc", CTN_ABI_MINOR},
};

// A graph a (op) b over two [n] inputs of dtype dt; `op` is "add" or a comparison.
struct TwoInputGraph {
  Graph g;
  ctn_node a = CTN_NODE_NONE, b = CTN_NODE_NONE, y = CTN_NODE_NONE;
  TwoInputGraph(ctn_context *ctx, ctn_dtype dt, int64_t n, const char *op) : g(NewGraph(ctx)) {
    EXPECT_EQ(ctn_input(g.get(), "a", dt, 1, &n, &a), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_input(g.get(), "b", dt, 1, &n, &b), CTN_OK) << ctn_last_error();
    if (!std::strcmp(op, "add")) EXPECT_EQ(ctn_add(g.get(), a, b, &y), CTN_OK) << ctn_last_error();
    else EXPECT_EQ(ctn_compare(g.get(), op, a, b, &y), CTN_OK) << ctn_last_error();
  }
};

// Compiling y for `backend` alone fails with CTN_ERR_UNSUPPORTED and a message containing want.
void ExpectNoBackendFor(ctn_graph *g, ctn_node y, const char *backend, const std::string &want) {
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backend;
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, 1, &y, &o, &p), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find(want), std::string::npos) << ctn_last_error();
  ctn_plan_release(p);
}

// The steps of `op` that `plan` placed on `backend`.
uint32_t StepsOn(ctn_plan *plan, const char *backend, const char *op) {
  uint32_t n = 99;
  EXPECT_EQ(ctn_plan_backend_steps(plan, backend, op, &n), CTN_OK) << ctn_last_error();
  return n;
}

// The dtypes of 1.5 never reach a 1.4 backend (types.h): an f16 graph runs on the CPU backend
// next to vend14, and the reason names vend14's ABI and the dtype; an f32 graph still runs on it.
TEST(CompatBackendHalf, F16NeverReachesA14Backend) {
  Context ctx = ContextWith({CTN_COMPAT_BACKEND_1_4, CTN_TEST_CPU_PLUGIN});
  ASSERT_TRUE(ctx);
  const char *want = "vend14 was built against ABI 1.4, before the dtype f16 (ABI 1.5)";
  int32_t supported = 1;
  const char *reason = nullptr;
  ASSERT_EQ(ctn_context_op_support(ctx.get(), "vend14", "add", CTN_F16, &supported, &reason), CTN_OK)
      << ctn_last_error();
  EXPECT_EQ(supported, 0);
  EXPECT_NE(std::string(reason ? reason : "").find(want), std::string::npos) << reason;

  for (ctn_dtype dt : {CTN_F16, CTN_F32}) {
    SCOPED_TRACE(ctn_dtype_name(dt));
    TwoInputGraph t(ctx.get(), dt, 4, "add");
    ASSERT_TRUE(t.g);
    const ctn_node a = t.a, b = t.b;
    if (dt == CTN_F16) ExpectNoBackendFor(t.g.get(), t.y, "vend14", want);  // vend14 alone: the reason says why
    Plan plan = Compile(t.g.get(), {t.y}, "vend14,cpu");  // vend14 preferred
    ASSERT_TRUE(plan);
    EXPECT_EQ(StepsOn(plan.get(), "vend14", "add"), dt == CTN_F16 ? 0u : 1u);
    EXPECT_EQ(StepsOn(plan.get(), "cpu", "add"), dt == CTN_F16 ? 1u : 0u);
    // 1.5 + 0.25 and friends are exact in f16: the values come back unchanged.
    const float av[4] = {1.5f, -2.f, 0.25f, 1024.f}, bv[4] = {0.25f, 0.5f, -1.f, 3.f};
    uint16_t ah[4], bh[4];
    for (int i = 0; i < 4; ++i) {
      ah[i] = ctn_desc_f32_to_f16(av[i]);
      bh[i] = ctn_desc_f32_to_f16(bv[i]);
    }
    Tensor at = MakeTensor(dt, {4}, dt == CTN_F16 ? static_cast<const void *>(ah) : av);
    Tensor bt = MakeTensor(dt, {4}, dt == CTN_F16 ? static_cast<const void *>(bh) : bv);
    std::vector<Tensor> outs = RunOnce(plan.get(), {a, b}, {at.get(), bt.get()});
    ASSERT_EQ(outs.size(), 1u);
    uint16_t yh[4] = {};
    float yf[4] = {};
    ASSERT_EQ(ctn_tensor_read(outs[0].get(), dt == CTN_F16 ? static_cast<void *>(yh) : yf, dt == CTN_F16 ? 8 : 16), CTN_OK);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(dt == CTN_F16 ? ctn_desc_f16_to_f32(yh[i]) : yf[i], av[i] + bv[i]) << i;
  }
}

// The integer dtypes of 1.6 never reach a 1.5 (or older) backend: the reason names the backend's
// ABI and the minor that added the dtype, while a 1.5 dtype (f16) is still offered to vend15 (which
// declines it itself). A u16 comparison (integer arithmetic is float-only in the graph, as for i32)
// placed with vend15 preferred runs on the CPU and reads the values as unsigned.
TEST(CompatBackendInt, U16NeverReachesA15Backend) {
  Context ctx = ContextWith({CTN_COMPAT_BACKEND_1_4, CTN_COMPAT_BACKEND_1_5, CTN_TEST_CPU_PLUGIN});
  ASSERT_TRUE(ctx);
  auto reason_for = [&](const char *backend, ctn_dtype dt) {
    int32_t supported = 1;
    const char *reason = nullptr;
    EXPECT_EQ(ctn_context_op_support(ctx.get(), backend, "lt", dt, &supported, &reason), CTN_OK) << ctn_last_error();
    EXPECT_EQ(supported, 0);
    return std::string(reason ? reason : "");
  };
  const std::string r15 = reason_for("vend15", CTN_U16), r14 = reason_for("vend14", CTN_U64);
  EXPECT_NE(r15.find("vend15 was built against ABI 1.5, before the dtype u16 (ABI 1.6)"), std::string::npos) << r15;
  EXPECT_NE(r14.find("vend14 was built against ABI 1.4, before the dtype u64 (ABI 1.6)"), std::string::npos) << r14;
  const std::string h15 = reason_for("vend15", CTN_F16);
  EXPECT_EQ(h15.find("before the dtype"), std::string::npos) << h15;

  TwoInputGraph t(ctx.get(), CTN_U16, 3, "lt");
  ASSERT_TRUE(t.g);
  ExpectNoBackendFor(t.g.get(), t.y, "vend15", "before the dtype u16 (ABI 1.6)");
  Plan plan = Compile(t.g.get(), {t.y}, "vend15,cpu");
  ASSERT_TRUE(plan);
  EXPECT_EQ(StepsOn(plan.get(), "vend15", "lt"), 0u);
  EXPECT_EQ(StepsOn(plan.get(), "cpu", "lt"), 1u);
  const uint16_t av[3] = {65535, 40000, 1}, bv[3] = {2, 40000, 65535};
  Tensor at = MakeTensor(CTN_U16, {3}, av), bt = MakeTensor(CTN_U16, {3}, bv);
  std::vector<Tensor> outs = RunOnce(plan.get(), {t.a, t.b}, {at.get(), bt.get()});
  ASSERT_EQ(outs.size(), 1u);
  uint8_t yv[3] = {9, 9, 9};
  ASSERT_EQ(ctn_tensor_read(outs[0].get(), yv, sizeof yv), CTN_OK);
  EXPECT_EQ(yv[0], 0);  // 65535 < 2 is false for unsigned
  EXPECT_EQ(yv[1], 0);
  EXPECT_EQ(yv[2], 1);
}

INSTANTIATE_TEST_SUITE_P(compat, CompatBackendTest, ::testing::ValuesIn(kBackends),
                         [](const auto &info) { return std::string(info.param.name); });

}  // namespace
