// The example op library (plugins/swish) loaded as a stranger would load it, mixed with built-in
// ops in one graph: loss = sum(swish(x) * w + relu(x)). Forward against a reference computed
// here, gradients against the analytic formula and against finite differences, both compiled
// lazily and executed eagerly.
#include <gtest/gtest.h>

#include <chutney/checkpoint.h>
#include <chutney/chutney.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ctn_test;

namespace {

const std::vector<int64_t> kShape = {3, 4};
// Values away from 0 so relu's kink does not disturb the finite differences.
const std::vector<double> kX = {-2.5, -1.25, -0.5, -0.15, 0.2, 0.35, 0.9, 1.4,
                                2.2,  3.1,   -3.7, 5.0};
const std::vector<double> kW = {0.3, -1.1, 2.0, 0.75, -0.4, 1.5, -2.2, 0.05,
                                1.0, -0.6, 0.9, -1.3};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double SwishRef(double x) { return x * Sigmoid(x); }
double SwishPrime(double x) {
  const double s = Sigmoid(x);
  return s + x * s * (1.0 - s);
}

double RefLoss(const std::vector<double> &x, const std::vector<double> &w) {
  double l = 0;
  for (size_t i = 0; i < x.size(); ++i) l += SwishRef(x[i]) * w[i] + std::max(x[i], 0.0);
  return l;
}

// Builds loss = sum(swish(x) * w + relu(x)) from existing nodes x and w.
ctn_node BuildLoss(ctn_graph *g, ctn_node x, ctn_node w) {
  ctn_node sw = CTN_NODE_NONE, prod = CTN_NODE_NONE, r = CTN_NODE_NONE, s = CTN_NODE_NONE,
           loss = CTN_NODE_NONE;
  EXPECT_EQ(ctn_op(g, "swish", 1, &x, nullptr, &sw), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_mul(g, sw, w, &prod), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_relu(g, x, &r), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_add(g, prod, r, &s), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_sum(g, s, 0, nullptr, 0, &loss), CTN_OK) << ctn_last_error();
  return loss;
}

class SwishOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(CTN_TEST_CPU_PLUGIN)) GTEST_SKIP() << "no CPU plugin in this build";
    ctx_ = IsolatedContext();
    ASSERT_TRUE(ctx_);
    ctn_status st = ctn_context_load_plugin(ctx_.get(), CTN_TEST_CPU_PLUGIN);
    ASSERT_EQ(st, CTN_OK) << Describe(st);
    st = ctn_context_load_plugin(ctx_.get(), CTN_TEST_SWISH_PLUGIN);
    ASSERT_EQ(st, CTN_OK) << Describe(st);
  }
  Context ctx_;
};

// The lazy graph of the plan tests: inputs x and w (f64, kShape), loss = BuildLoss(x, w) and its
// gradients; outputs = {loss, d loss / dx, d loss / dw}.
struct LossGraph {
  Graph g;
  ctn_node x = CTN_NODE_NONE, w = CTN_NODE_NONE;
  std::vector<ctn_node> outputs;
};

void BuildLossGraph(ctn_context *ctx, LossGraph *lg) {
  lg->g = NewGraph(ctx);
  ASSERT_TRUE(lg->g);
  ctn_graph *g = lg->g.get();
  ASSERT_EQ(ctn_input(g, "x", CTN_F64, 2, kShape.data(), &lg->x), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_input(g, "w", CTN_F64, 2, kShape.data(), &lg->w), CTN_OK) << ctn_last_error();
  const ctn_node loss = BuildLoss(g, lg->x, lg->w);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const ctn_node wrt[2] = {lg->x, lg->w};
  ctn_node grads[2] = {CTN_NODE_NONE, CTN_NODE_NONE};
  ASSERT_EQ(ctn_grad(g, loss, 2, wrt, grads), CTN_OK) << ctn_last_error();
  lg->outputs = {loss, grads[0], grads[1]};
}

// Runs a compiled plan with x and w fed, returning every output as f64 (n_outputs empty ones
// after a failure, which RunOnce reported).
std::vector<std::vector<double>> RunPlan(ctn_plan *plan, ctn_node xn, ctn_node wn,
                                         const std::vector<double> &x,
                                         const std::vector<double> &w, uint32_t n_outputs) {
  Tensor xt = MakeF64(kShape, x), wt = MakeF64(kShape, w);
  std::vector<Tensor> outs = RunOnce(plan, {xn, wn}, {xt.get(), wt.get()}, n_outputs);
  std::vector<std::vector<double>> result(n_outputs);
  for (size_t i = 0; i < outs.size(); ++i) result[i] = ReadF64(outs[i].get());
  return result;
}

TEST_F(SwishOps, LazyForwardAndGradientMatchReferenceAndFiniteDifferences) {
  LossGraph lg;
  ASSERT_NO_FATAL_FAILURE(BuildLossGraph(ctx_.get(), &lg));
  const ctn_node x = lg.x, w = lg.w;
  Plan plan = Compile(lg.g.get(), lg.outputs);
  ASSERT_TRUE(plan);
  // The custom ops ran on the CPU backend through the library's "cpu" kernels.
  uint32_t n_swish = 0, n_swish_grad = 0;
  ASSERT_EQ(ctn_plan_backend_steps(plan.get(), "cpu", "swish", &n_swish), CTN_OK);
  ASSERT_EQ(ctn_plan_backend_steps(plan.get(), "cpu", "swish_grad", &n_swish_grad), CTN_OK);
  EXPECT_EQ(n_swish, 1u);
  EXPECT_EQ(n_swish_grad, 1u);

  auto out = RunPlan(plan.get(), x, w, kX, kW, 3);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(out[0].size(), 1u);
  EXPECT_NEAR(out[0][0], RefLoss(kX, kW), 1e-12);
  ASSERT_EQ(out[1].size(), kX.size());
  ASSERT_EQ(out[2].size(), kX.size());
  for (size_t i = 0; i < kX.size(); ++i) {
    EXPECT_NEAR(out[1][i], kW[i] * SwishPrime(kX[i]) + (kX[i] > 0 ? 1.0 : 0.0), 1e-12) << i;
    EXPECT_NEAR(out[2][i], SwishRef(kX[i]), 1e-12) << i;
  }

  // Finite differences through a forward-only plan of the same graph.
  Plan fwd = Compile(lg.g.get(), {lg.outputs[0]});
  ASSERT_TRUE(fwd);
  const double h = 1e-6;
  for (size_t i = 0; i < kX.size(); ++i) {
    for (int which = 0; which < 2; ++which) {
      std::vector<double> xp = kX, xm = kX, wp = kW, wm = kW;
      (which == 0 ? xp : wp)[i] += h;
      (which == 0 ? xm : wm)[i] -= h;
      const std::vector<double> lp = RunPlan(fwd.get(), x, w, xp, wp, 1)[0];
      const std::vector<double> lm = RunPlan(fwd.get(), x, w, xm, wm, 1)[0];
      ASSERT_EQ(lp.size(), 1u);
      ASSERT_EQ(lm.size(), 1u);
      const double fd = (lp[0] - lm[0]) / (2 * h);
      EXPECT_NEAR(out[1 + which][i], fd, 1e-6 * std::max(1.0, std::fabs(fd)))
          << (which == 0 ? "d/dx" : "d/dw") << " element " << i;
    }
  }
}

// Graph files store an op library's ops by name (docs/MODELS.md): a context without the library
// refuses the file naming the op; one with it rebuilds the graph, whose plan computes what the
// original's does, bit for bit.
TEST_F(SwishOps, GraphFileResolvesLibraryOpsByNameAtLoad) {
  LossGraph src;
  ASSERT_NO_FATAL_FAILURE(BuildLossGraph(ctx_.get(), &src));
  const ctn_node x = src.x, w = src.w, *outputs = src.outputs.data();
  const std::string path = ::testing::TempDir() + "swish_graph.ctn";
  ASSERT_EQ(ctn_graph_save(src.g.get(), nullptr, 3, outputs, nullptr, nullptr, path.c_str()), CTN_OK) << ctn_last_error();

  Context bare = ContextWith({CTN_TEST_CPU_PLUGIN});
  ASSERT_TRUE(bare);
  ctn_graph *lg = nullptr;
  ctn_saved_graph *saved = nullptr;
  EXPECT_EQ(ctn_graph_load(bare.get(), path.c_str(), &lg, &saved), CTN_ERR_UNSUPPORTED);
  ExpectLastErrorHas({"\"swish", "op library"});

  ASSERT_EQ(ctn_graph_load(ctx_.get(), path.c_str(), &lg, &saved), CTN_OK) << ctn_last_error();
  Graph loaded(lg);
  ctn_saved_graph_release(saved);
  Plan pa = Compile(src.g.get(), src.outputs), pb = Compile(loaded.get(), src.outputs);
  ASSERT_TRUE(pa && pb);
  EXPECT_EQ(RunPlan(pa.get(), x, w, kX, kW, 3), RunPlan(pb.get(), x, w, kX, kW, 3));
  std::remove(path.c_str());
}

TEST_F(SwishOps, EagerMatchesReference) {
  ASSERT_EQ(ctn_context_set_backends(ctx_.get(), "cpu"), CTN_OK) << ctn_last_error();
  Graph g = NewGraph(ctx_.get(), CTN_GRAPH_EAGER);
  ASSERT_TRUE(g);
  Tensor xt = MakeF64(kShape, kX), wt = MakeF64(kShape, kW);
  ctn_node x, w;
  ASSERT_EQ(ctn_variable(g.get(), "x", xt.get(), &x), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_variable(g.get(), "w", wt.get(), &w), CTN_OK) << ctn_last_error();

  ctn_node sw;
  ASSERT_EQ(ctn_op(g.get(), "swish", 1, &x, nullptr, &sw), CTN_OK) << ctn_last_error();
  ctn_tensor *raw = nullptr;
  ASSERT_EQ(ctn_graph_value(g.get(), sw, &raw), CTN_OK) << ctn_last_error();
  Tensor swv(raw);
  std::vector<double> got = ReadF64(swv.get());
  ASSERT_EQ(got.size(), kX.size());
  for (size_t i = 0; i < kX.size(); ++i) EXPECT_NEAR(got[i], SwishRef(kX[i]), 1e-14) << i;

  const ctn_node loss = BuildLoss(g.get(), x, w);
  ASSERT_FALSE(HasFailure());
  raw = nullptr;
  ASSERT_EQ(ctn_graph_value(g.get(), loss, &raw), CTN_OK) << ctn_last_error();
  Tensor lv(raw);
  std::vector<double> l = ReadF64(lv.get());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_NEAR(l[0], RefLoss(kX, kW), 1e-12);

  const ctn_node wrt[2] = {x, w};
  ctn_node grads[2];
  ASSERT_EQ(ctn_grad(g.get(), loss, 2, wrt, grads), CTN_OK) << ctn_last_error();
  for (int which = 0; which < 2; ++which) {
    raw = nullptr;
    ASSERT_EQ(ctn_graph_value(g.get(), grads[which], &raw), CTN_OK) << ctn_last_error();
    Tensor gv(raw);
    std::vector<double> gr = ReadF64(gv.get());
    ASSERT_EQ(gr.size(), kX.size());
    for (size_t i = 0; i < kX.size(); ++i) {
      const double want = which == 0 ? kW[i] * SwishPrime(kX[i]) + (kX[i] > 0 ? 1.0 : 0.0)
                                     : SwishRef(kX[i]);
      EXPECT_NEAR(gr[i], want, 1e-12) << (which == 0 ? "d/dx " : "d/dw ") << i;
    }
  }
}

TEST_F(SwishOps, Float32Forward) {
  Graph g = NewGraph(ctx_.get());
  ASSERT_TRUE(g);
  const int64_t shape[1] = {6};
  ctn_node x, y;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  ASSERT_EQ(ctn_op(g.get(), "swish", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  ctn_dtype dt = CTN_BOOL;
  uint32_t ndim = 0;
  int64_t oshape[CTN_MAX_DIMS] = {0};
  ASSERT_EQ(ctn_node_info(g.get(), y, &dt, &ndim, oshape), CTN_OK);
  EXPECT_EQ(dt, CTN_F32);
  ASSERT_EQ(ndim, 1u);
  EXPECT_EQ(oshape[0], 6);

  Plan plan = Compile(g.get(), {y});
  ASSERT_TRUE(plan);
  // Large |x| as well: the kernel must not overflow exp().
  const std::vector<float> xv = {-100.f, -3.f, -0.5f, 0.f, 2.f, 100.f};
  Tensor xt = MakeF32({6}, xv);
  std::vector<Tensor> outs = RunOnce(plan.get(), {x}, {xt.get()});
  ASSERT_EQ(outs.size(), 1u);
  std::vector<float> got = ReadF32(outs[0].get());
  ASSERT_EQ(got.size(), xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    EXPECT_NEAR(got[i], SwishRef(xv[i]), 1e-5 * std::max(1.0, std::fabs(SwishRef(xv[i])))) << i;
  }
}

TEST_F(SwishOps, InferRejectsBadInputsWithClearMessages) {
  Graph g = NewGraph(ctx_.get());
  ASSERT_TRUE(g);
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  ctn_node xi, x, dy_t, dy64, out = 0x5eed;
  ASSERT_EQ(ctn_input(g.get(), "xi", CTN_I32, 2, s23, &xi), CTN_OK);
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 2, s23, &x), CTN_OK);
  ASSERT_EQ(ctn_input(g.get(), "dyt", CTN_F32, 2, s32, &dy_t), CTN_OK);
  ASSERT_EQ(ctn_input(g.get(), "dy64", CTN_F64, 2, s23, &dy64), CTN_OK);

  EXPECT_EQ(ctn_op(g.get(), "swish", 1, &xi, nullptr, &out), CTN_ERR_DTYPE);
  ExpectLastErrorHas({"swish", "i32"});

  const ctn_node shape_mismatch[2] = {x, dy_t};
  EXPECT_EQ(ctn_op(g.get(), "swish_grad", 2, shape_mismatch, nullptr, &out), CTN_ERR_SHAPE);
  ExpectLastErrorHas({"swish_grad", "[2, 3]", "[3, 2]"});

  const ctn_node dtype_mismatch[2] = {x, dy64};
  EXPECT_EQ(ctn_op(g.get(), "swish_grad", 2, dtype_mismatch, nullptr, &out), CTN_ERR_DTYPE);
  ExpectLastErrorHas({"f64"});

  // Arity is part of the op definition (n_inputs): the host checks it before infer.
  const ctn_node two[2] = {x, x};
  EXPECT_NE(ctn_op(g.get(), "swish", 2, two, nullptr, &out), CTN_OK);
  ExpectLastErrorHas({"swish"});
  EXPECT_EQ(out, 0x5eedu);
}

// A host-memory backend may run op libraries' "cpu" kernels (CTN_BACKEND_HOST_MEMORY): with
// only the test backend "oldcpu" loaded, swish still runs, on oldcpu.
TEST(SwishOnHostBackend, CpuKernelsRunOnAnyHostMemoryBackend) {
  Context ctx = ContextWith({CTN_TEST_PLUGIN_OLDER_MINOR, CTN_TEST_SWISH_PLUGIN});
  ASSERT_TRUE(ctx);
  Graph g = NewGraph(ctx.get());
  ASSERT_TRUE(g);
  const int64_t shape[1] = {4};
  ctn_node x, y, z;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, shape, &x), CTN_OK);
  ASSERT_EQ(ctn_op(g.get(), "swish", 1, &x, nullptr, &y), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_relu(g.get(), y, &z), CTN_OK) << ctn_last_error();
  Plan plan = Compile(g.get(), {z}, "oldcpu");
  ASSERT_TRUE(plan);
  uint32_t n = 0;
  ASSERT_EQ(ctn_plan_backend_steps(plan.get(), "oldcpu", "swish", &n), CTN_OK);
  EXPECT_EQ(n, 1u);

  const std::vector<float> xv = {-2.f, -0.5f, 0.5f, 3.f};
  Tensor xt = MakeF32({4}, xv);
  std::vector<Tensor> outs = RunOnce(plan.get(), {x}, {xt.get()});
  ASSERT_EQ(outs.size(), 1u);
  std::vector<float> got = ReadF32(outs[0].get());
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(got[i], std::max(0.0, SwishRef(xv[i])), 1e-6) << i;
}

}  // namespace
