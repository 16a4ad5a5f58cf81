// Op libraries with device kernels (ABI 1.2, abi/chutney/opencl.h): the example library
// plugins/swish brings its own OpenCL kernels. On every available backend for which the library
// declares a kernel, swish and its gradient (swish_grad) must run on that backend (no step on any
// other backend, no transfer), and match a double-precision reference and finite differences.
// A backend the library has no kernel for is reported as skipped, never as a pass; a device
// backend it does have kernels for (opencl, vulkan) failing to take them is a failure: no silent
// CPU fallback.
#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "conformance.hpp"

#ifndef CTN_CONF_SWISH_PLUGIN
#define CTN_CONF_SWISH_PLUGIN ""
#endif

namespace conf {
namespace {

// The backends plugins/swish declares kernels for (swish.c; "vulkan" where the build had the
// Vulkan headers and glslc, as every build that has the Vulkan backend does).
bool swish_has_kernel(const std::string &backend) {
  return backend == "cpu" || backend == "opencl" || backend == "vulkan";
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double swish_ref(double x) { return x * sigmoid(x); }
double swish_prime(double x) {
  const double s = sigmoid(x);
  return s + x * s * (1.0 - s);
}

struct Ctx {
  ctn_context *ctx = nullptr;
  ~Ctx() {
    if (ctx) ctn_context_release(ctx);
  }
};

std::string last() { return ctn_last_error(); }

std::string plan_text(ctn_plan *p) {
  const char *text = nullptr;
  if (ctn_plan_describe(p, &text) != CTN_OK || text == nullptr) return "(no description)";
  return text;
}

// x (n values in [-6, 6], none at 0), w: loss = sum(swish(x) * w); outputs y = swish(x), dloss/dx.
struct Case {
  int64_t n = 0;
  std::vector<double> x, w;
};

Case make_case(int64_t n) {
  Case c;
  c.n = n;
  for (int64_t i = 0; i < n; ++i) {
    c.x.push_back(-6.0 + 12.0 * (static_cast<double>(i) + 0.37) / static_cast<double>(n));
    c.w.push_back(std::cos(0.7 * static_cast<double>(i)) + 0.1);
  }
  return c;
}

class SwishDevice : public ::testing::TestWithParam<std::tuple<std::string, ctn_dtype>> {
 protected:
  void SetUp() override {
    backend_ = std::get<0>(GetParam());
    dt_ = std::get<1>(GetParam());
    const BackendEntry *b = find_backend(backend_);
    ASSERT_NE(b, nullptr);
    if (!b->available) GTEST_SKIP() << backend_ << " " << with_state(*b);
    if (!swish_has_kernel(backend_))
      GTEST_SKIP() << "plugins/swish declares no kernel for backend " << backend_;
    if (std::strlen(CTN_CONF_SWISH_PLUGIN) == 0) GTEST_SKIP() << "swish op library not built";
    ctn_context_options o{};
    o.struct_size = sizeof o;
    o.flags = CTN_CONTEXT_NO_AUTOLOAD;
    ASSERT_EQ(ctn_context_create(&o, &c_.ctx), CTN_OK) << last();
    // The backend under test from the path the suite found it at, the CPU beside it (as in an
    // installed runtime), then the op library.
    ctn_status s = ctn_context_load_plugin(c_.ctx, b->path.c_str());
    ASSERT_EQ(s, CTN_OK) << "loading " << b->path << ": " << last();
    if (backend_ != "cpu") {
      const BackendEntry *cpu = find_backend("cpu");
      if (cpu && !cpu->path.empty()) (void)ctn_context_load_plugin(c_.ctx, cpu->path.c_str());
      (void)ctn_context_set_option(c_.ctx, backend_.c_str(), "placement", "always");
    }
    ASSERT_EQ(ctn_context_load_plugin(c_.ctx, CTN_CONF_SWISH_PLUGIN), CTN_OK) << last();
  }

  // Compiles {swish(x), d sum(swish(x) * w) / dx} for `backend_` only.
  void compile(ctn_graph *g, ctn_node *x, ctn_node *w, ctn_node outs[2], ctn_plan **p, int64_t n) {
    ASSERT_EQ(ctn_input(g, "x", dt_, 1, &n, x), CTN_OK) << last();
    ASSERT_EQ(ctn_input(g, "w", dt_, 1, &n, w), CTN_OK) << last();
    ctn_node y, yw, loss;
    ASSERT_EQ(ctn_op(g, "swish", 1, x, nullptr, &y), CTN_OK) << last();
    ASSERT_EQ(ctn_mul(g, y, *w, &yw), CTN_OK) << last();
    ASSERT_EQ(ctn_sum(g, yw, 0, nullptr, 0, &loss), CTN_OK) << last();
    ctn_node gx;
    ASSERT_EQ(ctn_grad(g, loss, 1, x, &gx), CTN_OK) << last();
    outs[0] = y;
    outs[1] = gx;
    ctn_compile_options o = compile_options(backend_, false);
    o.backends = backend_.c_str();
    ctn_status s = ctn_plan_compile(g, 2, outs, &o, p);
    // A device without doubles: the library's kernel maker says so (its reason names the
    // missing extension); that is reported as skipped, with the reason.
    if (s == CTN_ERR_UNSUPPORTED && dt_ == CTN_F64 &&
        (last().find("cl_khr_fp64") != std::string::npos || last().find("shaderFloat64") != std::string::npos))
      GTEST_SKIP() << backend_ << ": " << last();
    ASSERT_EQ(s, CTN_OK) << "swish on " << backend_ << " (" << ctn_dtype_name(dt_)
                         << "): the library declares a kernel for it, yet: " << last();
  }

  std::vector<double> run(ctn_plan *p, ctn_node xn, ctn_node wn, const Case &c, uint32_t which,
                          std::vector<double> *second = nullptr) {
    std::vector<double> out;
    auto make = [&](const std::vector<double> &v, ctn_tensor **t) {
      int64_t n = c.n;
      if (dt_ == CTN_F32) {
        std::vector<float> f(v.begin(), v.end());
        return ctn_tensor_create(dt_, 1, &n, f.data(), t);
      }
      return ctn_tensor_create(dt_, 1, &n, v.data(), t);
    };
    ctn_tensor *xt = nullptr, *wt = nullptr, *o[2] = {nullptr, nullptr};
    EXPECT_EQ(make(c.x, &xt), CTN_OK) << last();
    EXPECT_EQ(make(c.w, &wt), CTN_OK) << last();
    for (int i = 0; i < 2; ++i) EXPECT_EQ(ctn_plan_output_create(p, i, &o[i]), CTN_OK) << last();
    ctn_node fn[] = {xn, wn};
    const ctn_tensor *fv[] = {xt, wt};
    EXPECT_EQ(ctn_plan_run(p, 2, fn, fv, 2, o), CTN_OK) << last();
    auto read = [&](ctn_tensor *t) {
      std::vector<double> v(static_cast<size_t>(c.n));
      if (dt_ == CTN_F32) {
        std::vector<float> f(v.size());
        EXPECT_EQ(ctn_tensor_read(t, f.data(), f.size() * sizeof(float)), CTN_OK) << last();
        std::copy(f.begin(), f.end(), v.begin());
      } else {
        EXPECT_EQ(ctn_tensor_read(t, v.data(), v.size() * sizeof(double)), CTN_OK) << last();
      }
      return v;
    };
    out = read(o[which]);
    if (second) *second = read(o[1 - which]);
    ctn_tensor_release(xt);
    ctn_tensor_release(wt);
    ctn_tensor_release(o[0]);
    ctn_tensor_release(o[1]);
    return out;
  }

  Ctx c_;
  std::string backend_;
  ctn_dtype dt_ = CTN_F32;
};

TEST_P(SwishDevice, RunsOnTheBackendAndMatchesReference) {
  ctn_graph *g = nullptr;
  ASSERT_EQ(ctn_graph_create(c_.ctx, 0, &g), CTN_OK) << last();
  ctn_node x, w, outs[2];
  ctn_plan *p = nullptr;
  const Case c = make_case(1027);  // not a multiple of any work-group size
  compile(g, &x, &w, outs, &p, c.n);
  if (HasFatalFailure() || IsSkipped() || p == nullptr) {
    ctn_graph_release(g);
    return;
  }
  // Placement: both library ops on the backend under test, nothing anywhere else, no transfer.
  uint32_t n_swish = 0, n_grad = 0, n_transfer = 0;
  ASSERT_EQ(ctn_plan_backend_steps(p, backend_.c_str(), "swish", &n_swish), CTN_OK);
  ASSERT_EQ(ctn_plan_backend_steps(p, backend_.c_str(), "swish_grad", &n_grad), CTN_OK);
  ASSERT_EQ(ctn_plan_backend_steps(p, backend_.c_str(), "transfer", &n_transfer), CTN_OK);
  EXPECT_EQ(n_swish, 1u) << plan_text(p);
  EXPECT_EQ(n_grad, 1u) << plan_text(p);
  EXPECT_EQ(n_transfer, 0u) << plan_text(p);
  for (const auto &b : backend_entries()) {
    if (b.name == backend_) continue;
    uint32_t other = 0;
    ASSERT_EQ(ctn_plan_backend_steps(p, b.name.c_str(), nullptr, &other), CTN_OK);
    EXPECT_EQ(other, 0u) << other << " step(s) on " << b.name << "\n" << plan_text(p);
  }
  std::vector<double> gx;
  const std::vector<double> y = run(p, x, w, c, 0, &gx);
  const double tol = dt_ == CTN_F32 ? 2e-6 : 1e-13;
  ASSERT_EQ(y.size(), c.x.size());
  for (size_t i = 0; i < c.x.size(); ++i) {
    const double xi = dt_ == CTN_F32 ? static_cast<double>(static_cast<float>(c.x[i])) : c.x[i];
    const double wi = dt_ == CTN_F32 ? static_cast<double>(static_cast<float>(c.w[i])) : c.w[i];
    ASSERT_NEAR(y[i], swish_ref(xi), tol * std::max(1.0, std::fabs(swish_ref(xi)))) << "swish, element " << i;
    ASSERT_NEAR(gx[i], wi * swish_prime(xi), 4 * tol * std::max(1.0, std::fabs(wi))) << "d/dx, element " << i;
  }
  ctn_plan_release(p);
  ctn_graph_release(g);
}

// Gradient by central differences through the forward kernel on the device (f64: the step is
// small enough for the finite difference to agree with the analytic value to 1e-7).
TEST_P(SwishDevice, GradientMatchesFiniteDifferences) {
  if (dt_ != CTN_F64) GTEST_SKIP() << "finite differences need f64";
  ctn_graph *g = nullptr;
  ASSERT_EQ(ctn_graph_create(c_.ctx, 0, &g), CTN_OK) << last();
  ctn_node x, w, outs[2];
  ctn_plan *p = nullptr;
  const Case c = make_case(9);
  compile(g, &x, &w, outs, &p, c.n);
  if (HasFatalFailure() || IsSkipped() || p == nullptr) {
    ctn_graph_release(g);
    return;
  }
  std::vector<double> y0;
  const std::vector<double> gx = run(p, x, w, c, 1, &y0);
  const double h = 1e-6;
  for (size_t i = 0; i < c.x.size(); ++i) {
    Case cp = c, cm = c;
    cp.x[i] += h;
    cm.x[i] -= h;
    const std::vector<double> yp = run(p, x, w, cp, 0), ym = run(p, x, w, cm, 0);
    double lp = 0, lm = 0;
    for (size_t j = 0; j < c.x.size(); ++j) {
      lp += yp[j] * c.w[j];
      lm += ym[j] * c.w[j];
    }
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(gx[i], fd, 1e-7 * std::max(1.0, std::fabs(fd))) << "element " << i;
  }
  ctn_plan_release(p);
  ctn_graph_release(g);
}

// Vulkan plans record each segment into one command buffer, the library's dispatch included
// (vulkan.h's hook). With "record" = "off" every step is submitted alone (the hook's lone-call
// path): the same plan must give the same bits.
TEST_P(SwishDevice, VulkanRecordedAndUnrecordedAgree) {
  if (backend_ != "vulkan") GTEST_SKIP() << "Vulkan only (the record option)";
  const Case c = make_case(300);
  std::vector<double> runs[2], grads[2];
  void *proc = nullptr, *state = nullptr;
  ASSERT_EQ(ctn_context_backend_proc(c_.ctx, "vulkan", "ctn_vulkan_submits", &proc, &state), CTN_OK) << last();
  auto submits = reinterpret_cast<uint64_t (*)(void *)>(proc);
  uint64_t n_submits[2] = {0, 0};
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_EQ(ctn_context_set_option(c_.ctx, "vulkan", "record", pass == 0 ? "on" : "off"), CTN_OK) << last();
    ctn_graph *g = nullptr;
    ASSERT_EQ(ctn_graph_create(c_.ctx, 0, &g), CTN_OK) << last();
    ctn_node x, w, outs[2];
    ctn_plan *p = nullptr;
    compile(g, &x, &w, outs, &p, c.n);
    if (HasFatalFailure() || IsSkipped() || p == nullptr) {
      ctn_graph_release(g);
      return;
    }
    const uint64_t before = submits(state);
    runs[pass] = run(p, x, w, c, 0, &grads[pass]);
    n_submits[pass] = submits(state) - before;
    ctn_plan_release(p);
    ctn_graph_release(g);
  }
  // Recorded: the whole plan (swish, mul, sum and the backward steps) in one segment's command
  // buffer; unrecorded: one submission per step, the library's two included.
  EXPECT_EQ(n_submits[0], 1u) << "recorded " << n_submits[0] << ", unrecorded " << n_submits[1];
  EXPECT_GE(n_submits[1], 3u) << "recorded " << n_submits[0] << ", unrecorded " << n_submits[1];
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) {
    EXPECT_EQ(runs[0][i], runs[1][i]) << "swish, element " << i;
    EXPECT_EQ(grads[0][i], grads[1][i]) << "d/dx, element " << i;
    EXPECT_NEAR(runs[0][i], swish_ref(dt_ == CTN_F32 ? static_cast<double>(static_cast<float>(c.x[i])) : c.x[i]),
                1e-5 * std::max(1.0, std::fabs(c.x[i])));
  }
}

// Eager execution asks the same kernel makers (core/exec/eager.cpp).
TEST_P(SwishDevice, EagerRunsOnTheBackend) {
  ASSERT_EQ(ctn_context_set_backends(c_.ctx, backend_.c_str()), CTN_OK) << last();
  ctn_graph *g = nullptr;
  ASSERT_EQ(ctn_graph_create(c_.ctx, CTN_GRAPH_EAGER, &g), CTN_OK) << last();
  const Case c = make_case(130);
  int64_t n = c.n;
  ctn_tensor *xt = nullptr;
  std::vector<float> xf(c.x.begin(), c.x.end());
  ASSERT_EQ(ctn_tensor_create(dt_, 1, &n, dt_ == CTN_F32 ? static_cast<const void *>(xf.data()) : c.x.data(), &xt),
            CTN_OK);
  ctn_node x, y;
  ASSERT_EQ(ctn_variable(g, "x", xt, &x), CTN_OK) << last();
  ctn_status s = ctn_op(g, "swish", 1, &x, nullptr, &y);
  if (s == CTN_ERR_UNSUPPORTED && dt_ == CTN_F64 &&
      (last().find("cl_khr_fp64") != std::string::npos || last().find("shaderFloat64") != std::string::npos)) {
    const std::string why = last();
    ctn_tensor_release(xt);
    ctn_graph_release(g);
    GTEST_SKIP() << backend_ << ": " << why;
  }
  ASSERT_EQ(s, CTN_OK) << "eager swish on " << backend_ << ": " << last();
  ctn_tensor *yt = nullptr;
  ASSERT_EQ(ctn_graph_value(g, y, &yt), CTN_OK) << last();
  std::vector<double> got(static_cast<size_t>(n));
  if (dt_ == CTN_F32) {
    std::vector<float> f(got.size());
    ASSERT_EQ(ctn_tensor_read(yt, f.data(), f.size() * 4), CTN_OK);
    std::copy(f.begin(), f.end(), got.begin());
  } else {
    ASSERT_EQ(ctn_tensor_read(yt, got.data(), got.size() * 8), CTN_OK);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double xi = dt_ == CTN_F32 ? static_cast<double>(xf[i]) : c.x[i];
    EXPECT_NEAR(got[i], swish_ref(xi), (dt_ == CTN_F32 ? 2e-6 : 1e-13) * std::max(1.0, std::fabs(xi))) << i;
  }
  ctn_tensor_release(yt);
  ctn_tensor_release(xt);
  ctn_graph_release(g);
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<std::string, ctn_dtype>> &i) {
  return std::get<0>(i.param) + "_" + ctn_dtype_name(std::get<1>(i.param));
}

INSTANTIATE_TEST_SUITE_P(OpLib, SwishDevice,
                         ::testing::Combine(::testing::ValuesIn(backend_names()),
                                            ::testing::Values(CTN_F32, CTN_F64)),
                         param_name);

}  // namespace
}  // namespace conf
