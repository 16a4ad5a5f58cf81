// Accuracy of the CPU backend's f32 exp, log, tanh and sigmoid (backends/cpu/vmath.h, the
// vectorised functions) against the correctly rounded result (the double-precision libm value
// rounded to float) and against glibc's own float functions, in ulps, over dense sweeps of the
// float range plus the special values. The suite runs again with CHUTNEY_CPU_ISA=generic and
// =avx2 (tests conformance-scalar, conformance-avx2), so every variant is held to the same bounds.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "case_helpers.hpp"

namespace conf {
namespace {

struct Del {
  void operator()(ctn_graph *p) const { ctn_graph_release(p); }
  void operator()(ctn_plan *p) const { ctn_plan_release(p); }
  void operator()(ctn_tensor *p) const { ctn_tensor_release(p); }
};

// Distance in units in the last place: the floats' order as integers (sign-magnitude to
// two's complement), so that -0 and +0 are 0 apart and the subnormals count one each.
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  const int64_t oa = ia < 0 ? -static_cast<int64_t>(ia & 0x7fffffff) : ia;
  const int64_t ob = ib < 0 ? -static_cast<int64_t>(ib & 0x7fffffff) : ib;
  return oa > ob ? oa - ob : ob - oa;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every 4099th bit pattern of each sign (~1 M values over the whole float range: normals,
// subnormals, both zeros, both infinities) plus the values near each function's branch points.
std::vector<float> sweep() {
  std::vector<float> xs;
  for (uint32_t u = 0; u <= 0x7f800000u; u += 4099) {
    xs.push_back(from_bits(u));
    xs.push_back(from_bits(u | 0x80000000u));
  }
  const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.625f, -0.625f, 1.41421356f, 0.70710678f,
                           88.7228394f, 88.72284f, 89.0f, -87.3365f, -103.97f, -104.0f, -150.0f,
                           std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (float s : special)
    for (int d = -64; d <= 64; ++d) {
      float v = s;
      for (int k = 0; k < (d < 0 ? -d : d); ++k) v = std::nextafter(v, d < 0 ? -INFINITY : INFINITY);
      xs.push_back(v);
    }
  // Dense around the range that matters in training.
  for (int i = 0; i < 200000; ++i) xs.push_back(-20.0f + 40.0f * static_cast<float>(i) / 200000.0f);
  return xs;
}

struct Fn {
  const char *name;
  UnaryFn build;
  double (*ref)(double);
  float (*libm)(float);
  int64_t max_ulp;  // the bound documented in backends/cpu/vmath.h
};

double sigmoid_d(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }
float sigmoid_f(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}
double exp_d(double x) { return std::exp(x); }
double log_d(double x) { return std::log(x); }
double tanh_d(double x) { return std::tanh(x); }
float exp_f(float x) { return std::exp(x); }
float log_f(float x) { return std::log(x); }
float tanh_f(float x) { return std::tanh(x); }

// "cpu" in the name: the forced-ISA reruns (conformance-scalar, -avx2) select it.
TEST(Vmath, cpu_f32_within_documented_ulps) {
  ctn_context *ctx = context();
  ASSERT_NE(ctx, nullptr) << setup_error();
  const BackendEntry *cpu = find_backend("cpu");
  if (cpu == nullptr || !cpu->available) GTEST_SKIP() << "the cpu backend is not available here";
  const std::vector<float> xs = sweep();
  const int64_t n = static_cast<int64_t>(xs.size());
  const Fn fns[] = {{"exp", ctn_exp, exp_d, exp_f, 2},
                    {"log", ctn_log, log_d, log_f, 2},
                    {"tanh", ctn_tanh, tanh_d, tanh_f, 2},
                    {"sigmoid", ctn_sigmoid, sigmoid_d, sigmoid_f, 3}};
  for (const Fn &fn : fns) {
    ctn_graph *graw = nullptr;
    CTN_ASSERT_OK(ctn_graph_create(ctx, 0, &graw));
    std::unique_ptr<ctn_graph, Del> g(graw);
    ctn_node x = CTN_NODE_NONE, y = CTN_NODE_NONE;
    CTN_ASSERT_OK(ctn_input(g.get(), "x", CTN_F32, 1, &n, &x));
    CTN_ASSERT_OK(fn.build(g.get(), x, &y));
    ctn_compile_options o = compile_options("cpu", false);
    ctn_plan *praw = nullptr;
    CTN_ASSERT_OK(ctn_plan_compile(g.get(), 1, &y, &o, &praw));
    std::unique_ptr<ctn_plan, Del> p(praw);
    ctn_tensor *in = nullptr, *out = nullptr;
    CTN_ASSERT_OK(ctn_tensor_create(CTN_F32, 1, &n, xs.data(), &in));
    std::unique_ptr<ctn_tensor, Del> tin(in);
    CTN_ASSERT_OK(ctn_plan_output_create(p.get(), 0, &out));
    std::unique_ptr<ctn_tensor, Del> tout(out);
    const ctn_tensor *feeds[] = {in};
    ctn_tensor *outs[] = {out};
    CTN_ASSERT_OK(ctn_plan_run(p.get(), 1, &x, feeds, 1, outs));
    std::vector<float> got(xs.size());
    CTN_ASSERT_OK(ctn_tensor_read(out, got.data(), got.size() * sizeof(float)));

    int64_t worst = 0, worst_libm = 0, libm_worst = 0, bad = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = static_cast<float>(fn.ref(static_cast<double>(xs[i])));
      const float lib = fn.libm(xs[i]);
      if (std::isnan(want)) {
        if (!std::isnan(got[i]) && bad++ < 5) ADD_FAILURE() << fn.name << "(" << xs[i] << ") = " << got[i] << ", expected NaN";
        continue;
      }
      // Infinities exactly; a zero input's zero result (tanh(-0) = -0) with its sign.
      const bool exact = std::isinf(want) || (want == 0.0f && xs[i] == 0.0f);
      if (exact && (got[i] != want || std::signbit(got[i]) != std::signbit(want)) && bad++ < 5)
        ADD_FAILURE() << fn.name << "(" << xs[i] << ") = " << got[i] << ", expected " << want;
      const int64_t d = ulp_distance(got[i], want);
      if (d > worst) worst = d, worst_x = xs[i];
      worst_libm = std::max(worst_libm, ulp_distance(got[i], lib));
      libm_worst = std::max(libm_worst, ulp_distance(lib, want));
    }
    EXPECT_LE(worst, fn.max_ulp) << fn.name << ": " << worst << " ulp from the correctly rounded value at x = "
                                 << worst_x;
    // Against glibc's float function: our error plus glibc's own.
    EXPECT_LE(worst_libm, fn.max_ulp + libm_worst) << fn.name;
    std::printf("[vmath] %s f32: max %lld ulp from the correctly rounded value (glibc's float %s: %lld), "
                "max %lld ulp from glibc's, %lld inputs\n",
                fn.name, static_cast<long long>(worst), fn.name, static_cast<long long>(libm_worst),
                static_cast<long long>(worst_libm), static_cast<long long>(n));
  }
}

}  // namespace
}  // namespace conf
