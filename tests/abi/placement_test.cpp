// Placement across backends, with small test backends beside the CPU (tests/abi/plugins):
// leaves live where their first consumer runs, an assignment reaches a variable whose device
// has no copy kernel through the host, and only the backends listed are ever used.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

using namespace ctn_test;

namespace {

// A context with the CPU backend and one test backend, loaded by path.
Context TwoBackends(const char *plugin) {
  Context ctx = IsolatedContext();
  if (!ctx) return ctx;
  EXPECT_EQ(ctn_context_load_plugin(ctx.get(), CTN_TEST_CPU_PLUGIN), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_context_load_plugin(ctx.get(), plugin), CTN_OK) << ctn_last_error();
  return ctx;
}

uint32_t steps(ctn_plan *p, const char *backend, const char *op) {
  uint32_t n = 0;
  EXPECT_EQ(ctn_plan_backend_steps(p, backend, op, &n), CTN_OK) << ctn_last_error();
  return n;
}

// relu(x @ w + b) with "oldcpu" (add, relu) first: the matmul goes to the CPU, so x and w live
// there; b's first consumer is the add on oldcpu. One transfer (the matmul's result), not one
// per leaf on every run.
TEST(Placement, LeavesLiveWhereTheirFirstConsumerRuns) {
  Context ctx = TwoBackends(CTN_TEST_PLUGIN_OLDER_MINOR);
  ASSERT_TRUE(ctx);
  Graph g = NewGraph(ctx.get());
  const int64_t xs[2] = {2, 3};
  Tensor w0 = MakeF32({3, 2}, {1, 0, 0, 1, 1, 1}), b0 = MakeF32({2}, {-2, 0.5f});
  ctn_node x, w, b, m, s, y;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 2, xs, &x), CTN_OK);
  ASSERT_EQ(ctn_variable(g.get(), "w", w0.get(), &w), CTN_OK);
  ASSERT_EQ(ctn_variable(g.get(), "b", b0.get(), &b), CTN_OK);
  ASSERT_EQ(ctn_matmul(g.get(), x, w, 0, 0, &m), CTN_OK);
  ASSERT_EQ(ctn_add(g.get(), m, b, &s), CTN_OK);
  ASSERT_EQ(ctn_relu(g.get(), s, &y), CTN_OK);
  Plan p = Compile(g.get(), {y}, "oldcpu,cpu");
  ASSERT_TRUE(p);
  EXPECT_EQ(steps(p.get(), "cpu", "matmul"), 1u);
  EXPECT_EQ(steps(p.get(), "oldcpu", "add"), 1u);
  EXPECT_EQ(steps(p.get(), "cpu", "transfer"), 0u) << "x or w crossed to the CPU: they should live there";
  EXPECT_EQ(steps(p.get(), "oldcpu", "transfer"), 1u);
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(ctn_plan_stats_get(p.get(), &st), CTN_OK);
  EXPECT_EQ(st.n_steps, 4u);
  Tensor xv = MakeF32({2, 3}, {1, 2, 3, -1, -2, -3});
  std::vector<Tensor> outs = RunOnce(p.get(), {x}, {xv.get()});
  ASSERT_EQ(outs.size(), 1u);
  // x @ w = [[4, 5], [-4, -5]]; + b = [[2, 5.5], [-6, -4.5]]; relu.
  EXPECT_EQ(ReadF32(outs[0].get()), (std::vector<float>{2, 5.5f, 0, 0}));
}

// "nocopy" (add, relu, no copy) holds w and v (their first readers run there); w's new value
// is computed there too, v's on the CPU (mul). Neither assignment has a copy kernel on the
// variable's device: the host writes the new values in with transfers.
TEST(Placement, AssignmentWithoutCopyKernelGoesThroughTheHost) {
  Context ctx = TwoBackends(CTN_TEST_PLUGIN_NO_COPY);
  ASSERT_TRUE(ctx);
  Graph g = NewGraph(ctx.get());
  const int64_t xs[1] = {3};
  Tensor w0 = MakeF32({3}, {1, 2, 3}), v0 = MakeF32({3}, {1, 1, 1});
  ctn_node x, w, v, s, y, two, v2, t, a1, a2;
  ASSERT_EQ(ctn_input(g.get(), "x", CTN_F32, 1, xs, &x), CTN_OK);
  ASSERT_EQ(ctn_variable(g.get(), "w", w0.get(), &w), CTN_OK);
  ASSERT_EQ(ctn_variable(g.get(), "v", v0.get(), &v), CTN_OK);
  ASSERT_EQ(ctn_add(g.get(), w, x, &s), CTN_OK);
  ASSERT_EQ(ctn_relu(g.get(), s, &y), CTN_OK);   // y = relu(w + x)
  ASSERT_EQ(ctn_add(g.get(), v, y, &t), CTN_OK);  // v's first reader: on nocopy
  ASSERT_EQ(ctn_scalar(g.get(), CTN_F32, 2, &two), CTN_OK);
  ASSERT_EQ(ctn_mul(g.get(), v, two, &v2), CTN_OK);  // on the CPU
  ASSERT_EQ(ctn_assign(g.get(), w, y, &a1), CTN_OK);
  ASSERT_EQ(ctn_assign(g.get(), v, v2, &a2), CTN_OK);
  Plan p = Compile(g.get(), {t}, "nocopy,cpu");
  ASSERT_TRUE(p);
  EXPECT_EQ(steps(p.get(), "nocopy", "assign"), 0u);
  EXPECT_EQ(steps(p.get(), "cpu", "mul"), 1u);
  EXPECT_EQ(steps(p.get(), "nocopy", "transfer"), 2u) << "one transfer into each variable";
  Tensor xv = MakeF32({3}, {1, -5, 1});
  std::vector<Tensor> run1 = RunOnce(p.get(), {x}, {xv.get()});
  ASSERT_EQ(run1.size(), 1u);
  EXPECT_EQ(ReadF32(run1[0].get()), (std::vector<float>{3, 1, 5}));  // v + relu(w + x), old values
  std::vector<Tensor> run2 = RunOnce(p.get(), {x}, {xv.get()});
  ASSERT_EQ(run2.size(), 1u);
  // w = relu([2, -3, 4]) = [2, 0, 4] and v = [2, 2, 2] after run 1.
  EXPECT_EQ(ReadF32(run2[0].get()), (std::vector<float>{5, 2, 7}));
  ctn_tensor *wr = nullptr, *vr = nullptr;
  ASSERT_EQ(ctn_plan_variable_read(p.get(), w, &wr), CTN_OK);
  ASSERT_EQ(ctn_plan_variable_read(p.get(), v, &vr), CTN_OK);
  Tensor wt(wr), vt(vr);
  EXPECT_EQ(ReadF32(wt.get()), (std::vector<float>{3, 0, 5}));
  EXPECT_EQ(ReadF32(vt.get()), (std::vector<float>{4, 4, 4}));
}

// No implicit CPU fallback: a list without the CPU means the CPU is not used, and the error
// says how to let it take what the listed backends decline (docs/EXECUTION.md).
TEST(Placement, OnlyListedBackendsAreUsed) {
  Context ctx = TwoBackends(CTN_TEST_PLUGIN_OLDER_MINOR);
  ASSERT_TRUE(ctx);
  Graph g = NewGraph(ctx.get());
  const int64_t s[2] = {2, 2};
  ctn_node a, m;
  ASSERT_EQ(ctn_input(g.get(), "a", CTN_F32, 2, s, &a), CTN_OK);
  ASSERT_EQ(ctn_matmul(g.get(), a, a, 0, 0, &m), CTN_OK);
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = "oldcpu";
  ctn_plan *raw = nullptr;
  EXPECT_EQ(ctn_plan_compile(g.get(), 1, &m, &o, &raw), CTN_ERR_UNSUPPORTED);
  ExpectLastErrorHas({"oldcpu: oldcpu: op matmul not implemented", "add \"cpu\" to the list"});
  // Eager graphs follow the same rule: only the context's listed backends.
  ASSERT_EQ(ctn_context_set_backends(ctx.get(), "oldcpu"), CTN_OK);
  Graph eg = NewGraph(ctx.get(), CTN_GRAPH_EAGER);
  Tensor av = MakeF32({2, 2}, {1, 2, 3, 4});
  ctn_node ea, em;
  ASSERT_EQ(ctn_constant(eg.get(), av.get(), &ea), CTN_OK);
  EXPECT_EQ(ctn_matmul(eg.get(), ea, ea, 0, 0, &em), CTN_ERR_UNSUPPORTED);
}

}  // namespace
