// The conformance tests, instantiated for every backend the context reports (available or not:
// an unavailable one is skipped with its reason).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "case_helpers.hpp"

namespace conf {
namespace {

using Param = std::tuple<std::string, size_t>;

std::string param_label(const std::string &backend, const std::string &row) {
  return param_name(backend) + "_" + param_name(row);
}

// ---- setup ----------------------------------------------------------------------------------------

TEST(ConformanceSetup, ContextAndPlugins) {
  ASSERT_NE(context(), nullptr) << setup_error();
  EXPECT_TRUE(setup_error().empty()) << setup_error();
  const char *vendor = std::getenv("CTN_CONFORMANCE_PLUGIN");
  bool has_cpu = false, has_vendor = vendor == nullptr;
  for (const auto &b : backend_entries()) {
    if (b.name == "cpu") {
      has_cpu = true;
      EXPECT_TRUE(b.available) << "the cpu backend must always be available: " << b.description;
    }
    // Compare file names: the core may record the path as given or resolved.
    if (vendor != nullptr) {
      std::string v = vendor, p = b.path;
      std::string vb = v.substr(v.find_last_of('/') + 1), pb = p.substr(p.find_last_of('/') + 1);
      if (!pb.empty() && vb == pb) has_vendor = true;
    }
  }
  EXPECT_TRUE(has_cpu) << "no cpu backend was loaded";
  EXPECT_TRUE(has_vendor) << "no backend came from " << vendor;
  // Runs that force or expect a CPU kernel variant (the scalar path, NEON on 32-bit ARM) name it
  // here, so a run that silently took another path fails instead of passing.
  if (const char *want = std::getenv("CTN_CONFORMANCE_EXPECT_CPU"); want && *want) {
    const BackendEntry *cpu = find_backend("cpu");
    ASSERT_NE(cpu, nullptr);
    EXPECT_NE(cpu->description.find(want), std::string::npos)
        << "CTN_CONFORMANCE_EXPECT_CPU='" << want << "' but the cpu backend is: " << cpu->description;
  }
}

// ---- forward ---------------------------------------------------------------------------------------

class Forward : public CaseTest {};

TEST_P(Forward, MatchesReference) { check_forward(forward_cases()); }

INSTANTIATE_TEST_SUITE_P(Ops, Forward, ::testing::ValuesIn(case_params(forward_cases())),
                         case_param_name(forward_cases));

// ---- gradients: finite differences ------------------------------------------------------------------

class Gradient : public CaseTest {};

TEST_P(Gradient, MatchesFiniteDifferences) { check_gradients(grad_cases()); }

INSTANTIATE_TEST_SUITE_P(Ops, Gradient, ::testing::ValuesIn(case_params(grad_cases())),
                         case_param_name(grad_cases));

// ---- gradients: documented subgradients and accumulation, exact values ------------------------------

struct Exact {
  std::string row;
  std::string op;
  Shape shape;
  std::vector<double> x;
  Build build;
  std::vector<double> expected;  // d sum(op(x)) / dx
};

const std::vector<Exact> &exact_cases() {
  static const std::vector<Exact> cases = {
      {"subgrad:relu'(0)=0", "relu", {5}, {-1, 0, 0, 2, 0.5}, un(ctn_relu), {0, 0, 0, 1, 1}},
      {"subgrad:abs'(0)=0", "abs", {4}, {-1, 0, 2, 0}, un(ctn_abs), {-1, 0, 1, 0}},
      {"subgrad:clamp'(lo)=clamp'(hi)=1",
       "clamp",
       {5},
       {-1, -0.5, 0, 0.5, 1},
       [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
         return ctn_clamp(g, n[0], -0.5, 0.5, o);
       },
       {0, 1, 1, 1, 0}},
      {"subgrad:leaky_relu'(0)=slope",
       "leaky_relu",
       {3},
       {-1, 0, 2},
       [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
         return ctn_leaky_relu(g, n[0], 0.25, o);
       },
       {0.25, 0.25, 1}},
      {"subgrad:max ties share equally",
       "max",
       {6},
       {1, 3, 3, 2, -1, 3},
       [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
         return ctn_max(g, n[0], 0, nullptr, 0, o);
       },
       {0, 1.0 / 3, 1.0 / 3, 0, 0, 1.0 / 3}},
      {"subgrad:max ties per row",
       "max",
       {2, 3},
       {1, 5, 5, 2, 2, 0},
       [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
         const int32_t ax = -1;
         return ctn_max(g, n[0], 1, &ax, 0, o);
       },
       {0, 0.5, 0.5, 0.5, 0.5, 0}},
      {"grad:accumulate(x*x+x)=2x+1",
       "mul",
       {4},
       {-1.5, 0, 0.25, 2},
       [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
         ctn_node sq = CTN_NODE_NONE;
         ctn_status s = ctn_mul(g, n[0], n[0], &sq);
         return s != CTN_OK ? s : ctn_add(g, sq, n[0], o);
       },
       {-2, 1, 1.5, 5}},
  };
  return cases;
}

class Subgradient : public BackendTest, public ::testing::WithParamInterface<Param> {
 protected:
  // d sum(op(x)) / dx through a plan (eager = false) or an eager graph.
  void run(const Exact &e, bool eager) {
    const std::string what = e.row + (eager ? " [eager]" : " [plan]") + " on " + backend_;
    if (eager) CTN_ASSERT_OK(ctn_context_set_backends(context(), backend_.c_str()));
    ctn_graph *graw = nullptr;
    CTN_ASSERT_OK(ctn_graph_create(context(), eager ? CTN_GRAPH_EAGER : 0, &graw));
    GraphPtr g(graw);
    TensorPtr xt(make_tensor(CTN_F64, e.shape, e.x));
    ASSERT_NE(xt, nullptr);
    ctn_node x = CTN_NODE_NONE, y = CTN_NODE_NONE, loss = CTN_NODE_NONE, dx = CTN_NODE_NONE;
    if (eager)
      CTN_ASSERT_OK(ctn_variable(g.get(), "x", xt.get(), &x));
    else
      CTN_ASSERT_OK(ctn_input(g.get(), "x", CTN_F64, static_cast<uint32_t>(e.shape.size()),
                              e.shape.data(), &x));
    ctn_status s = e.build(g.get(), {x}, CTN_F64, &y);
    if (s == CTN_ERR_UNSUPPORTED && backend_ != "cpu") return note_unsupported(ctn_last_error());
    ASSERT_EQ(s, CTN_OK) << what << ": " << status_text(s);
    uint32_t nd = 0;
    ctn_dtype dt = CTN_F64;
    CTN_ASSERT_OK(ctn_node_info(g.get(), y, &dt, &nd, nullptr));
    if (nd == 0)
      loss = y;
    else if ((s = ctn_sum(g.get(), y, 0, nullptr, 0, &loss)) == CTN_ERR_UNSUPPORTED && backend_ != "cpu")
      return note_unsupported(ctn_last_error());  // eager: the loss's sum runs on the backend too
    ASSERT_EQ(s, CTN_OK) << what << ": sum: " << status_text(s);
    s = ctn_grad(g.get(), loss, 1, &x, &dx);
    if (s == CTN_ERR_UNSUPPORTED && backend_ != "cpu") return note_unsupported(ctn_last_error());
    ASSERT_EQ(s, CTN_OK) << what << ": ctn_grad: " << status_text(s);
    Arr got;
    if (eager) {
      ctn_tensor *t = nullptr;
      CTN_ASSERT_OK(ctn_graph_value(g.get(), dx, &t));
      TensorPtr tp(t);
      got = read_tensor(t);
    } else {
      ctn_compile_options o = compile_options(backend_, false);
      ctn_plan *p = nullptr;
      // The loss is fetched too: with dx alone the forward op may be dead code (abs' needs
      // only x), and the test must see the op run on the backend.
      const ctn_node outs_nodes[] = {dx, loss};
      s = ctn_plan_compile(g.get(), 2, outs_nodes, &o, &p);
      if (s == CTN_ERR_UNSUPPORTED && backend_ != "cpu") return note_unsupported(ctn_last_error());
      ASSERT_EQ(s, CTN_OK) << what << ": compile: " << status_text(s);
      PlanPtr plan(p);
      uint32_t n = 0;
      CTN_ASSERT_OK(ctn_plan_backend_steps(p, backend_.c_str(), e.op.c_str(), &n));
      ASSERT_GE(n, 1u) << what << ": op " << e.op << " did not run on " << backend_;
      ctn_tensor *t = nullptr, *tl = nullptr;
      CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &t));
      TensorPtr out(t);
      CTN_ASSERT_OK(ctn_plan_output_create(p, 1, &tl));
      TensorPtr out_loss(tl);
      const ctn_tensor *feeds[] = {xt.get()};
      ctn_tensor *const outs[] = {t, tl};
      CTN_ASSERT_OK(ctn_plan_run(p, 1, &x, feeds, 2, outs));
      got = read_tensor(t);
    }
    ASSERT_EQ(got.v.size(), e.expected.size()) << what;
    for (size_t i = 0; i < e.expected.size(); ++i)
      EXPECT_NEAR(got.v[i], e.expected[i], 1e-12) << what << ": element " << i << " (x = "
                                                  << e.x[i] << ")";
    note_ran();
  }
};

TEST_P(Subgradient, DocumentedValues) {
  const auto &[backend, index] = GetParam();
  const Exact &e = exact_cases().at(index);
  begin(backend, e.row);
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_NO_FATAL_FAILURE(run(e, false));
  run(e, true);
}

INSTANTIATE_TEST_SUITE_P(Ops, Subgradient,
                         ::testing::Combine(::testing::ValuesIn(backend_names()),
                                            ::testing::Range<size_t>(0, exact_cases().size())),
                         [](const ::testing::TestParamInfo<Param> &info) {
                           return param_label(std::get<0>(info.param),
                                              exact_cases()[std::get<1>(info.param)].row);
                         });

// ---- passes: matmul + bias + activation with every pass on ------------------------------------------

class Fusion : public BackendTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(Fusion, MatmulBiasActivation) {
  const std::string backend = GetParam();
  begin(backend, "fusion:relu(matmul+bias)");
  if (IsSkipped() || HasFatalFailure()) return;
  Rng rng(seed_of("fusion"));
  Arr a = make_arr({3, 4}), b = make_arr({4, 5}), bias = make_arr({5});
  for (Arr *arr : {&a, &b, &bias})
    for (double &v : arr->v) v = uni(-1, 1)(rng);
  const Arr a0 = a, b0 = b, bias0 = bias;
  bool fused_any = false;
  for (ctn_dtype dt : {CTN_F32, CTN_F64}) {
    a = a0, b = b0, bias = bias0;
    for (Arr *arr : {&a, &b, &bias})  // the reference sees exactly the stored inputs
      for (double &v : arr->v) v = round_to(v, dt);
    Arr r = ref_map1(ref_map2(ref_matmul(a, b, false, false), bias,
                              [](double x, double y) { return x + y; }),
                     [](double v) { return v > 0 ? v : 0.0; });
    ctn_graph *graw = nullptr;
    CTN_ASSERT_OK(ctn_graph_create(context(), 0, &graw));
    GraphPtr g(graw);
    Nodes in(3);
    const Arr *arrs[] = {&a, &b, &bias};
    for (size_t i = 0; i < 3; ++i)
      CTN_ASSERT_OK(ctn_input(g.get(), nullptr, dt, static_cast<uint32_t>(arrs[i]->shape.size()),
                              arrs[i]->shape.data(), &in[i]));
    ctn_node mm = CTN_NODE_NONE, add = CTN_NODE_NONE, y = CTN_NODE_NONE;
    CTN_ASSERT_OK(ctn_matmul(g.get(), in[0], in[1], 0, 0, &mm));
    CTN_ASSERT_OK(ctn_add(g.get(), mm, in[2], &add));
    CTN_ASSERT_OK(ctn_relu(g.get(), add, &y));
    ctn_compile_options o = compile_options(backend, true);
    ctn_plan *p = nullptr;
    ctn_status s = ctn_plan_compile(g.get(), 1, &y, &o, &p);
    if (s == CTN_ERR_UNSUPPORTED && backend != "cpu") {
      note_unsupported(ctn_last_error());
      continue;
    }
    ASSERT_EQ(s, CTN_OK) << status_text(s);
    PlanPtr plan(p);
    ctn_plan_stats st{};
    st.struct_size = sizeof st;
    CTN_ASSERT_OK(ctn_plan_stats_get(p, &st));
    uint32_t on_backend = 0, fused = 0;
    CTN_ASSERT_OK(ctn_plan_backend_steps(p, backend.c_str(), nullptr, &on_backend));
    CTN_ASSERT_OK(ctn_plan_backend_steps(p, backend.c_str(), "matmul_bias_act", &fused));
    EXPECT_GE(on_backend, 1u);
    EXPECT_EQ(on_backend, st.n_steps) << "every step must run on " << backend;
    fused_any = fused_any || fused > 0;
    std::vector<TensorPtr> feeds;
    std::vector<const ctn_tensor *> fp;
    for (const Arr *arr : arrs) {
      feeds.emplace_back(make_tensor(dt, arr->shape, arr->v));
      fp.push_back(feeds.back().get());
    }
    ctn_tensor *t = nullptr;
    CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &t));
    TensorPtr out(t);
    ctn_tensor *const outs[] = {t};
    CTN_ASSERT_OK(ctn_plan_run(p, 3, in.data(), fp.data(), 1, outs));
    Arr got = read_tensor(t);
    EXPECT_LE(nmse(got, r), dt == CTN_F32 ? 1e-7 : 1e-20) << ctn_dtype_name(dt);
    note_ran();
  }
  pass_note_ = fused_any ? " (fused)" : " (not fused)";
}

INSTANTIATE_TEST_SUITE_P(Passes, Fusion, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return param_name(info.param);
                         });

// ---- 16-bit floats on the device backends ----------------------------------------------------------

// OpenCL and Vulkan run the elementwise ops, reductions and softmax (Vulkan also matmul,
// convolutions and pooling) in f16 themselves (the Forward cases check them); an op without
// 16-bit kernels on either (cross_entropy) declines f16 with a reason naming the dtype, and a plan
// listing the backend first places exp on it and the loss on the CPU, with the right value.
class GpuHalfFallback : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuHalfFallback, CrossEntropyFallsBackToTheCpu) {
  const std::string backend = GetParam();
  ASSERT_NE(context(), nullptr) << setup_error();
  const BackendEntry *b = find_backend(backend);
  if (b == nullptr || !b->available) GTEST_SKIP() << backend << " is not available here";
  int32_t supported = 1;
  const char *reason = nullptr;
  CTN_ASSERT_OK(ctn_context_op_support(context(), backend.c_str(), "cross_entropy", CTN_F16,
                                       &supported, &reason));
  EXPECT_EQ(supported, 0);
  EXPECT_NE(std::string(reason ? reason : "").find("f16"), std::string::npos) << reason;
  CTN_ASSERT_OK(ctn_context_op_support(context(), backend.c_str(), "exp", CTN_F16, &supported,
                                       &reason));
  if (!supported) {  // a device without 16-bit storage says so
    EXPECT_NE(std::string(reason ? reason : "").find("lacks"), std::string::npos) << reason;
    GTEST_SKIP() << backend << " has no f16 here: " << reason;
  }

  ctn_graph *graw = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(context(), 0, &graw));
  GraphPtr g(graw);
  const int64_t shape[2] = {3, 4}, lshape[1] = {3};
  ctn_node x = CTN_NODE_NONE, lab = CTN_NODE_NONE, e = CTN_NODE_NONE, y = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.get(), "x", CTN_F16, 2, shape, &x));
  CTN_ASSERT_OK(ctn_input(g.get(), "labels", CTN_I32, 1, lshape, &lab));
  CTN_ASSERT_OK(ctn_exp(g.get(), x, &e));
  CTN_ASSERT_OK(ctn_cross_entropy(g.get(), e, lab, &y));  // 0-d f16
  ctn_compile_options o = compile_options(backend, false);
  const std::string list = backend + ",cpu";
  o.backends = list.c_str();
  ctn_plan *praw = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(g.get(), 1, &y, &o, &praw));
  PlanPtr plan(praw);
  uint32_t exp_dev = 0, ce_dev = 0, ce_cpu = 0;
  CTN_ASSERT_OK(ctn_plan_backend_steps(plan.get(), backend.c_str(), "exp", &exp_dev));
  CTN_ASSERT_OK(ctn_plan_backend_steps(plan.get(), backend.c_str(), "cross_entropy", &ce_dev));
  CTN_ASSERT_OK(ctn_plan_backend_steps(plan.get(), "cpu", "cross_entropy", &ce_cpu));
  EXPECT_EQ(exp_dev, 1u);
  EXPECT_EQ(ce_dev, 0u);
  EXPECT_EQ(ce_cpu, 1u);

  Arr xin = make_arr({3, 4}), lin = make_arr({3});
  for (size_t i = 0; i < xin.v.size(); ++i)
    xin.v[i] = round_to(0.1875 * static_cast<double>((i * 7) % 12) - 1.0, CTN_F16);
  lin.v = {2, 0, 3};
  TensorPtr xt(make_tensor(CTN_F16, xin.shape, xin.v)), lt(make_tensor(CTN_I32, lin.shape, lin.v));
  ASSERT_NE(xt, nullptr) << ctn_last_error();
  ASSERT_NE(lt, nullptr) << ctn_last_error();
  ctn_tensor *oraw = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(plan.get(), 0, &oraw));
  TensorPtr out(oraw);
  const ctn_node feed_nodes[] = {x, lab};
  const ctn_tensor *feeds[] = {xt.get(), lt.get()};
  ctn_tensor *const outs[] = {out.get()};
  CTN_ASSERT_OK(ctn_plan_run(plan.get(), 2, feed_nodes, feeds, 1, outs));
  ctn_dtype odt = CTN_F32;
  Arr got = read_tensor(out.get(), &odt);
  EXPECT_EQ(odt, CTN_F16);
  ASSERT_EQ(got.v.size(), 1u);
  double want = 0;  // mean over rows of logsumexp(e) - e[label], e = exp(x) rounded to f16
  for (int64_t r = 0; r < 3; ++r) {
    double s = 0, el = 0;
    for (int64_t j = 0; j < 4; ++j) {
      const double v = round_to(std::exp(xin.v[r * 4 + j]), CTN_F16);
      s += std::exp(v);
      if (j == static_cast<int64_t>(lin.v[r])) el = v;
    }
    want += (std::log(s) - el) / 3;
  }
  EXPECT_NEAR(got.v[0], want, 2e-3 * std::fabs(want));
}

// The device casts round exactly as desc.h does, bit for bit: every f16 pattern widened, every f16
// value, the midpoints between neighbours (ties to even) and values just off them narrowed to f16
// and bf16, the subnormal range, overflow (65520 is the first f32 that becomes inf), NaN, inf and
// -0; with f64, values a hair off each midpoint (a double rounding would get them wrong).
class GpuHalfCasts : public ::testing::TestWithParam<std::string> {
 protected:
  // cast(in) on the backend under test only; false (and a skip) when it declines the cast.
  bool run_cast(ctn_dtype from, ctn_dtype to, const void *data, int64_t n, void *out, size_t out_bytes) {
    ctn_graph *graw = nullptr;
    EXPECT_EQ(ctn_graph_create(context(), 0, &graw), CTN_OK) << ctn_last_error();
    GraphPtr g(graw);
    ctn_node x = CTN_NODE_NONE, y = CTN_NODE_NONE;
    EXPECT_EQ(ctn_input(g.get(), "x", from, 1, &n, &x), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_cast(g.get(), x, to, &y), CTN_OK) << ctn_last_error();
    ctn_compile_options o = compile_options(GetParam(), false);
    ctn_plan *praw = nullptr;
    ctn_status st = ctn_plan_compile(g.get(), 1, &y, &o, &praw);
    PlanPtr plan(praw);
    if (st == CTN_ERR_UNSUPPORTED) {
      std::string why = ctn_last_error();
      // only a missing device feature ("... lacks storageBuffer16BitAccess", "f64 needs
      // shaderFloat64, which <device> lacks", "f64 needs cl_khr_fp64, which <device> does not offer")
      EXPECT_TRUE(why.find("lacks") != std::string::npos || why.find("does not offer") != std::string::npos) << why;
      return false;
    }
    EXPECT_EQ(st, CTN_OK) << ctn_last_error();
    if (st != CTN_OK) return false;
    uint32_t steps = 0;
    EXPECT_EQ(ctn_plan_backend_steps(plan.get(), GetParam().c_str(), "cast", &steps), CTN_OK);
    EXPECT_EQ(steps, 1u);
    ctn_tensor *xraw = nullptr, *oraw = nullptr;
    EXPECT_EQ(ctn_tensor_create(from, 1, &n, data, &xraw), CTN_OK) << ctn_last_error();
    TensorPtr xt(xraw);
    EXPECT_EQ(ctn_plan_output_create(plan.get(), 0, &oraw), CTN_OK) << ctn_last_error();
    TensorPtr ot(oraw);
    const ctn_tensor *feeds[] = {xt.get()};
    ctn_tensor *const outs[] = {ot.get()};
    EXPECT_EQ(ctn_plan_run(plan.get(), 1, &x, feeds, 1, outs), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_tensor_read(ot.get(), out, out_bytes), CTN_OK) << ctn_last_error();
    return !HasFailure();
  }
};

bool is_nan16(uint16_t h, bool bf) {
  return bf ? (h & 0x7fffu) > 0x7f80u : (h & 0x7fffu) > 0x7c00u;
}

TEST_P(GpuHalfCasts, RoundLikeDescH) {
  const BackendEntry *b = find_backend(GetParam());
  if (b == nullptr || !b->available) GTEST_SKIP() << GetParam() << " is not available here";
  // Widening: every 16-bit pattern, f16 and bf16.
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(65536);
  for (bool bf : {false, true}) {
    SCOPED_TRACE(bf ? "bf16 -> f32" : "f16 -> f32");
    if (!run_cast(bf ? CTN_BF16 : CTN_F16, CTN_F32, all.data(), 65536, wide.data(), wide.size() * 4)) {
      if (!HasFailure()) GTEST_SKIP() << GetParam() << " declines 16-bit casts here (reason checked)";
      return;
    }
    size_t bad = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      const float want = bf ? ctn_desc_bf16_to_f32(all[i]) : ctn_desc_f16_to_f32(all[i]);
      const bool ok = std::isnan(want) ? std::isnan(wide[i]) : std::memcmp(&want, &wide[i], 4) == 0;
      if (!ok && bad++ < 5) ADD_FAILURE() << "pattern " << i << ": got " << wide[i] << " want " << want;
    }
  }
  // Narrowing from f32: the f16 values (exact), the midpoints above them, one f32 ulp either side.
  std::vector<float> in;
  for (uint32_t i = 0; i < 0x7c00u; ++i) {
    const float v = ctn_desc_f16_to_f32(static_cast<uint16_t>(i));
    const float up = ctn_desc_f16_to_f32(static_cast<uint16_t>(i + 1));
    const float mid = v + (up - v) / 2;
    for (float f : {v, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      in.push_back(f);
      in.push_back(-f);
    }
  }
  for (float f : {65504.f, 65519.f, 65520.f, 1e6f, 3e38f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 1e-10f, 1.4e-45f, 3.0e38f * 1.1f})
    in.push_back(f);
  // Narrows `src` (dtype `from`) to f16 and to bf16 on the backend and compares every result with
  // desc.h's rounding of the same value (any NaN matches any NaN); false after a failure or a
  // decline (already reported).
  auto narrows_like_desc_h = [&](ctn_dtype from, const auto &src, auto want_of) {
    for (bool bf : {false, true}) {
      SCOPED_TRACE(std::string(from == CTN_F64 ? "f64" : "f32") + (bf ? " -> bf16" : " -> f16"));
      std::vector<uint16_t> got(src.size());
      if (!run_cast(from, bf ? CTN_BF16 : CTN_F16, src.data(), static_cast<int64_t>(src.size()), got.data(),
                    got.size() * 2))
        return false;
      size_t bad = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        const uint16_t want = want_of(src[i], bf);
        const bool ok = is_nan16(want, bf) ? is_nan16(got[i], bf) : got[i] == want;
        if (!ok && bad++ < 5)
          ADD_FAILURE() << std::hexfloat << src[i] << ": got 0x" << std::hex << got[i] << " want 0x" << want;
      }
      EXPECT_EQ(bad, 0u);
    }
    return true;
  };
  if (!narrows_like_desc_h(CTN_F32, in, [](float v, bool bf) { return bf ? ctn_desc_f32_to_bf16(v) : ctn_desc_f32_to_f16(v); }))
    return;
  // From f64: a hair off each f16 midpoint, where rounding to f32 first would land on the tie.
  std::vector<double> d;
  for (uint32_t i = 0x0400u; i < 0x7bffu; i += 7) {
    const double v = ctn_desc_f16_to_f32(static_cast<uint16_t>(i));
    const double mid = v + (static_cast<double>(ctn_desc_f16_to_f32(static_cast<uint16_t>(i + 1))) - v) / 2;
    d.push_back(mid * (1 + 1e-12));
    d.push_back(mid * (1 - 1e-12));
  }
  narrows_like_desc_h(CTN_F64, d, [](double v, bool bf) { return bf ? ctn_desc_f64_to_bf16(v) : ctn_desc_f64_to_f16(v); });
}

// v rounded to nearest even with `bits` significant bits, in integer arithmetic (exact for every
// i64, unlike a reference going through double past 2^53); the result is exact in float.
float round_int(int64_t v, int bits) {
  const bool neg = v < 0;
  uint64_t m = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  int top = 63;
  while (top > 0 && !((m >> top) & 1)) --top;
  const int shift = top - (bits - 1);
  if (m != 0 && shift > 0) {
    uint64_t q = m >> shift, rem = m & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
    q += rem > half || (rem == half && (q & 1));
    m = q << shift;  // q may have carried to 2^bits: still exact
  }
  const float f = std::ldexp(static_cast<float>(m >> std::max(shift, 0)), std::max(shift, 0));
  return neg ? -f : f;
}

// Integers narrow once too: values past 2^24 (where an int -> f32 -> 16-bit path would round
// twice) against desc.h's rounding of the exact value (conformance-vulkan-no-f64 checks Vulkan's
// path without doubles).
TEST_P(GpuHalfCasts, IntegersRoundOnce) {
  const BackendEntry *b = find_backend(GetParam());
  if (b == nullptr || !b->available) GTEST_SKIP() << GetParam() << " is not available here";
  std::vector<int64_t> v64;
  std::vector<int64_t> offsets = {-3, -1, 0, 1, 3};  // and each power of two (half a bf16 ulp) +-1
  for (int k = 7; k < 54; ++k)
    for (int64_t d : {-1, 0, 1}) offsets.push_back((int64_t(1) << k) + d);
  for (int64_t base : {int64_t(1) << 24, int64_t(1) << 25, int64_t(3) << 28, int64_t(1) << 40,
                       int64_t(1) << 60})
    for (int64_t d : offsets)
      for (int64_t sgn : {1, -1}) v64.push_back(sgn * (base + d));
  std::vector<int32_t> v32;
  for (int64_t v : v64)
    if (v >= INT32_MIN && v <= INT32_MAX) v32.push_back(static_cast<int32_t>(v));
  for (bool bf : {false, true})
    for (bool wide : {false, true}) {
      SCOPED_TRACE(std::string(wide ? "i64" : "i32") + (bf ? " -> bf16" : " -> f16"));
      const size_t n = wide ? v64.size() : v32.size();
      std::vector<uint16_t> got(n);
      if (!run_cast(wide ? CTN_I64 : CTN_I32, bf ? CTN_BF16 : CTN_F16,
                    wide ? static_cast<const void *>(v64.data()) : v32.data(), static_cast<int64_t>(n),
                    got.data(), n * 2)) {
        if (!HasFailure()) GTEST_SKIP() << GetParam() << " declines 16-bit casts here (reason checked)";
        return;
      }
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        const int64_t x = wide ? v64[i] : v32[i];
        const float r = round_int(x, bf ? 8 : 11);  // exact: the 16-bit conversion below does not round
        const uint16_t want = bf ? ctn_desc_f32_to_bf16(r) : ctn_desc_f32_to_f16(r);
        if (got[i] != want && bad++ < 5)
          ADD_FAILURE() << x << ": got 0x" << std::hex << got[i] << " want 0x" << want;
      }
      EXPECT_EQ(bad, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(Half, GpuHalfCasts, ::testing::Values("opencl", "vulkan"),
                         [](const ::testing::TestParamInfo<std::string> &i) { return i.param; });

INSTANTIATE_TEST_SUITE_P(Half, GpuHalfFallback, ::testing::Values("opencl", "vulkan"),
                         [](const ::testing::TestParamInfo<std::string> &i) { return i.param; });

}  // namespace
}  // namespace conf
