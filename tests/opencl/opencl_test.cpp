// OpenCL backend tests (run on PoCL in CI): unavailable handling, the on-disk program cache,
// mixed OpenCL + CPU placement, and MLP training end to end on the device. Everything goes
// through the public C API; which backend ran what is asserted with ctn_plan_backend_steps.
#include "../unit/test_helpers.h"
#include <chutney/chutney.h>
#include <chutney/oplib.h>
#include <chutney/ops.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <dirent.h>
#include <unistd.h>

#include "ocl_util.h"

namespace {

struct Backends {
  bool opencl = false;
  std::string opencl_desc;
};

Backends find(ctn_context *ctx) {
  Backends r;
  uint32_t n = 0;
  ctn_context_backend_count(ctx, &n);
  for (uint32_t i = 0; i < n; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    if (ctn_context_backend_info(ctx, i, &info) != CTN_OK) continue;
    if (std::string(info.name) == "opencl") {
      r.opencl = info.available != 0;
      r.opencl_desc = info.description ? info.description : "";
    }
  }
  return r;
}

ctn_context *make_context() {
  ctn_context *ctx = nullptr;
  if (ctn_context_create(nullptr, &ctx) != CTN_OK) return nullptr;
  return ctx;
}

// Skips the test (with the reason) when the machine has no usable OpenCL device.
#define REQUIRE_OPENCL(ctx)                                                               \
  do {                                                                                    \
    Backends b_ = find(ctx);                                                              \
    if (!b_.opencl) GTEST_SKIP() << "opencl unavailable: " << b_.opencl_desc;             \
  } while (0)

// ---- unavailable -----------------------------------------------------------------------------
// Run by meson with OCL_ICD_VENDORS pointing to an empty directory: the ICD loader finds no
// platform, the backend reports why, and the CPU backend keeps working.
TEST(Unavailable, ReasonAndCpuStillWorks) {
  const char *vendors = std::getenv("OCL_ICD_VENDORS");
  if (!vendors || !*vendors) GTEST_SKIP() << "needs OCL_ICD_VENDORS=<empty dir> (meson test opencl-unavailable)";
  ctn_context *ctx = make_context();
  ASSERT_NE(ctx, nullptr) << ctn_last_error();
  uint32_t n = 0;
  OK(ctn_context_backend_count(ctx, &n));
  bool seen = false;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    OK(ctn_context_backend_info(ctx, i, &info));
    if (std::string(info.name) != "opencl") continue;
    seen = true;
    EXPECT_EQ(info.available, 0u);
    std::string d = info.description;
    EXPECT_NE(d.find("unavailable"), std::string::npos) << d;
    EXPECT_NE(d.find("platform"), std::string::npos) << d;
  }
  EXPECT_TRUE(seen) << "the opencl plugin was not found at all";
  // Asking for it fails with a status, and the CPU still computes.
  EXPECT_EQ(ctn_context_set_backends(ctx, "opencl"), CTN_ERR_UNAVAILABLE);
  OK(ctn_context_set_backends(ctx, "opencl,cpu"));
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  int64_t shape[1] = {3};
  ctn_node a, b, c;
  OK(ctn_input(g, "a", CTN_F32, 1, shape, &a));
  OK(ctn_add(g, a, a, &b));
  OK(ctn_mul(g, b, a, &c));
  ctn_plan *p = nullptr;
  OK(ctn_plan_compile(g, 1, &c, nullptr, &p));
  uint32_t on_cpu = 0;
  OK(ctn_plan_backend_steps(p, "cpu", nullptr, &on_cpu));
  EXPECT_EQ(on_cpu, 2u);
  float av[3] = {1, 2, 3};
  ctn_tensor *at = nullptr, *ct = nullptr;
  OK(ctn_tensor_create(CTN_F32, 1, shape, av, &at));
  OK(ctn_plan_output_create(p, 0, &ct));
  const ctn_tensor *feeds[] = {at};
  OK(ctn_plan_run(p, 1, &a, feeds, 1, &ct));
  float out[3];
  OK(ctn_tensor_read(ct, out, sizeof out));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], 2 * av[i] * av[i]);
  ctn_tensor_release(at);
  ctn_tensor_release(ct);
  ctn_plan_release(p);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}

// ---- program cache -----------------------------------------------------------------------------
std::string origin_of(const std::string &desc, double *ms) {
  size_t p = desc.find("program from ");
  if (p == std::string::npos) return "";
  std::string rest = desc.substr(p + 13);
  std::string origin = rest.substr(0, rest.find(' '));
  size_t in = rest.find(" in ");
  *ms = in == std::string::npos ? -1 : std::atof(rest.c_str() + in + 4);
  return origin;
}

std::vector<std::string> list_dir(const std::string &dir) {
  std::vector<std::string> r;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.') r.push_back(e->d_name);
    closedir(d);
  }
  return r;
}

TEST(ProgramCache, SecondInitLoadsBinaryAndCorruptEntryIsRebuilt) {
  const std::string dir = scratch_dir("ctn-ocl-cache");
  const char *old = std::getenv("CHUTNEY_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("CHUTNEY_CACHE_DIR", dir.c_str(), 1);
  auto init_once = [&](double *ms) -> std::string {
    ctn_context *ctx = make_context();
    if (!ctx) return "no context";
    Backends b = find(ctx);
    ctn_context_release(ctx);
    if (!b.opencl) return "unavailable: " + b.opencl_desc;
    return origin_of(b.opencl_desc, ms);
  };
  double cold = 0, warm = 0, rebuilt = 0;
  std::string o1 = init_once(&cold);
  if (o1.rfind("unavailable", 0) == 0) GTEST_SKIP() << o1;
  EXPECT_EQ(o1, "compiled");
  std::string bin;
  for (const auto &f : list_dir(dir))
    if (f.rfind("opencl-", 0) == 0 && f.size() > 4 && f.substr(f.size() - 4) == ".bin") bin = f;
  ASSERT_FALSE(bin.empty()) << "no program binary written to " << dir;
  std::string o2 = init_once(&warm);
  EXPECT_EQ(o2, "cache");
  std::printf("[opencl] program: compiled %.1f ms, from cache %.1f ms\n", cold, warm);
  EXPECT_LT(warm, cold) << "loading the cached binary should beat compiling";
  {  // Corrupt the entry: it must be ignored and rebuilt, not crash or fail init.
    std::fstream f(dir + "/" + bin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    const char junk[16] = {'g', 'a', 'r', 'b', 'a', 'g', 'e', '!', 1, 2, 3, 4, 5, 6, 7, 8};
    f.write(junk, sizeof junk);
  }
  EXPECT_EQ(init_once(&rebuilt), "compiled");
  EXPECT_EQ(init_once(&warm), "cache");
  if (saved.empty()) unsetenv("CHUTNEY_CACHE_DIR");
  else setenv("CHUTNEY_CACHE_DIR", saved.c_str(), 1);
  for (const auto &f : list_dir(dir)) std::remove((dir + "/" + f).c_str());
  rmdir(dir.c_str());
}

// ---- mixed placement -----------------------------------------------------------------------------
// matmul (opencl) -> host_square (an op of an in-process op library with only a cpu kernel: runs
// on the cpu) -> mul (opencl). Integer-valued inputs keep the matmul exact on both devices, and
// a single mul rounds the same everywhere. (Before the OpenCL backend had the NN ops this test
// used max_pool2d as the op the device lacks; no built-in op is left that OpenCL declines. Until
// ABI 1.2 it used swish, which now has an OpenCL kernel: tests/conformance/oplib_device_tests.cpp.)
ctn_status host_square_infer(const ctn_host_api *, uint32_t, const ctn_tensor_desc *in, const ctn_attrs *,
                             ctn_tensor_desc *out) {
  *out = in[0];
  return CTN_OK;
}
ctn_status host_square_run(void *, const ctn_kernel_args *a) {
  const auto *x = reinterpret_cast<const float *>(static_cast<const char *>(a->inputs[0].data) + a->inputs[0].offset);
  auto *y = reinterpret_cast<float *>(static_cast<char *>(a->outputs[0].data) + a->outputs[0].offset);
  int64_t n = 1;
  for (uint32_t k = 0; k < a->outputs[0].ndim; ++k) n *= a->outputs[0].shape[k];
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
  return CTN_OK;
}
ctn_status host_square_kernel(const ctn_host_api *host, uint32_t, const ctn_tensor_desc *, const ctn_tensor_desc *o,
                              const ctn_attrs *, ctn_kernel *k) {
  if (o->dtype != CTN_F32) return host->set_error(CTN_ERR_UNSUPPORTED, "host_square: f32 only");
  *k = ctn_kernel{};
  k->fn = host_square_run;
  return CTN_OK;
}
const ctn_oplib_kernel kHostSquareKernels[] = {{"cpu", host_square_kernel}};
const ctn_op_def *host_square_ops() {
  static const ctn_op_def def =
      unary_op_def("host_square", "x * x with a cpu kernel only (tests)", host_square_infer, kHostSquareKernels, 1);
  return &def;
}
const ctn_plugin_header *host_square_query(uint32_t, const ctn_host_api *) {
  static const ctn_oplib_desc lib = {
      {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, "test-host-square"},
      nullptr, nullptr, 1, host_square_ops()};
  return &lib.header;
}

struct MixedResult {
  std::vector<float> y;
  uint32_t ocl_steps = 0, cpu_steps = 0, transfers = 0, cpu_swish = 0, ocl_mul = 0, ocl_matmul = 0;
};

void run_mixed(ctn_context *ctx, const char *backends, MixedResult *r) {
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  int64_t xs[4] = {2, 1, 4, 6}, ws[2] = {6, 4};
  ctn_node x, w, m, sw, y;
  OK(ctn_input(g, "x", CTN_F32, 4, xs, &x));
  OK(ctn_input(g, "w", CTN_F32, 2, ws, &w));
  OK(ctn_matmul(g, x, w, 0, 0, &m));  // [2, 1, 4, 4]
  OK(ctn_op(g, "host_square", 1, &m, nullptr, &sw));
  OK(ctn_mul(g, sw, m, &y));
  ctn_plan *p = nullptr;
  OK(ocl_test::compile_for(g, 1, &y, backends, &p));
  OK(ctn_plan_backend_steps(p, "opencl", nullptr, &r->ocl_steps));
  OK(ctn_plan_backend_steps(p, "cpu", nullptr, &r->cpu_steps));
  OK(ctn_plan_backend_steps(p, "opencl", "transfer", &r->transfers));
  uint32_t t2 = 0;
  OK(ctn_plan_backend_steps(p, "cpu", "transfer", &t2));
  r->transfers += t2;
  OK(ctn_plan_backend_steps(p, "cpu", "host_square", &r->cpu_swish));
  OK(ctn_plan_backend_steps(p, "opencl", "mul", &r->ocl_mul));
  OK(ctn_plan_backend_steps(p, "opencl", "matmul", &r->ocl_matmul));
  std::vector<float> xv(48), wv(24);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  ctn_tensor *xt = nullptr, *wt = nullptr, *yt = nullptr;
  OK(ctn_tensor_create(CTN_F32, 4, xs, xv.data(), &xt));
  OK(ctn_tensor_create(CTN_F32, 2, ws, wv.data(), &wt));
  OK(ctn_plan_output_create(p, 0, &yt));
  ctn_node feeds_n[] = {x, w};
  const ctn_tensor *feeds[] = {xt, wt};
  OK(ctn_plan_run(p, 2, feeds_n, feeds, 1, &yt));
  r->y.resize(32);
  OK(ctn_tensor_read(yt, r->y.data(), r->y.size() * sizeof(float)));
  ctn_tensor_release(xt);
  ctn_tensor_release(wt);
  ctn_tensor_release(yt);
  ctn_plan_release(p);
  ctn_graph_release(g);
}

TEST(MixedPlacement, SameResultsAsAllCpu) {
  ctn_context *ctx = make_context();
  ASSERT_NE(ctx, nullptr);
  REQUIRE_OPENCL(ctx);
  OK(ctn_context_add_oplib(ctx, host_square_query));
  OK(ctn_context_set_option(ctx, "opencl", "placement", "always"));
  MixedResult mixed, cpu;
  ASSERT_NO_FATAL_FAILURE(run_mixed(ctx, "opencl,cpu", &mixed));
  ASSERT_NO_FATAL_FAILURE(run_mixed(ctx, "cpu", &cpu));
  EXPECT_GE(mixed.ocl_matmul, 1u);
  EXPECT_EQ(mixed.cpu_swish, 1u) << "host_square (cpu kernel only) should have run on the cpu";
  EXPECT_EQ(mixed.ocl_mul, 1u) << "the f32 mul should run on the device";
  EXPECT_GE(mixed.ocl_steps, 2u);
  EXPECT_GE(mixed.transfers, 2u) << "values cross devices both ways";
  EXPECT_EQ(cpu.ocl_steps, 0u);
  ASSERT_EQ(mixed.y.size(), cpu.y.size());
  for (size_t i = 0; i < cpu.y.size(); ++i) EXPECT_EQ(mixed.y[i], cpu.y[i]) << "element " << i;
  ctn_context_release(ctx);
}

// ---- placement policy ----------------------------------------------------------------------------
// "auto" (the default) declines ops where the measured device is slower than the CPU; on PoCL
// (the CPU itself behind OpenCL) the CPU backend should win: the plan keeps the matmul on cpu.
TEST(PlacementPolicy, AutoFallsBackToCpuWhenDeviceIsSlower) {
  ctn_context *ctx = make_context();
  ASSERT_NE(ctx, nullptr);
  REQUIRE_OPENCL(ctx);
  OK(ctn_context_set_option(ctx, "opencl", "placement", "auto"));
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  int64_t s[2] = {16, 16};
  ctn_node a, b, c;
  OK(ctn_input(g, "a", CTN_F32, 2, s, &a));
  OK(ctn_input(g, "b", CTN_F32, 2, s, &b));
  OK(ctn_matmul(g, a, b, 0, 0, &c));
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = "opencl,cpu";
  ctn_plan *p = nullptr;
  OK(ctn_plan_compile(g, 1, &c, &o, &p));
  uint32_t on_cpu = 0, on_ocl = 0;
  OK(ctn_plan_backend_steps(p, "cpu", "matmul", &on_cpu));
  OK(ctn_plan_backend_steps(p, "opencl", "matmul", &on_ocl));
  // A 16^3 GEMM is far below any crossover a device could have after launch costs.
  EXPECT_EQ(on_cpu, 1u);
  EXPECT_EQ(on_ocl, 0u);
  // The reason is the policy's, and "always" takes the op back.
  o.backends = "opencl";
  ctn_plan *p2 = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, 1, &c, &o, &p2), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("placement policy: cpu faster for gemm"),
            std::string::npos)
      << ctn_last_error();
  OK(ctn_context_set_option(ctx, "opencl", "placement", "always"));
  OK(ctn_plan_compile(g, 1, &c, &o, &p2));
  OK(ctn_plan_backend_steps(p2, "opencl", "matmul", &on_ocl));
  EXPECT_EQ(on_ocl, 1u);
  ctn_plan_release(p2);
  ctn_plan_release(p);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}

}  // namespace

// ---- GEMM paths ----------------------------------------------------------------------------------
// Small GEMMs run the backend's own kernel (no CLBlast start-up cost), larger ones CLBlast;
// CHUTNEY_OPENCL_SMALL_GEMM (read when a plan is compiled) moves the threshold. Both paths, every
// transpose combination and a broadcast batch must match the CPU backend.
namespace {
std::vector<float> run_matmul(ctn_context *ctx, const char *backend, std::vector<int64_t> as,
                              std::vector<int64_t> bs, int ta, int tb, const std::vector<float> &av,
                              const std::vector<float> &bv, uint32_t *dev_steps) {
  std::vector<float> out;
  ctn_graph *g = nullptr;
  EXPECT_EQ(ctn_graph_create(ctx, 0, &g), CTN_OK);
  ctn_node a, b, y;
  EXPECT_EQ(ctn_input(g, "a", CTN_F32, static_cast<uint32_t>(as.size()), as.data(), &a), CTN_OK);
  EXPECT_EQ(ctn_input(g, "b", CTN_F32, static_cast<uint32_t>(bs.size()), bs.data(), &b), CTN_OK);
  EXPECT_EQ(ctn_matmul(g, a, b, ta, tb, &y), CTN_OK) << ctn_last_error();
  ctn_plan *p = nullptr;
  EXPECT_EQ(ocl_test::compile_for(g, 1, &y, backend, &p), CTN_OK) << ctn_last_error();
  if (!p) return out;
  ctn_plan_backend_steps(p, backend, "matmul", dev_steps);
  ctn_tensor *at = nullptr, *bt = nullptr, *yt = nullptr;
  at = ocl_test::tensor(as, av);
  bt = ocl_test::tensor(bs, bv);
  ctn_plan_output_create(p, 0, &yt);
  ctn_node fn[] = {a, b};
  const ctn_tensor *fv[] = {at, bt};
  EXPECT_EQ(ctn_plan_run(p, 2, fn, fv, 1, &yt), CTN_OK) << ctn_last_error();
  int64_t numel = 0;
  ctn_tensor_numel(yt, &numel);
  out.resize(static_cast<size_t>(numel));
  EXPECT_EQ(ctn_tensor_read(yt, out.data(), out.size() * sizeof(float)), CTN_OK);
  for (ctn_tensor *t : {at, bt, yt}) ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_graph_release(g);
  return out;
}
}  // namespace

TEST(Gemm, SmallKernelAndClblastMatchCpu) {
  ctn_context *ctx = make_context();
  ASSERT_NE(ctx, nullptr);
  REQUIRE_OPENCL(ctx);
  OK(ctn_context_set_option(ctx, "opencl", "placement", "always"));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Case {
    int64_t batch, m, n, k;
  };
  for (const char *threshold : {"", "0"}) {  // default (small sizes: own kernel), 0: CLBlast
    if (*threshold) setenv("CHUTNEY_OPENCL_SMALL_GEMM", threshold, 1);
    for (Case c : {Case{3, 7, 5, 9}, Case{1, 33, 17, 64}}) {
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          std::vector<int64_t> as = {c.batch, ta ? c.k : c.m, ta ? c.m : c.k};
          std::vector<int64_t> bs = {tb ? c.n : c.k, tb ? c.k : c.n};  // broadcast over the batch
          std::vector<float> av(static_cast<size_t>(c.batch * c.m * c.k)), bv(static_cast<size_t>(c.k * c.n));
          for (float &v : av) v = u(rng);
          for (float &v : bv) v = u(rng);
          uint32_t dev = 0, cpu_steps = 0;
          std::vector<float> d = run_matmul(ctx, "opencl", as, bs, ta, tb, av, bv, &dev);
          std::vector<float> h = run_matmul(ctx, "cpu", as, bs, ta, tb, av, bv, &cpu_steps);
          EXPECT_EQ(dev, 1u);
          ASSERT_EQ(d.size(), static_cast<size_t>(c.batch * c.m * c.n));
          ASSERT_EQ(d.size(), h.size());
          for (size_t i = 0; i < d.size(); ++i)
            ASSERT_NEAR(d[i], h[i], 1e-4f * (1.0f + std::fabs(h[i])))
                << "threshold '" << threshold << "' ta " << ta << " tb " << tb << " element " << i;
        }
    }
    if (*threshold) unsetenv("CHUTNEY_OPENCL_SMALL_GEMM");
  }
  ctn_context_release(ctx);
}

// concat on the device against the expected values: along the first axis (one row each, as the
// batch_norm statistics' [1, C] + [1, C] -> [2, C]) and the last, of inputs and of reductions'
// results viewed as rows (operands inside the plan's buffers, at offsets).
TEST(Shape, ConcatAlongFirstAndLastAxes) {
  ctn_context *ctx = make_context();
  ASSERT_NE(ctx, nullptr);
  REQUIRE_OPENCL(ctx);
  OK(ctn_context_set_option(ctx, "opencl", "placement", "always"));
  struct Case {
    std::vector<int64_t> a, b;
    int64_t axis;
  };
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = "opencl";
  for (const Case &c : {Case{{1, 4}, {1, 4}, 0}, Case{{2, 3}, {1, 3}, 0}, Case{{2, 3}, {2, 2}, 1}, Case{{1, 1}, {1, 1}, 0},
                        Case{{4}, {3}, 0}}) {
    SCOPED_TRACE("axis " + std::to_string(c.axis) + " a rank " + std::to_string(c.a.size()));
    ctn_graph *g = nullptr;
    OK(ctn_graph_create(ctx, 0, &g));
    ctn_node a, b, y;
    OK(ctn_input(g, "a", CTN_F32, static_cast<uint32_t>(c.a.size()), c.a.data(), &a));
    OK(ctn_input(g, "b", CTN_F32, static_cast<uint32_t>(c.b.size()), c.b.data(), &b));
    ctn_node both[2] = {a, b};
    ctn_attrs at{};
    at.ni = 1;
    at.i[0] = c.axis;
    OK(ctn_op(g, CTN_OP_CONCAT, 2, both, &at, &y));
    int64_t na = 1, nb = 1;
    for (int64_t d : c.a) na *= d;
    for (int64_t d : c.b) nb *= d;
    std::vector<float> av(static_cast<size_t>(na)), bv(static_cast<size_t>(nb));
    for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i + 1);
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = -static_cast<float>(i + 1);
    ctn_tensor *at_ = make_f32(c.a, av), *bt = make_f32(c.b, bv);
    std::vector<std::vector<float>> r = run_once(g, {y}, {a, b}, {at_, bt}, &o);
    ASSERT_EQ(r.size(), 1u);
    const int64_t rows = c.axis == 0 ? 1 : c.a[0];  // the inputs interleaved along the axis
    const int64_t ca = na / rows, cb = nb / rows;
    std::vector<float> want;
    for (int64_t i = 0; i < rows; ++i) {
      want.insert(want.end(), av.begin() + i * ca, av.begin() + (i + 1) * ca);
      want.insert(want.end(), bv.begin() + i * cb, bv.begin() + (i + 1) * cb);
    }
    EXPECT_EQ(r[0], want);
    ctn_tensor_release(at_);
    ctn_tensor_release(bt);
    ctn_graph_release(g);
  }
  // Per-channel mean and max of x [2, 3, 2] over axes 0 and 2, each reshaped to [1, 3], stacked.
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  const int64_t xs[3] = {2, 3, 2}, rs[2] = {1, 3};
  const int32_t axes[2] = {0, 2};
  ctn_node x, m, mx, m1, mx1, y;
  OK(ctn_input(g, "x", CTN_F32, 3, xs, &x));
  OK(ctn_mean(g, x, 2, axes, 0, &m));
  OK(ctn_max(g, x, 2, axes, 0, &mx));
  OK(ctn_reshape(g, m, 2, rs, &m1));
  OK(ctn_reshape(g, mx, 2, rs, &mx1));
  ctn_node both[2] = {m1, mx1};
  ctn_attrs at{};
  at.ni = 1;
  OK(ctn_op(g, CTN_OP_CONCAT, 2, both, &at, &y));
  ctn_tensor *xt = make_f32({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  std::vector<std::vector<float>> r = run_once(g, {y}, {x}, {xt}, &o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], (std::vector<float>{4.5f, 6.5f, 8.5f, 8, 10, 12}));
  ctn_graph_release(g);
  // Mean and max over the last axis, [2, 3] each, side by side: [2, 6] (several rows per operand).
  OK(ctn_graph_create(ctx, 0, &g));
  const int32_t last = 2;
  OK(ctn_input(g, "x", CTN_F32, 3, xs, &x));
  OK(ctn_mean(g, x, 1, &last, 0, &m));
  OK(ctn_max(g, x, 1, &last, 0, &mx));
  ctn_node side[2] = {m, mx};
  at.i[0] = 1;
  OK(ctn_op(g, CTN_OP_CONCAT, 2, side, &at, &y));
  r = run_once(g, {y}, {x}, {xt}, &o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], (std::vector<float>{1.5f, 3.5f, 5.5f, 2, 4, 6, 7.5f, 9.5f, 11.5f, 8, 10, 12}));
  ctn_tensor_release(xt);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}
