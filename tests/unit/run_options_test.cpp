// Issue 29: strict feeds, cancellation and deadlines, numerics checks (ctn_run_options, 1.3).
#include "test_helpers.h"

#include <chutney/nn.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace {

bool contains(const char *text, const char *what) { return std::string(text).find(what) != std::string::npos; }

// y = relu(x @ w) summed; a training plan with SGD on w (the variable write comes last).
struct Tiny {
  Ctx c;
  ctn_graph *g = nullptr;
  ctn_node x = 0, w = 0, k = 0, loss = 0, unused = 0;
  ctn_plan *plan = nullptr;
  Tiny() {
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
    int64_t xs[2] = {2, 3}, us[1] = {4};
    EXPECT_EQ(ctn_input(g, "x", CTN_F32, 2, xs, &x), CTN_OK);
    EXPECT_EQ(ctn_input(g, "unused", CTN_F32, 1, us, &unused), CTN_OK);
    ctn_tensor *w0 = make_f32({3, 2}, {0.5f, -0.5f, 0.25f, 0.75f, -1.0f, 0.1f});
    EXPECT_EQ(ctn_variable(g, "w", w0, &w), CTN_OK);
    ctn_tensor_release(w0);
    ctn_tensor *kt = make_f32({1}, {2.0f});
    EXPECT_EQ(ctn_constant(g, kt, &k), CTN_OK);
    ctn_tensor_release(kt);
    ctn_node m, r, s, gw, step, upd, lr;
    EXPECT_EQ(ctn_matmul(g, x, w, 0, 0, &m), CTN_OK);
    EXPECT_EQ(ctn_relu(g, m, &r), CTN_OK);
    EXPECT_EQ(ctn_mul(g, r, k, &s), CTN_OK);
    EXPECT_EQ(ctn_sum(g, s, 0, nullptr, 0, &loss), CTN_OK);
    EXPECT_EQ(ctn_grad(g, loss, 1, &w, &gw), CTN_OK) << ctn_last_error();
    ctn_tensor *lrt = make_f32({}, {0.1f});
    EXPECT_EQ(ctn_constant(g, lrt, &lr), CTN_OK);
    ctn_tensor_release(lrt);
    EXPECT_EQ(ctn_mul(g, gw, lr, &step), CTN_OK);
    EXPECT_EQ(ctn_sub(g, w, step, &upd), CTN_OK);
    ctn_node asg;
    EXPECT_EQ(ctn_assign(g, w, upd, &asg), CTN_OK);
    EXPECT_EQ(ctn_plan_compile(g, 1, &loss, nullptr, &plan), CTN_OK) << ctn_last_error();
  }
  ~Tiny() {
    ctn_plan_release(plan);
    ctn_graph_release(g);
  }
  std::vector<float> weights() { return read_variable(plan, w); }
};

// Every feed mistake of the issue is an error naming it; nothing runs (the variable keeps its value).
TEST(RunOptions, FeedMistakesAreErrorsNamingThem) {
  Tiny t;
  ctn_tensor *xv = make_f32({2, 3}, {1, 2, 3, 4, 5, 6}), *uv = make_f32({4}, {});
  const std::vector<float> before = t.weights();
  auto run = [&](std::vector<ctn_node> nodes, std::vector<const ctn_tensor *> values) {
    return ctn_plan_run(t.plan, static_cast<uint32_t>(nodes.size()), nodes.data(), values.data(), 0, nullptr);
  };
  EXPECT_EQ(run({t.x, 9999}, {xv, xv}), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "node 9999, which is not a node of the graph")) << ctn_last_error();
  EXPECT_EQ(run({t.x, t.w}, {xv, xv}), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "which is a variable, not a ctn_input")) << ctn_last_error();
  EXPECT_EQ(run({t.x, t.k}, {xv, xv}), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "which is a constant")) << ctn_last_error();
  EXPECT_EQ(run({t.x, t.loss}, {xv, xv}), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "which is an op")) << ctn_last_error();
  EXPECT_EQ(run({t.x, t.x}, {xv, xv}), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "\"x\" (node 0) is fed twice")) << ctn_last_error();
  EXPECT_EQ(run({t.x, t.unused, t.unused}, {xv, uv, uv}), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "is fed twice")) << ctn_last_error();
  EXPECT_EQ(t.weights(), before) << "a refused run changed the variable";
  // An input of the graph that this plan does not need may be fed (one feed list, two plans).
  CTN_EXPECT_OK(run({t.x, t.unused}, {xv, uv}));
  EXPECT_NE(t.weights(), before);
  ctn_tensor_release(xv);
  ctn_tensor_release(uv);
}

// A long plan: 400 steps of 128x128 matmul + tanh, then an SGD-like variable write (small steps:
// the suite also runs under qemu for the ARM boards).
struct Long {
  Ctx c;
  ctn_graph *g = nullptr;
  ctn_node x = 0, v = 0, out = 0;
  ctn_plan *plan = nullptr;
  Long() {
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
    int64_t xs[2] = {128, 128};
    EXPECT_EQ(ctn_input(g, "x", CTN_F32, 2, xs, &x), CTN_OK);
    ctn_tensor *v0 = make_f32({128, 128}, std::vector<float>(128 * 128, 0.01f));
    EXPECT_EQ(ctn_variable(g, "v", v0, &v), CTN_OK);
    ctn_tensor_release(v0);
    ctn_node h = x;
    for (int i = 0; i < 400; ++i) {
      ctn_node m;
      EXPECT_EQ(ctn_matmul(g, h, v, 0, 0, &m), CTN_OK);
      EXPECT_EQ(ctn_tanh(g, m, &h), CTN_OK);
    }
    ctn_node upd;
    EXPECT_EQ(ctn_add(g, v, h, &upd), CTN_OK);
    ctn_node asg;
    EXPECT_EQ(ctn_assign(g, v, upd, &asg), CTN_OK);
    out = h;
    EXPECT_EQ(ctn_plan_compile(g, 1, &out, nullptr, &plan), CTN_OK) << ctn_last_error();
  }
  ~Long() {
    ctn_plan_release(plan);
    ctn_graph_release(g);
  }
  std::vector<float> variable() { return read_variable(plan, v); }
};

using Clock = std::chrono::steady_clock;

// Cancelling from another thread ends a long run within 50 ms of the request with
// CTN_ERR_CANCELLED, the variable unchanged; the token stays cancelled until reset.
TEST(RunOptions, CancelFromAnotherThreadStopsTheRunWithVariablesUnchanged) {
  Long l;
  ctn_tensor *xv = make_f32({128, 128}, std::vector<float>(128 * 128, 0.5f));
  ctn_cancel *tok = nullptr;
  CTN_ASSERT_OK(ctn_cancel_create(&tok));
  ctn_run_options o{};
  o.struct_size = sizeof o;
  o.cancel = tok;
  // How long a whole run takes here (the cancellation must come well before its end).
  auto t0 = Clock::now();
  CTN_ASSERT_OK(ctn_plan_run_with_options(l.plan, &o, 1, &l.x, &xv, 0, nullptr));
  const double full_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const std::vector<float> before = l.variable();
  std::atomic<bool> started{false};
  Clock::time_point requested;
  std::thread canceller([&] {
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(full_ms / 4));
    requested = Clock::now();
    EXPECT_EQ(ctn_cancel_request(tok), CTN_OK);
  });
  started = true;
  const ctn_status s = ctn_plan_run_with_options(l.plan, &o, 1, &l.x, &xv, 0, nullptr);
  const auto ended = Clock::now();
  canceller.join();
  ASSERT_EQ(s, CTN_ERR_CANCELLED) << "a run of " << full_ms << " ms was not cancelled: " << ctn_last_error();
  EXPECT_TRUE(contains(ctn_last_error(), "the variables are unchanged")) << ctn_last_error();
  const double late_ms = std::chrono::duration<double, std::milli>(ended - requested).count();
  EXPECT_LT(late_ms, 50.0 + full_ms / 400 * 4)
      << "the run ended long after the request (a step takes ~" << full_ms / 400 << " ms)";
  EXPECT_EQ(l.variable(), before) << "a cancelled run changed the variable";
  int32_t req = 0;
  CTN_EXPECT_OK(ctn_cancel_requested(tok, &req));
  EXPECT_EQ(req, 1);
  EXPECT_EQ(ctn_plan_run_with_options(l.plan, &o, 1, &l.x, &xv, 0, nullptr), CTN_ERR_CANCELLED) << "until reset";
  CTN_EXPECT_OK(ctn_cancel_reset(tok));
  CTN_EXPECT_OK(ctn_plan_run_with_options(l.plan, &o, 1, &l.x, &xv, 0, nullptr));
  EXPECT_NE(l.variable(), before) << "a completed run updates the variable";
  ctn_cancel_release(tok);
  ctn_tensor_release(xv);
}

TEST(RunOptions, ADeadlineCancelsTheRun) {
  Long l;
  ctn_tensor *xv = make_f32({128, 128}, std::vector<float>(128 * 128, 0.5f));
  const std::vector<float> before = l.variable();
  ctn_run_options o{};
  o.struct_size = sizeof o;
  o.timeout_us = 10;  // 10 us: far less than 400 matmuls of 128^3
  EXPECT_EQ(ctn_plan_run_with_options(l.plan, &o, 1, &l.x, &xv, 0, nullptr), CTN_ERR_CANCELLED);
  EXPECT_TRUE(contains(ctn_last_error(), "deadline (timeout_us 10)")) << ctn_last_error();
  EXPECT_EQ(l.variable(), before);
  // Bad options are refused before anything runs.
  o.struct_size = 4;
  EXPECT_EQ(ctn_plan_run_with_options(l.plan, &o, 1, &l.x, &xv, 0, nullptr), CTN_ERR_INVALID_ARGUMENT);
  o.struct_size = sizeof o;
  o.timeout_us = 0;
  o.flags = 0x80;
  EXPECT_EQ(ctn_plan_run_with_options(l.plan, &o, 1, &l.x, &xv, 0, nullptr), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "unknown flags 0x80")) << ctn_last_error();
  EXPECT_EQ(l.variable(), before);
  EXPECT_EQ(ctn_cancel_request(nullptr), CTN_ERR_INVALID_ARGUMENT);
  ctn_tensor_release(xv);
}

// check_numerics names the first op that produced a NaN: log of a negative input feeds a
// matmul; the log step is named (its input finite), not the matmul after it.
TEST(RunOptions, CheckNumericsNamesTheFirstOpThatMadeANaN) {
  Ctx c;
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  int64_t xs[2] = {2, 2};
  ctn_node x, lg, m, out;
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F32, 2, xs, &x));
  CTN_ASSERT_OK(ctn_log(g, x, &lg));
  CTN_ASSERT_OK(ctn_matmul(g, lg, lg, 0, 0, &m));
  CTN_ASSERT_OK(ctn_exp(g, m, &out));
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &out, nullptr, &p));
  ctn_tensor *good = make_f32({2, 2}, {1, 2, 3, 4}), *bad = make_f32({2, 2}, {1, -2, 3, 4}), *o = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &o));
  ctn_run_options opt{};
  opt.struct_size = sizeof opt;
  opt.flags = CTN_RUN_CHECK_NUMERICS;
  CTN_EXPECT_OK(ctn_plan_run_with_options(p, &opt, 1, &x, &good, 1, &o));
  CTN_EXPECT_OK(ctn_plan_run(p, 1, &x, &bad, 1, &o)) << "without the check a NaN passes silently";
  EXPECT_TRUE(std::isnan(read_f32(o)[0]));
  EXPECT_EQ(ctn_plan_run_with_options(p, &opt, 1, &x, &bad, 1, &o), CTN_ERR_NUMERICS);
  const std::string msg = ctn_last_error();
  EXPECT_TRUE(contains(msg.c_str(), "(log, node 1,")) << msg;
  EXPECT_TRUE(contains(msg.c_str(), "produced 1 non-finite values of f32[2, 2] (the first at element 1)")) << msg;
  EXPECT_TRUE(contains(msg.c_str(), "inputs: #0 f32[2, 2] finite")) << msg;
  for (ctn_tensor *t : {good, bad, o}) ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_graph_release(g);
}

}  // namespace
