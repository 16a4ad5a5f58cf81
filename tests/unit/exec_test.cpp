// Executor and eager mode: steady-state runs allocate nothing, variables persist across runs,
// feeds are validated, eager and compiled execution agree (values and gradients).
#include "count_new.h"
#include "test_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace {
struct Model {
  Ctx c;
  ctn_graph *g = nullptr;
  ctn_node x, w, b, loss, gw, gb, upd_w, upd_b;
  ctn_tensor *w0, *b0;
  Model(uint32_t flags = 0) {
    EXPECT_EQ(ctn_graph_create(c.ctx, flags, &g), CTN_OK);
    w0 = make_f32({3, 2}, {0.5f, -0.5f, 0.25f, 0.75f, -1.0f, 0.1f});
    b0 = make_f32({2}, {0.1f, -0.1f});
  }
  ~Model() {
    ctn_tensor_release(w0);
    ctn_tensor_release(b0);
    ctn_graph_release(g);
  }
  // loss = mean((tanh(x @ w + b))^2); grads; SGD assignment with lr 0.5.
  void build(ctn_node xin) {
    x = xin;
    ctn_node m, s, t, sq;
    EXPECT_EQ(ctn_variable(g, "w", w0, &w), CTN_OK);
    EXPECT_EQ(ctn_variable(g, "b", b0, &b), CTN_OK);
    EXPECT_EQ(ctn_matmul(g, x, w, 0, 0, &m), CTN_OK);
    EXPECT_EQ(ctn_add(g, m, b, &s), CTN_OK);
    EXPECT_EQ(ctn_tanh(g, s, &t), CTN_OK);
    EXPECT_EQ(ctn_mul(g, t, t, &sq), CTN_OK);
    EXPECT_EQ(ctn_mean(g, sq, 0, nullptr, 0, &loss), CTN_OK);
    ctn_node wrt[2] = {w, b}, gr[2];
    EXPECT_EQ(ctn_grad(g, loss, 2, wrt, gr), CTN_OK) << ctn_last_error();
    gw = gr[0];
    gb = gr[1];
  }
  // Adds the input x [4, 3] (named `name`) and builds the loss on it; returns x.
  ctn_node build_on_input(const char *name = "x") {
    const int64_t xs[2] = {4, 3};
    ctn_node in = CTN_NODE_NONE;
    EXPECT_EQ(ctn_input(g, name, CTN_F32, 2, xs, &in), CTN_OK) << ctn_last_error();
    build(in);
    return in;
  }
  void sgd() {
    ctn_node lr, sw, sb, nw, nb;
    EXPECT_EQ(ctn_scalar(g, CTN_F32, 0.5, &lr), CTN_OK);
    EXPECT_EQ(ctn_mul(g, gw, lr, &sw), CTN_OK);
    EXPECT_EQ(ctn_sub(g, w, sw, &nw), CTN_OK);
    EXPECT_EQ(ctn_mul(g, gb, lr, &sb), CTN_OK);
    EXPECT_EQ(ctn_sub(g, b, sb, &nb), CTN_OK);
    EXPECT_EQ(ctn_assign(g, w, nw, &upd_w), CTN_OK);
    EXPECT_EQ(ctn_assign(g, b, nb, &upd_b), CTN_OK);
  }
};
const std::vector<float> kX = {1, 2, -1, 0.5f, -0.5f, 2, 0, 1, 1, -2, 0.25f, 0.75f};
}  // namespace

TEST(Exec, SteadyStateRunsDoNotAllocate) {
  Model m;
  const ctn_node x = m.build_on_input();
  m.sgd();
  ctn_plan *p;
  CTN_ASSERT_OK(ctn_plan_compile(m.g, 1, &m.loss, nullptr, &p));
  // w - lr*g and b - lr*g are computed straight into the variables: no copy steps remain.
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  CTN_ASSERT_OK(ctn_plan_stats_get(p, &st));
  EXPECT_EQ(st.n_assign_elided, 2u);
  uint32_t assign_steps = 9;
  CTN_ASSERT_OK(ctn_plan_backend_steps(p, "cpu", "assign", &assign_steps));
  EXPECT_EQ(assign_steps, 0u);
  ctn_tensor *xt = make_f32({4, 3}, kX), *out;
  CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &out));
  const ctn_tensor *feeds[1] = {xt};
  CTN_ASSERT_OK(ctn_plan_run(p, 1, &x, feeds, 1, &out));  // warm-up
  float first = read_f32(out)[0];
  long before = g_news.load();
  for (int i = 0; i < 200; ++i) CTN_ASSERT_OK(ctn_plan_run(p, 1, &x, feeds, 1, &out));
  long allocs = g_news.load() - before;
  EXPECT_EQ(allocs, 0) << "operator new calls during 200 steady-state runs";
  // The variables persisted and training made progress.
  EXPECT_LT(read_f32(out)[0], first);
  EXPECT_NE(read_variable(p, m.w), read_f32(m.w0));
  // Writing a variable back resets the trajectory.
  CTN_ASSERT_OK(ctn_plan_variable_write(p, m.w, m.w0));
  CTN_ASSERT_OK(ctn_plan_variable_write(p, m.b, m.b0));
  CTN_ASSERT_OK(ctn_plan_run(p, 1, &x, feeds, 1, &out));
  EXPECT_FLOAT_EQ(read_f32(out)[0], first);
  ctn_tensor_release(out);
  ctn_tensor_release(xt);
  ctn_plan_release(p);
}

TEST(Exec, AssignElisionMatchesCopyingAssignments) {
  // The same training run with memory reuse off (plain copies) must give identical weights.
  std::vector<std::vector<float>> final_w;
  for (uint32_t disable : {0u, static_cast<uint32_t>(CTN_PASS_MEMORY_REUSE)}) {
    Model m;
    const ctn_node x = m.build_on_input();
    m.sgd();
    ctn_compile_options o{sizeof o, disable, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
    ctn_plan *p;
    CTN_ASSERT_OK(ctn_plan_compile(m.g, 1, &m.loss, &o, &p));
    ctn_tensor *xt = make_f32({4, 3}, kX), *out;
    CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &out));
    const ctn_tensor *feeds[1] = {xt};
    for (int i = 0; i < 20; ++i) CTN_ASSERT_OK(ctn_plan_run(p, 1, &x, feeds, 1, &out));
    final_w.push_back(read_variable(p, m.w));
    ctn_tensor_release(out);
    ctn_tensor_release(xt);
    ctn_plan_release(p);
  }
  EXPECT_EQ(final_w[0], final_w[1]);
}

TEST(Exec, FeedsAreValidated) {
  Model m;
  const ctn_node x = m.build_on_input("images");
  ctn_plan *p;
  CTN_ASSERT_OK(ctn_plan_compile(m.g, 1, &m.loss, nullptr, &p));
  ctn_tensor *out;
  CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &out));
  ctn_tensor *wrong_shape = make_f32({3, 4}, kX);
  const ctn_tensor *f1[1] = {wrong_shape};
  EXPECT_EQ(ctn_plan_run(p, 1, &x, f1, 1, &out), CTN_ERR_SHAPE);
  std::string msg = ctn_last_error();
  EXPECT_NE(msg.find("images"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 3]"), std::string::npos) << msg;
  ctn_tensor *wrong_dtype;
  int64_t xs2[2] = {4, 3};
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F64, 2, xs2, nullptr, &wrong_dtype));
  const ctn_tensor *f2[1] = {wrong_dtype};
  EXPECT_EQ(ctn_plan_run(p, 1, &x, f2, 1, &out), CTN_ERR_DTYPE);
  EXPECT_EQ(ctn_plan_run(p, 0, nullptr, nullptr, 1, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("was not fed"), std::string::npos);
  ctn_tensor *bad_out = make_f32({2}, {});
  const ctn_tensor *f3[1] = {wrong_shape};
  ctn_tensor *ok_in = make_f32({4, 3}, kX);
  f3[0] = ok_in;
  EXPECT_EQ(ctn_plan_run(p, 1, &x, f3, 1, &bad_out), CTN_ERR_SHAPE);
  for (auto *t : {wrong_shape, wrong_dtype, bad_out, ok_in, out}) ctn_tensor_release(t);
  ctn_plan_release(p);
}

// ctn_plan_run checks every argument before the first step: a training plan (SGD assignments)
// given a bad output or feed fails and leaves every variable as it was.
TEST(Exec, BadArgumentsLeaveVariablesUntouched) {
  Model m;
  int64_t xs[2] = {4, 3}, ts[2] = {4, 2};
  ctn_node x, t, d, sq, extra;
  CTN_ASSERT_OK(ctn_input(m.g, "x", CTN_F32, 2, xs, &x));
  CTN_ASSERT_OK(ctn_input(m.g, "t", CTN_F32, 2, ts, &t));
  m.build(x);
  m.sgd();
  // A second fed input and a second output ([3, 2], so that a non-contiguous view can be given).
  CTN_ASSERT_OK(ctn_sub(m.g, t, t, &d));
  CTN_ASSERT_OK(ctn_mul(m.g, d, d, &sq));
  CTN_ASSERT_OK(ctn_mean(m.g, sq, 0, nullptr, 0, &extra));
  ctn_node outs[3] = {m.loss, m.gw, extra};
  ctn_plan *p;
  CTN_ASSERT_OK(ctn_plan_compile(m.g, 3, outs, nullptr, &p));
  ctn_tensor *o[3];
  for (uint32_t i = 0; i < 3; ++i) CTN_ASSERT_OK(ctn_plan_output_create(p, i, &o[i]));
  ctn_tensor *xv = make_f32({4, 3}, kX), *tv = make_f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto vars = [&] {
    std::vector<float> v;
    for (ctn_node n : {m.w, m.b}) {
      std::vector<float> f = read_variable(p, n);
      v.insert(v.end(), f.begin(), f.end());
    }
    return v;
  };
  const std::vector<float> before = vars();
  const ctn_node fn[2] = {x, t};
  const ctn_tensor *feeds[2] = {xv, tv};
  // A bad output tensor: wrong shape, wrong dtype, not contiguous.
  ctn_tensor *wrong_shape = make_f32({2, 3}, {});
  ctn_tensor *wrong_dtype = nullptr;
  int64_t gs[2] = {3, 2};
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F64, 2, gs, nullptr, &wrong_dtype));
  ctn_tensor *base = make_f32({2, 3}, {}), *view = nullptr;
  const int32_t perm[2] = {1, 0};
  CTN_ASSERT_OK(ctn_tensor_permute(base, perm, &view));  // [3, 2], strides (1, 3)
  for (ctn_tensor *bad : {wrong_shape, wrong_dtype, view}) {
    ctn_tensor *bo[3] = {o[0], bad, o[2]};
    EXPECT_EQ(ctn_plan_run(p, 2, fn, feeds, 3, bo), CTN_ERR_SHAPE);
    EXPECT_NE(std::string(ctn_last_error()).find("output 1"), std::string::npos) << ctn_last_error();
    EXPECT_EQ(vars(), before) << "a bad output tensor changed the variables";
  }
  // A bad second feed (after a good first one), a NULL feed, a missing feed.
  ctn_tensor *t64 = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F64, 2, ts, nullptr, &t64));
  const ctn_tensor *bad_feeds[2] = {xv, t64};
  EXPECT_EQ(ctn_plan_run(p, 2, fn, bad_feeds, 3, o), CTN_ERR_DTYPE);
  EXPECT_EQ(vars(), before);
  bad_feeds[1] = nullptr;
  EXPECT_EQ(ctn_plan_run(p, 2, fn, bad_feeds, 3, o), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(vars(), before);
  EXPECT_EQ(ctn_plan_run(p, 1, fn, feeds, 3, o), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("was not fed"), std::string::npos);
  EXPECT_EQ(vars(), before);
  // A good run does train (so "unchanged" above means something).
  CTN_ASSERT_OK(ctn_plan_run(p, 2, fn, feeds, 3, o));
  EXPECT_NE(vars(), before);
  for (auto *tt : {o[0], o[1], o[2], xv, tv, wrong_shape, wrong_dtype, base, view, t64}) ctn_tensor_release(tt);
  ctn_plan_release(p);
}

TEST(Exec, EagerMatchesCompiledIncludingGradients) {
  Model lazy, eager(CTN_GRAPH_EAGER);
  const ctn_node lx = lazy.build_on_input();
  ctn_node ex;
  ctn_tensor *xt = make_f32({4, 3}, kX);
  CTN_ASSERT_OK(ctn_constant(eager.g, xt, &ex));
  eager.build(ex);
  auto r = run_once(lazy.g, {lazy.loss, lazy.gw, lazy.gb}, {lx}, {xt});
  ctn_node en[3] = {eager.loss, eager.gw, eager.gb};
  for (int i = 0; i < 3; ++i) {
    ctn_tensor *v;
    CTN_ASSERT_OK(ctn_graph_value(eager.g, en[i], &v));
    auto ev = read_f32(v);
    ASSERT_EQ(ev.size(), r[static_cast<size_t>(i)].size());
    for (size_t k = 0; k < ev.size(); ++k) EXPECT_NEAR(ev[k], r[static_cast<size_t>(i)][k], 1e-6) << i << "," << k;
    ctn_tensor_release(v);
  }
  EXPECT_GT(std::fabs(r[2][0]), 1e-4);
  // Eager nodes record the backend that ran them; leaves have none.
  const char *ran = nullptr;
  CTN_ASSERT_OK(ctn_graph_node_backend(eager.g, eager.gw, &ran));
  EXPECT_STREQ(ran, "cpu");
  CTN_ASSERT_OK(ctn_graph_node_backend(eager.g, eager.w, &ran));
  EXPECT_STREQ(ran, "");
  // Lazy graphs have no values; eager graphs reject placeholders.
  ctn_tensor *none = nullptr;
  EXPECT_EQ(ctn_graph_value(lazy.g, lazy.loss, &none), CTN_ERR_STATE);
  const int64_t xs[2] = {4, 3};
  ctn_node ph;
  EXPECT_EQ(ctn_input(eager.g, "x", CTN_F32, 2, xs, &ph), CTN_ERR_STATE);
  ctn_tensor_release(xt);
}

namespace {
// One pass of `n` eager elementwise ops (add, mul, tanh, sub, relu, neg) on [16] tensors in a
// fresh eager graph of `ctx`; returns the last value.
std::vector<float> eager_chain(ctn_context *ctx, ctn_tensor *xt, ctn_tensor *yt, int n) {
  ctn_graph *e;
  EXPECT_EQ(ctn_graph_create(ctx, CTN_GRAPH_EAGER, &e), CTN_OK);
  ctn_node h, y;
  EXPECT_EQ(ctn_constant(e, xt, &h), CTN_OK);
  EXPECT_EQ(ctn_constant(e, yt, &y), CTN_OK);
  for (int i = 0; i < n; ++i) {
    ctn_node o = CTN_NODE_NONE;
    switch (i % 6) {
      case 0: EXPECT_EQ(ctn_add(e, h, y, &o), CTN_OK); break;
      case 1: EXPECT_EQ(ctn_mul(e, h, y, &o), CTN_OK); break;
      case 2: EXPECT_EQ(ctn_tanh(e, h, &o), CTN_OK); break;
      case 3: EXPECT_EQ(ctn_sub(e, h, y, &o), CTN_OK); break;
      case 4: EXPECT_EQ(ctn_relu(e, h, &o), CTN_OK); break;
      default: EXPECT_EQ(ctn_neg(e, h, &o), CTN_OK); break;
    }
    h = o;
  }
  ctn_tensor *v = nullptr;
  EXPECT_EQ(ctn_graph_value(e, h, &v), CTN_OK);
  std::vector<float> r = read_f32(v);
  ctn_tensor_release(v);
  ctn_graph_release(e);
  return r;
}
}  // namespace

TEST(Exec, EagerOpsReuseBuffersAndKernels) {
  // After a first pass, an eager op takes its output buffer, its tensor and its storage from the
  // context's pool, its kernel from the calling thread's cache, and its node's place from the
  // node array the previous graph gave back; its input list is in place. What is left of
  // operator new is per graph, not per op (before: four per op, 2422 for this pass).
  // Only the CPU backend: g_news counts the whole process, and the GPU emulators' plugins run
  // threads of their own that allocate meanwhile.
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.flags = CTN_CONTEXT_NO_AUTOLOAD;
  const std::string cpu = std::string(CTN_TEST_BUILD_ROOT) + "/backends/cpu/ctn-cpu.so";
  o.plugin_path = cpu.c_str();
  ctn_context *ctx = nullptr;
  CTN_ASSERT_OK(ctn_context_create(&o, &ctx));
  struct Release {
    ctn_context *c;
    ~Release() { ctn_context_release(c); }
  } release{ctx};
  std::vector<float> xs(16), ys(16);
  for (int i = 0; i < 16; ++i) {
    xs[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i);
    ys[static_cast<size_t>(i)] = 0.5f + 0.001f * static_cast<float>(i);
  }
  ctn_tensor *xt = make_f32({16}, xs), *yt = make_f32({16}, ys);
  const int n = 600;
  const std::vector<float> first = eager_chain(ctx, xt, yt, n);
  // The fewest of three passes (a pool worker may still be starting during the first).
  long allocs = std::numeric_limits<long>::max();
  std::vector<float> second;
  for (int pass = 0; pass < 3; ++pass) {
    long before = g_news.load();
    second = eager_chain(ctx, xt, yt, n);
    allocs = std::min(allocs, g_news.load() - before);
    EXPECT_EQ(first, second);
  }
  EXPECT_LT(allocs, 50) << "operator new calls for " << n << " eager ops";
  // The same chain computed elementwise here (within float rounding of the vectorised tanh).
  std::vector<float> h = xs;
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < 16; ++k) {
      float &v = h[k];
      switch (i % 6) {
        case 0: v += ys[k]; break;
        case 1: v *= ys[k]; break;
        case 2: v = std::tanh(v); break;
        case 3: v -= ys[k]; break;
        case 4: v = v > 0 ? v : 0; break;
        default: v = -v; break;
      }
    }
  for (size_t k = 0; k < 16; ++k) EXPECT_NEAR(second[k], h[k], 1e-5) << k;
  ctn_tensor_release(xt);
  ctn_tensor_release(yt);
}

TEST(Exec, EagerValuesOutliveTheirContext) {
  // A value taken from an eager graph keeps its (pooled) buffer after the graph and the context
  // are gone; releasing it last frees the buffer and the pool (ASan/LSan check both).
  ctn_tensor *v = nullptr;
  {
    Ctx c;
    ctn_graph *e;
    CTN_ASSERT_OK(ctn_graph_create(c.ctx, CTN_GRAPH_EAGER, &e));
    ctn_tensor *xt = make_f32({3}, {1, -2, 3});
    ctn_node x, r;
    CTN_ASSERT_OK(ctn_constant(e, xt, &x));
    CTN_ASSERT_OK(ctn_relu(e, x, &r));
    CTN_ASSERT_OK(ctn_graph_value(e, r, &v));
    ctn_tensor_release(xt);
    ctn_graph_release(e);
  }
  EXPECT_EQ(read_f32(v), (std::vector<float>{1, 0, 3}));
  float nv[3] = {4, 5, 6};
  CTN_ASSERT_OK(ctn_tensor_write(v, nv, sizeof nv));
  EXPECT_EQ(read_f32(v), (std::vector<float>{4, 5, 6}));
  ctn_tensor_release(v);
}

TEST(Exec, EagerGraphReleasedAfterItsContext) {
  // Against the documented order (chutney.h: the context must outlive its graphs), an eager graph
  // released after its context gives its node array back to the shared keeper, not to freed
  // memory (ASan checks), and a graph released in order afterwards still reuses arrays.
  ctn_graph *late = nullptr;
  {
    Ctx c;
    CTN_ASSERT_OK(ctn_graph_create(c.ctx, CTN_GRAPH_EAGER, &late));
    ctn_tensor *xt = make_f32({3}, {1, -2, 3});
    ctn_node x, r;
    CTN_ASSERT_OK(ctn_constant(late, xt, &x));
    CTN_ASSERT_OK(ctn_relu(late, x, &r));
    ctn_tensor_release(xt);
  }
  ctn_graph_release(late);
  Ctx c;
  for (int i = 0; i < 3; ++i) {
    ctn_graph *e;
    CTN_ASSERT_OK(ctn_graph_create(c.ctx, CTN_GRAPH_EAGER, &e));
    ctn_tensor *xt = make_f32({2}, {-1, 2});
    ctn_node x, r;
    CTN_ASSERT_OK(ctn_constant(e, xt, &x));
    CTN_ASSERT_OK(ctn_relu(e, x, &r));
    ctn_tensor *v;
    CTN_ASSERT_OK(ctn_graph_value(e, r, &v));
    EXPECT_EQ(read_f32(v), (std::vector<float>{0, 2}));
    ctn_tensor_release(v);
    ctn_tensor_release(xt);
    ctn_graph_release(e);
  }
}

TEST(Exec, EagerAssignUpdatesTheVariable) {
  Model m(CTN_GRAPH_EAGER);
  ctn_tensor *xt = make_f32({4, 3}, kX);
  ctn_node x;
  CTN_ASSERT_OK(ctn_constant(m.g, xt, &x));
  m.build(x);
  m.sgd();
  ctn_tensor *wv;
  CTN_ASSERT_OK(ctn_graph_value(m.g, m.w, &wv));
  auto w1 = read_f32(wv);
  auto w0 = read_f32(m.w0);
  ctn_tensor *gwv;
  CTN_ASSERT_OK(ctn_graph_value(m.g, m.gw, &gwv));
  auto gw = read_f32(gwv);
  for (size_t i = 0; i < w0.size(); ++i) EXPECT_NEAR(w1[i], w0[i] - 0.5f * gw[i], 1e-6);
  ctn_tensor_release(wv);
  ctn_tensor_release(gwv);
  ctn_tensor_release(xt);
}

TEST(Exec, ThreadCountCanBeSet) {
  Ctx c;
  CTN_EXPECT_OK(ctn_context_set_num_threads(c.ctx, 1));
  CTN_EXPECT_OK(ctn_context_set_num_threads(c.ctx, 3));
  EXPECT_EQ(ctn_context_set_num_threads(c.ctx, 0), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_context_set_option(c.ctx, "cpu", "no_such_key", "1"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_context_set_option(c.ctx, "nope", "gemm", "own"), CTN_ERR_INVALID_ARGUMENT);
}
