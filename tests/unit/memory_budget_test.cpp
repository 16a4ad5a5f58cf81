// Memory budgets (ctn_compile_options.memory_budget, compile/recompute.cpp): an MLP and a CNN,
// both with dropout and a step counter the plan increments, trained for several steps under
// budgets from just below the unbudgeted peak down to the minimum recomputation reaches. Every
// budgeted plan must meet its budget, recompute something, and give losses and weights
// bit-identical to the unbudgeted plan; a budget below the minimum fails at compile time with
// the minimum in the message. On the CPU, and on OpenCL (PoCL) and Vulkan (lavapipe) where those
// are available (skipped with the reason otherwise).
#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common/ok.h"

namespace {

constexpr int kSteps = 4;

struct Model {
  ctn_graph *g = nullptr;
  ctn_node x = 0, y = 0, step = 0, loss = 0;
  std::vector<ctn_node> params;
  std::vector<ctn_tensor *> owned;
  std::vector<float> xdata;
  std::vector<int32_t> ydata;
  std::vector<int64_t> xshape;
  ~Model() {
    for (ctn_tensor *t : owned) ctn_tensor_release(t);
    ctn_graph_release(g);
  }
};

ctn_tensor *tensor(std::vector<int64_t> shape, const std::vector<float> &v) {
  ctn_tensor *t = nullptr;
  ctn_tensor_create(CTN_F32, static_cast<uint32_t>(shape.size()), shape.data(), v.data(), &t);
  return t;
}

void add_var(Model &m, const char *name, std::vector<int64_t> shape, float scale, std::mt19937_64 &rng,
             ctn_node *n) {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(count);
  for (float &x : v) x = scale == 0 ? 1.0f : scale * nd(rng);
  ctn_tensor *t = tensor(shape, v);
  ASSERT_NE(t, nullptr);
  m.owned.push_back(t);
  OK(ctn_variable(m.g, name, t, n));
  m.params.push_back(*n);
}

// SGD updates of every parameter; dropout's step is an input fed per run.
void finish(Model &m, ctn_node step) {
  std::vector<ctn_node> grads(m.params.size());
  OK(ctn_grad(m.g, m.loss, static_cast<uint32_t>(m.params.size()), m.params.data(), grads.data()));
  ctn_node lr, one, next, as;
  OK(ctn_scalar(m.g, CTN_F32, 0.05, &lr));
  for (size_t i = 0; i < m.params.size(); ++i) {
    ctn_node d, nw;
    OK(ctn_mul(m.g, grads[i], lr, &d));
    OK(ctn_sub(m.g, m.params[i], d, &nw));
    OK(ctn_assign(m.g, m.params[i], nw, &as));
  }
  (void)step;
  (void)one;
  (void)next;
}

ctn_node step_var(Model &m) {
  EXPECT_EQ(ctn_input(m.g, "step", CTN_I64, 0, nullptr, &m.step), CTN_OK) << ctn_last_error();
  return m.step;
}

void data(Model &m, int n, size_t per, int classes) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  m.xdata.resize(static_cast<size_t>(n) * per);
  for (float &v : m.xdata) v = nd(rng);
  for (int i = 0; i < n; ++i) m.ydata.push_back(i % classes);
}

// x[32, 64] -> 5 dense layers of 96 with relu and dropout -> 10 classes.
void build_mlp(ctn_context *ctx, Model &m) {
  OK(ctn_graph_create(ctx, 0, &m.g));
  std::mt19937_64 rng(3);
  const int n = 32, in = 64, h = 96, layers = 5, c = 10;
  m.xshape = {n, in};
  int64_t ys[1] = {n};
  OK(ctn_input(m.g, "x", CTN_F32, 2, m.xshape.data(), &m.x));
  OK(ctn_input(m.g, "y", CTN_I32, 1, ys, &m.y));
  const ctn_node step = step_var(m);
  ctn_node a = m.x;
  int width = in;
  for (int l = 0; l < layers; ++l) {
    ctn_node w, b, z, zb, r;
    const std::string wn = "w" + std::to_string(l), bn = "b" + std::to_string(l);
    ASSERT_NO_FATAL_FAILURE(add_var(m, wn.c_str(), {width, h}, 0.15f, rng, &w));
    ASSERT_NO_FATAL_FAILURE(add_var(m, bn.c_str(), {h}, 0.01f, rng, &b));
    OK(ctn_matmul(m.g, a, w, 0, 0, &z));
    OK(ctn_add(m.g, z, b, &zb));
    OK(ctn_tanh(m.g, zb, &r));
    OK(ctn_dropout(m.g, r, step, 0.2, 100 + l, &a));
    width = h;
  }
  ctn_node wo, bo, lo, logits;
  ASSERT_NO_FATAL_FAILURE(add_var(m, "wo", {h, c}, 0.1f, rng, &wo));
  ASSERT_NO_FATAL_FAILURE(add_var(m, "bo", {c}, 0.01f, rng, &bo));
  OK(ctn_matmul(m.g, a, wo, 0, 0, &lo));
  OK(ctn_add(m.g, lo, bo, &logits));
  OK(ctn_cross_entropy(m.g, logits, m.y, &m.loss));
  ASSERT_NO_FATAL_FAILURE(finish(m, step));
  data(m, n, in, c);
}

// x[16, 1, 12, 12] -> conv 8 -> batch norm -> relu -> conv 8 -> relu -> max pool -> conv 8 ->
// relu -> dropout -> avg pool -> dense -> 4 classes.
void build_cnn(ctn_context *ctx, Model &m) {
  OK(ctn_graph_create(ctx, 0, &m.g));
  std::mt19937_64 rng(11);
  const int n = 16, s = 12, f = 8, c = 4, flat = f * 3 * 3;
  m.xshape = {n, 1, s, s};
  int64_t ys[1] = {n};
  OK(ctn_input(m.g, "x", CTN_F32, 4, m.xshape.data(), &m.x));
  OK(ctn_input(m.g, "y", CTN_I32, 1, ys, &m.y));
  const ctn_node step = step_var(m);
  ctn_node w1, g1, b1, w1b, w2, wd, bd;
  ASSERT_NO_FATAL_FAILURE(add_var(m, "w1", {f, 1, 3, 3}, 0.5f, rng, &w1));
  ASSERT_NO_FATAL_FAILURE(add_var(m, "g1", {f}, 0.0f, rng, &g1));
  ASSERT_NO_FATAL_FAILURE(add_var(m, "b1", {f}, 0.01f, rng, &b1));
  ASSERT_NO_FATAL_FAILURE(add_var(m, "w1b", {f, f, 3, 3}, 0.2f, rng, &w1b));
  ASSERT_NO_FATAL_FAILURE(add_var(m, "w2", {f, f, 3, 3}, 0.2f, rng, &w2));
  ASSERT_NO_FATAL_FAILURE(add_var(m, "wd", {flat, c}, 0.15f, rng, &wd));
  ASSERT_NO_FATAL_FAILURE(add_var(m, "bd", {c}, 0.01f, rng, &bd));
  ctn_node c1, n1, a1, c1b, a1b, p1, c2, a2, d2, p2, fl, dense, logits;
  OK(ctn_conv2d(m.g, m.x, w1, 1, 1, 1, 1, 1, 1, 1, &c1));
  OK(ctn_batch_norm(m.g, c1, g1, b1, 1e-5, &n1));
  OK(ctn_relu(m.g, n1, &a1));
  OK(ctn_conv2d(m.g, a1, w1b, 1, 1, 1, 1, 1, 1, 1, &c1b));
  OK(ctn_relu(m.g, c1b, &a1b));
  OK(ctn_max_pool2d(m.g, a1b, 2, 2, 2, 2, 0, 0, &p1));
  OK(ctn_conv2d(m.g, p1, w2, 1, 1, 1, 1, 1, 1, 1, &c2));
  OK(ctn_relu(m.g, c2, &a2));
  OK(ctn_dropout(m.g, a2, step, 0.25, 42, &d2));
  OK(ctn_avg_pool2d(m.g, d2, 2, 2, 2, 2, 0, 0, 0, &p2));
  int64_t fs[2] = {n, flat};
  OK(ctn_reshape(m.g, p2, 2, fs, &fl));
  OK(ctn_matmul(m.g, fl, wd, 0, 0, &dense));
  OK(ctn_add(m.g, dense, bd, &logits));
  OK(ctn_cross_entropy(m.g, logits, m.y, &m.loss));
  ASSERT_NO_FATAL_FAILURE(finish(m, step));
  data(m, n, static_cast<size_t>(s * s), c);
}

struct Run {
  ctn_status status = CTN_OK;
  std::string error;
  ctn_plan_stats stats{};
  ctn_plan_memory_report report{};
  std::vector<float> losses;
  std::vector<std::vector<char>> weights;
  std::string recomputed;  // report.recomputed, copied before the plan goes
};

void run(Model &m, const char *backend, uint64_t budget, Run *r) {
  ctn_compile_options co{};
  co.struct_size = sizeof co;
  co.backends = backend;
  co.memory_budget = budget;
  ctn_plan *p = nullptr;
  r->status = ctn_plan_compile(m.g, 1, &m.loss, &co, &p);
  if (r->status != CTN_OK) {
    r->error = ctn_last_error();
    return;
  }
  r->stats.struct_size = sizeof r->stats;
  OK(ctn_plan_stats_get(p, &r->stats));
  r->report.struct_size = sizeof r->report;
  OK(ctn_plan_memory_report_get(p, &r->report));
  r->recomputed = r->report.recomputed ? r->report.recomputed : "";
  r->report.recomputed = nullptr;
  if (std::getenv("CTN_TEST_VERBOSE")) {
    const char *text = nullptr;
    OK(ctn_plan_describe(p, &text));
    std::printf("budget %llu:\n%s\n", static_cast<unsigned long long>(budget), text);
  }
  ctn_tensor *xt = tensor(m.xshape, m.xdata), *yt = nullptr, *lt = nullptr;
  int64_t ys[1] = {static_cast<int64_t>(m.ydata.size())};
  OK(ctn_tensor_create(CTN_I32, 1, ys, m.ydata.data(), &yt));
  OK(ctn_plan_output_create(p, 0, &lt));
  ctn_tensor *st = nullptr;
  OK(ctn_tensor_create(CTN_I64, 0, nullptr, nullptr, &st));
  ctn_node fn[3] = {m.x, m.y, m.step};
  const ctn_tensor *fv[3] = {xt, yt, st};
  for (int s = 0; s < kSteps; ++s) {
    const int64_t sv = s;
    OK(ctn_tensor_write(st, &sv, sizeof sv));
    OK(ctn_plan_run(p, 3, fn, fv, 1, &lt));
    float l = 0;
    OK(ctn_tensor_read(lt, &l, sizeof l));
    r->losses.push_back(l);
  }
  for (ctn_node v : m.params) {
    ctn_tensor *t = nullptr;
    OK(ctn_plan_variable_read(p, v, &t));
    int64_t numel = 0;
    OK(ctn_tensor_numel(t, &numel));
    const size_t bytes = static_cast<size_t>(numel) * sizeof(float);
    std::vector<char> b(bytes);
    OK(ctn_tensor_read(t, b.data(), bytes));
    r->weights.push_back(std::move(b));
    ctn_tensor_release(t);
  }
  for (ctn_tensor *t : {xt, yt, lt, st}) ctn_tensor_release(t);
  ctn_plan_release(p);
}

void check_budgets(ctn_context *ctx, const char *backend, void (*build)(ctn_context *, Model &)) {
  Model m;
  ASSERT_NO_FATAL_FAILURE(build(ctx, m));
  Run base;
  ASSERT_NO_FATAL_FAILURE(run(m, backend, 0, &base));
  ASSERT_EQ(base.status, CTN_OK) << base.error;
  EXPECT_EQ(base.report.n_recomputed, 0u);
  EXPECT_EQ(base.report.peak_without_budget, base.stats.planned_peak_bytes);
  Run aut;
  ASSERT_NO_FATAL_FAILURE(run(m, backend, CTN_MEMORY_BUDGET_AUTO, &aut));
  ASSERT_EQ(aut.status, CTN_OK) << aut.error;
  const uint64_t peak0 = base.stats.planned_peak_bytes, minimum = aut.report.minimum_bytes;
  EXPECT_EQ(aut.report.peak_without_budget, peak0);
  EXPECT_EQ(aut.stats.planned_peak_bytes, minimum);
  ASSERT_LT(minimum, peak0) << "recomputation should lower the peak";
  EXPECT_GT(aut.report.n_recomputed, 0u);
  EXPECT_GT(aut.report.extra_flops, 0u);
  std::printf("[%s] peak without budget %llu bytes, minimum %llu bytes (%u steps recomputed, +%.1f%% FLOPs)\n",
              backend, static_cast<unsigned long long>(peak0), static_cast<unsigned long long>(minimum),
              aut.report.n_recomputed, 100.0 * static_cast<double>(aut.report.extra_flops) /
                                           static_cast<double>(aut.report.flops - aut.report.extra_flops));
  // Budgets from just under the peak down to the minimum.
  std::vector<uint64_t> budgets;
  for (int k = 0; k <= 4; ++k) budgets.push_back(peak0 - 1 - (peak0 - 1 - minimum) * static_cast<uint64_t>(k) / 4);
  budgets.push_back(CTN_MEMORY_BUDGET_AUTO);
  for (uint64_t b : budgets) {
    Run r;
    if (b == CTN_MEMORY_BUDGET_AUTO) r = aut;
    else ASSERT_NO_FATAL_FAILURE(run(m, backend, b, &r));
    ASSERT_EQ(r.status, CTN_OK) << "budget " << b << ": " << r.error;
    EXPECT_LE(r.stats.planned_peak_bytes, r.report.budget) << "budget " << b;
    EXPECT_EQ(r.report.peak_bytes, r.stats.planned_peak_bytes);
    EXPECT_GT(r.report.n_recomputed, 0u) << "budget " << b;
    ASSERT_EQ(r.losses.size(), base.losses.size());
    EXPECT_EQ(std::memcmp(r.losses.data(), base.losses.data(), r.losses.size() * sizeof(float)), 0)
        << "budget " << b << ": losses differ (first " << r.losses[0] << " vs " << base.losses[0] << ")";
    ASSERT_EQ(r.weights.size(), base.weights.size());
    for (size_t i = 0; i < r.weights.size(); ++i)
      EXPECT_TRUE(r.weights[i] == base.weights[i]) << "budget " << b << ": parameter " << i << " differs";
    EXPECT_FALSE(r.recomputed.empty()) << "budget " << b;
  }
  EXPECT_LT(base.losses.back(), base.losses.front()) << "the model should learn";
  // Below the minimum: a compile-time error naming it.
  Run below;
  ASSERT_NO_FATAL_FAILURE(run(m, backend, minimum - 1, &below));
  EXPECT_EQ(below.status, CTN_ERR_OUT_OF_MEMORY);
  EXPECT_NE(below.error.find("minimum"), std::string::npos) << below.error;
  EXPECT_NE(below.error.find(std::to_string(minimum)), std::string::npos) << below.error;
  // A budget at or over the peak changes nothing.
  Run over;
  ASSERT_NO_FATAL_FAILURE(run(m, backend, peak0, &over));
  ASSERT_EQ(over.status, CTN_OK) << over.error;
  EXPECT_EQ(over.report.n_recomputed, 0u);
  EXPECT_EQ(over.stats.planned_peak_bytes, peak0);
}

ctn_context *context_for(const char *backend, std::string *why) {
  ctn_context *ctx = nullptr;
  if (ctn_context_create(nullptr, &ctx) != CTN_OK) {
    *why = ctn_last_error();
    return nullptr;
  }
  // One device alone: every op on it.
  if (std::strcmp(backend, "opencl") == 0 || std::strcmp(backend, "vulkan") == 0)
    ctn_context_set_option(ctx, backend, "placement", "always");
  if (ctn_context_set_backends(ctx, backend) != CTN_OK) {
    *why = ctn_last_error();
    ctn_context_release(ctx);
    return nullptr;
  }
  return ctx;
}

class MemoryBudget : public ::testing::TestWithParam<const char *> {};

// check_budgets on `backend`, skipped (with the reason) where the backend is unavailable.
void check_budgets_on(const char *backend, void (*build)(ctn_context *, Model &)) {
  std::string why;
  ctn_context *ctx = context_for(backend, &why);
  if (!ctx) GTEST_SKIP() << backend << " unavailable: " << why;
  check_budgets(ctx, backend, build);
  ctn_context_release(ctx);
}

TEST_P(MemoryBudget, MlpBitIdenticalDownToTheMinimum) { check_budgets_on(GetParam(), build_mlp); }

TEST_P(MemoryBudget, CnnBitIdenticalDownToTheMinimum) { check_budgets_on(GetParam(), build_cnn); }

INSTANTIATE_TEST_SUITE_P(Backends, MemoryBudget, ::testing::Values("cpu", "opencl", "vulkan"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           std::string n = i.param;
                           for (char &ch : n)
                             if (ch == ',') ch = '_';
                           return n;
                         });

TEST(MemoryBudgetOptions, OldStructSizeMeansNoBudget) {
  ctn_context *ctx = nullptr;
  OK(ctn_context_create(nullptr, &ctx));
  Model m;
  ASSERT_NO_FATAL_FAILURE(build_mlp(ctx, m));
  ctn_compile_options co{};
  co.struct_size = offsetof(ctn_compile_options, memory_budget);  // a 1.1 caller
  co.memory_budget = 1;                                            // not part of its struct: ignored
  ctn_plan *p = nullptr;
  OK(ctn_plan_compile(m.g, 1, &m.loss, &co, &p));
  ctn_plan_memory_report rep{};
  rep.struct_size = sizeof rep;
  OK(ctn_plan_memory_report_get(p, &rep));
  EXPECT_EQ(rep.budget, 0u);
  EXPECT_EQ(rep.n_recomputed, 0u);
  EXPECT_EQ(ctn_plan_memory_report_get(p, nullptr), CTN_ERR_INVALID_ARGUMENT);
  ctn_plan_release(p);
  ctn_context_release(ctx);
}

}  // namespace
