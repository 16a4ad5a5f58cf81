// Graph passes: algebraic simplification (x*2*2 -> x*4, identities), constant folding, dead-code
// elimination and matmul+bias+activation fusion; each result is checked against the same plan
// compiled with the pass disabled.
#include "test_helpers.h"

#include <chutney/onnx.h>
#include <chutney/ops.h>

#include <cmath>

namespace {
struct G {
  Ctx c;
  ctn_graph *g = nullptr;
  G() { EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK); }
  ~G() { ctn_graph_release(g); }
  ctn_node in(std::vector<int64_t> s) {
    ctn_node n;
    EXPECT_EQ(ctn_input(g, "x", CTN_F32, static_cast<uint32_t>(s.size()), s.data(), &n), CTN_OK);
    return n;
  }
  ctn_node k(double v) {
    ctn_node n;
    EXPECT_EQ(ctn_scalar(g, CTN_F32, v, &n), CTN_OK);
    return n;
  }
};
uint32_t steps_of(ctn_graph *g, ctn_node out, const char *op, uint32_t disable = 0, const char **desc = nullptr) {
  ctn_compile_options o{sizeof o, disable, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, 1, &out, &o, &p), CTN_OK) << ctn_last_error();
  uint32_t n = 0;
  ctn_plan_backend_steps(p, "cpu", op, &n);
  static std::string text;
  const char *d;
  ctn_plan_describe(p, &d);
  text = d;
  if (desc) *desc = text.c_str();
  ctn_plan_release(p);
  return n;
}
// The steps of each op in `ops` of one plan compiled for `outs` with default options.
std::vector<uint32_t> plan_steps(ctn_graph *g, std::vector<ctn_node> outs, std::vector<const char *> ops) {
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, static_cast<uint32_t>(outs.size()), outs.data(), nullptr, &p), CTN_OK) << ctn_last_error();
  std::vector<uint32_t> n(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) EXPECT_EQ(ctn_plan_backend_steps(p, "cpu", ops[i], &n[i]), CTN_OK);
  ctn_plan_release(p);
  return n;
}
}  // namespace

TEST(Passes, ConstantsReassociateAndFold) {
  G t;
  ctn_node x = t.in({3}), a, b, c;
  CTN_ASSERT_OK(ctn_mul(t.g, x, t.k(2), &a));
  CTN_ASSERT_OK(ctn_mul(t.g, a, t.k(2), &b));
  CTN_ASSERT_OK(ctn_mul(t.g, b, t.k(2), &c));  // x*2*2*2
  const char *desc;
  EXPECT_EQ(steps_of(t.g, c, "mul", 0, &desc), 1u) << desc;  // x*8
  EXPECT_EQ(steps_of(t.g, c, "mul", CTN_PASS_SIMPLIFY | CTN_PASS_CONSTANT_FOLDING), 3u);
  ctn_tensor *xv = make_f32({3}, {1, -2, 0.5f});
  ctn_plan_stats st{};
  auto r = run_once(t.g, {c}, {x}, {xv}, nullptr, &st);
  EXPECT_EQ(r[0], (std::vector<float>{8, -16, 4}));
  EXPECT_GE(st.n_folded, 2u);
  ctn_tensor_release(xv);
}

TEST(Passes, IdentitiesDisappear) {
  G t;
  ctn_node x = t.in({2}), a, b, c, d;
  CTN_ASSERT_OK(ctn_mul(t.g, x, t.k(1), &a));
  CTN_ASSERT_OK(ctn_add(t.g, a, t.k(0), &b));
  CTN_ASSERT_OK(ctn_sub(t.g, b, t.k(0), &c));
  CTN_ASSERT_OK(ctn_exp(t.g, c, &d));
  ctn_compile_options o{sizeof o, 0, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
  ctn_plan *p;
  CTN_ASSERT_OK(ctn_plan_compile(t.g, 1, &d, &o, &p));
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  ctn_plan_stats_get(p, &st);
  EXPECT_EQ(st.n_steps, 1u);  // only exp remains
  ctn_plan_release(p);
  // A broadcasting x*1 changes the shape and must stay.
  ctn_node y = t.in({1}), ones, e;
  ctn_tensor *o3 = make_f32({3}, {1, 1, 1});
  CTN_ASSERT_OK(ctn_constant(t.g, o3, &ones));
  CTN_ASSERT_OK(ctn_mul(t.g, y, ones, &e));
  EXPECT_EQ(steps_of(t.g, e, "mul"), 1u);
  ctn_tensor_release(o3);
}

TEST(Passes, ConstantSubgraphIsFoldedAtCompileTime) {
  G t;
  ctn_node a = t.k(3), b, c, x = t.in({2}), y;
  CTN_ASSERT_OK(ctn_exp(t.g, a, &b));
  CTN_ASSERT_OK(ctn_sqrt(t.g, b, &c));
  CTN_ASSERT_OK(ctn_add(t.g, x, c, &y));
  EXPECT_EQ(steps_of(t.g, y, nullptr), 1u);  // only the add runs
  EXPECT_EQ(steps_of(t.g, y, nullptr, CTN_PASS_CONSTANT_FOLDING), 3u);
  ctn_tensor *xv = make_f32({2}, {0, 1});
  auto r = run_once(t.g, {y}, {x}, {xv});
  EXPECT_NEAR(r[0][0], std::sqrt(std::exp(3.0)), 1e-4);
  EXPECT_NEAR(r[0][1], 1 + std::sqrt(std::exp(3.0)), 1e-4);
  ctn_tensor_release(xv);
}

TEST(Passes, DeadCodeIsEliminated) {
  G t;
  ctn_node x = t.in({4}), live, dead1, dead2;
  CTN_ASSERT_OK(ctn_tanh(t.g, x, &live));
  CTN_ASSERT_OK(ctn_exp(t.g, x, &dead1));
  CTN_ASSERT_OK(ctn_log(t.g, dead1, &dead2));
  EXPECT_EQ(steps_of(t.g, live, nullptr), 1u);
  EXPECT_EQ(steps_of(t.g, live, "exp"), 0u);
}

// ONNX's Conv with a bias then Clip(0, 6) (MobileNet's relu6): conv2d -> add(bias [O,1,1]) -> clamp
// becomes one conv2d_bias_act step; a bias that is not per channel ([1,1,W]) keeps the ops apart,
// and an add whose result has another consumer fuses without the activation.
TEST(Passes, ConvBiasClampFuses) {
  G t;
  ctn_node x = t.in({1, 3, 6, 6}), w, b, bw, c, s, r, s2, r2, other;
  std::vector<float> wd(4 * 3 * 3 * 3), bd = {0.5f, -0.5f, 0.25f, 2.0f};
  for (size_t i = 0; i < wd.size(); ++i) wd[i] = std::cos(static_cast<float>(i)) * 0.5f;
  ctn_tensor *wv = make_f32({4, 3, 3, 3}, wd), *bv = make_f32({4, 1, 1}, bd), *bwv = make_f32({1, 1, 6}, {1, 2, 3, 4, 5, 6});
  CTN_ASSERT_OK(ctn_constant(t.g, wv, &w));
  CTN_ASSERT_OK(ctn_constant(t.g, bv, &b));
  CTN_ASSERT_OK(ctn_constant(t.g, bwv, &bw));
  CTN_ASSERT_OK(ctn_conv2d(t.g, x, w, 1, 1, 1, 1, 1, 1, 1, &c));
  CTN_ASSERT_OK(ctn_add(t.g, c, b, &s));
  CTN_ASSERT_OK(ctn_clamp(t.g, s, 0.0, 6.0, &r));
  EXPECT_EQ(steps_of(t.g, r, "conv2d_bias_act"), 1u);
  EXPECT_EQ(steps_of(t.g, r, nullptr), 1u);
  EXPECT_EQ(steps_of(t.g, r, "conv2d_bias_act", CTN_PASS_FUSION), 0u);
  std::vector<float> xd(108);
  for (size_t i = 0; i < xd.size(); ++i) xd[i] = 3 * std::sin(static_cast<float>(i));
  ctn_tensor *xv = make_f32({1, 3, 6, 6}, xd);
  ctn_compile_options nofuse{sizeof nofuse, CTN_PASS_FUSION, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
  auto fused = run_once(t.g, {r}, {x}, {xv});
  auto plain = run_once(t.g, {r}, {x}, {xv}, &nofuse);
  ASSERT_EQ(fused[0].size(), plain[0].size());
  int clipped = 0;
  for (size_t i = 0; i < fused[0].size(); ++i) {
    EXPECT_NEAR(fused[0][i], plain[0][i], 1e-5) << i;
    clipped += plain[0][i] == 0.0 || plain[0][i] == 6.0;
  }
  EXPECT_GT(clipped, 0);  // the bounds matter in this case
  // Not a per-channel bias: no fusion.
  CTN_ASSERT_OK(ctn_add(t.g, c, bw, &s2));
  CTN_ASSERT_OK(ctn_relu(t.g, s2, &r2));
  EXPECT_EQ(steps_of(t.g, r2, "conv2d_bias_act"), 0u);
  // The sum also read elsewhere: conv and bias still fuse, the clamp stays a step of its own.
  CTN_ASSERT_OK(ctn_neg(t.g, s, &other));
  ctn_node both[2] = {r, other};
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(t.g, 2, both, nullptr, &p));
  uint32_t n_fused = 0, n_clamp = 0;
  CTN_ASSERT_OK(ctn_plan_backend_steps(p, "cpu", "conv2d_bias_act", &n_fused));
  CTN_ASSERT_OK(ctn_plan_backend_steps(p, "cpu", "clamp", &n_clamp));
  EXPECT_EQ(n_fused, 1u);
  EXPECT_EQ(n_clamp, 1u);
  ctn_plan_release(p);
  for (auto *p : {wv, bv, bwv, xv}) ctn_tensor_release(p);
}

// The activations of 1.6 (issue 25) after conv2d -> add(bias [O,1,1]): sigmoid, x * sigmoid(x)
// (PyTorch's SiLU export, either operand order) and ONNX HardSwish as imported, x * clamp(x/6 +
// 1/2, 0, 1) (here the composite hardswish, the same parts): each becomes one conv2d_bias_act
// step whose outputs match the unfused plan's.
// Whether this build's CPU plugin runs NHWC convolutions (layout 1): only its oneDNN path does,
// so on a build without oneDNN (the cross builds) the layout stage leaves every plan NCHW, which
// LayoutUnchangedWhenTheBackendRefuses checks on every build. Asked on a context of its own.
bool cpu_runs_nhwc_conv() {
  G probe;
  return ctn_context_set_option(probe.c.ctx, "cpu", "conv", "onednn") == CTN_OK;
}

#define SKIP_WITHOUT_NHWC_CONV()                                                                      \
  if (!cpu_runs_nhwc_conv())                                                                          \
  GTEST_SKIP() << "this build's CPU plugin has no oneDNN, whose convolutions are the only NHWC ones: " \
                  "the layout stage leaves the plan NCHW (LayoutUnchangedWhenTheBackendRefuses)"

struct ConvBias {
  G t;
  ctn_node x = CTN_NODE_NONE, sum = CTN_NODE_NONE;
  ctn_tensor *wv = nullptr, *bv = nullptr, *xv = nullptr;
  ConvBias() {
    x = t.in({1, 3, 6, 6});
    ctn_node w, b, c;
    std::vector<float> wd(4 * 3 * 3 * 3), xd(108);
    for (size_t i = 0; i < wd.size(); ++i) wd[i] = std::cos(static_cast<float>(i)) * 0.5f;
    for (size_t i = 0; i < xd.size(); ++i) xd[i] = 3 * std::sin(static_cast<float>(i));
    wv = make_f32({4, 3, 3, 3}, wd), bv = make_f32({4, 1, 1}, {0.5f, -0.5f, 0.25f, 2.0f});
    xv = make_f32({1, 3, 6, 6}, xd);
    EXPECT_EQ(ctn_constant(t.g, wv, &w), CTN_OK);
    EXPECT_EQ(ctn_constant(t.g, bv, &b), CTN_OK);
    EXPECT_EQ(ctn_conv2d(t.g, x, w, 1, 1, 1, 1, 1, 1, 1, &c), CTN_OK);
    EXPECT_EQ(ctn_add(t.g, c, b, &sum), CTN_OK);
  }
  ~ConvBias() {
    for (auto *p : {wv, bv, xv}) ctn_tensor_release(p);
  }
  // The outputs fused and unfused agree; returns how many of the unfused lie in [lo, hi].
  int compare(ctn_node r, float lo, float hi) {
    ctn_compile_options nofuse{sizeof nofuse, CTN_PASS_FUSION, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
    auto fused = run_once(t.g, {r}, {x}, {xv});
    auto plain = run_once(t.g, {r}, {x}, {xv}, &nofuse);
    EXPECT_EQ(fused[0].size(), plain[0].size());
    int inside = 0;
    for (size_t i = 0; i < fused[0].size() && i < plain[0].size(); ++i) {
      EXPECT_NEAR(fused[0][i], plain[0][i], 1e-5) << i;
      inside += plain[0][i] >= lo && plain[0][i] <= hi;
    }
    return inside;
  }
};

TEST(Passes, ConvBiasSigmoidSiluHardswishFuse) {
  ConvBias cb;
  ctn_graph *g = cb.t.g;
  ctn_node sig, silu, silu2, sig2, hsw;
  CTN_ASSERT_OK(ctn_sigmoid(g, cb.sum, &sig));
  EXPECT_EQ(steps_of(g, sig, "conv2d_bias_act"), 1u);
  EXPECT_EQ(steps_of(g, sig, nullptr), 1u);
  EXPECT_EQ(steps_of(g, sig, "sigmoid", CTN_PASS_FUSION), 1u);
  EXPECT_GT(cb.compare(sig, 0.f, 1.f), 0);
  CTN_ASSERT_OK(ctn_mul(g, cb.sum, sig, &silu));  // SiLU: sum * sigmoid(sum)
  EXPECT_EQ(steps_of(g, silu, nullptr), 1u);
  EXPECT_EQ(steps_of(g, silu, "conv2d_bias_act"), 1u);
  EXPECT_GT(cb.compare(silu, -0.3f, -1e-3f), 0);  // negative outputs: the sigmoid's side matters
  CTN_ASSERT_OK(ctn_sigmoid(g, cb.sum, &sig2));
  CTN_ASSERT_OK(ctn_mul(g, sig2, cb.sum, &silu2));  // the other operand order
  EXPECT_EQ(steps_of(g, silu2, nullptr), 1u);
  CTN_ASSERT_OK(ctn_op(g, CTN_OP_HARDSWISH, 1, &cb.sum, nullptr, &hsw));
  EXPECT_EQ(steps_of(g, hsw, nullptr), 1u);
  EXPECT_EQ(steps_of(g, hsw, "conv2d_bias_act"), 1u);
  EXPECT_GE(steps_of(g, hsw, nullptr, CTN_PASS_FUSION), 4u);
  EXPECT_GT(cb.compare(hsw, -0.37f, -1e-3f), 0);  // the curved part below 0
}

// Patterns that must not fuse their activation: the sum also read elsewhere (the conv and bias
// still fuse, the sigmoid and mul stay), x * sigmoid(y) of another value, a hardsigmoid with
// other constants (x * clamp(x/5 + 1/2, 0, 1)).
TEST(Passes, ConvBiasSiluWithOtherReaderDoesNotFuseActivation) {
  ConvBias cb;
  ctn_graph *g = cb.t.g;
  ctn_node sig, silu, other, y, sy, mixed, k5, half, m5, a5, c5, h5;
  CTN_ASSERT_OK(ctn_sigmoid(g, cb.sum, &sig));
  CTN_ASSERT_OK(ctn_mul(g, cb.sum, sig, &silu));
  CTN_ASSERT_OK(ctn_neg(g, cb.sum, &other));
  EXPECT_EQ(plan_steps(g, {silu, other}, {"conv2d_bias_act", "sigmoid", "mul"}), (std::vector<uint32_t>{1, 1, 1}));
  // sum * sigmoid(-sum): the sigmoid reads another value, the mul stays.
  CTN_ASSERT_OK(ctn_neg(g, cb.sum, &y));
  CTN_ASSERT_OK(ctn_sigmoid(g, y, &sy));
  CTN_ASSERT_OK(ctn_mul(g, cb.sum, sy, &mixed));
  EXPECT_EQ(steps_of(g, mixed, "mul"), 1u);
  EXPECT_EQ(steps_of(g, mixed, "sigmoid"), 1u);
  EXPECT_EQ(steps_of(g, mixed, "conv2d_bias_act"), 1u);
  EXPECT_EQ(cb.compare(mixed, -100.f, 100.f), 144);
  // x * clamp(x * 0.2 + 0.5, 0, 1): not HardSwish's 1/6.
  CTN_ASSERT_OK(ctn_scalar(g, CTN_F32, 0.2, &k5));
  CTN_ASSERT_OK(ctn_scalar(g, CTN_F32, 0.5, &half));
  CTN_ASSERT_OK(ctn_mul(g, cb.sum, k5, &m5));
  CTN_ASSERT_OK(ctn_add(g, m5, half, &a5));
  CTN_ASSERT_OK(ctn_clamp(g, a5, 0.0, 1.0, &c5));
  CTN_ASSERT_OK(ctn_mul(g, cb.sum, c5, &h5));
  EXPECT_EQ(steps_of(g, h5, "conv2d_bias_act"), 1u);  // bias only
  EXPECT_EQ(steps_of(g, h5, "clamp"), 1u);
  EXPECT_EQ(cb.compare(h5, -100.f, 100.f), 144);
}

// ResNet's conv -> add(bias) -> add(shortcut) -> relu and MobileNetV2's residual without an
// activation each become one conv2d_bias_add_act step (the shortcut here another convolution of
// x); a bias sum also read elsewhere, or a residual that broadcasts, keeps the residual add apart.
TEST(Passes, ConvBiasResidualFuses) {
  ConvBias cb;
  ctn_graph *g = cb.t.g;
  ctn_node w2, shortcut, sum, relu, other, bcast, sum3;
  std::vector<float> wd(4 * 3);
  for (size_t i = 0; i < wd.size(); ++i) wd[i] = std::sin(static_cast<float>(i) + 1) * 0.7f;
  ctn_tensor *w2v = make_f32({4, 3, 1, 1}, wd);
  CTN_ASSERT_OK(ctn_constant(g, w2v, &w2));
  CTN_ASSERT_OK(ctn_conv2d(g, cb.x, w2, 1, 1, 0, 0, 1, 1, 1, &shortcut));
  CTN_ASSERT_OK(ctn_add(g, cb.sum, shortcut, &sum));
  CTN_ASSERT_OK(ctn_relu(g, sum, &relu));
  EXPECT_EQ(steps_of(g, relu, "conv2d_bias_add_act"), 1u);
  EXPECT_EQ(steps_of(g, relu, nullptr, CTN_PASS_LAYOUT), 2u);  // + the shortcut's conv2d
  // Two NHWC convolutions: x in, relu out (layout stage); none where the CPU has no NHWC conv.
  EXPECT_EQ(steps_of(g, relu, "permute"), cpu_runs_nhwc_conv() ? 2u : 0u);
  EXPECT_EQ(steps_of(g, relu, "conv2d_bias_add_act", CTN_PASS_FUSION), 0u);
  const int zeros = cb.compare(relu, 0.f, 0.f), all = 4 * 6 * 6;
  EXPECT_GT(zeros, 0);  // the activation matters
  EXPECT_LT(zeros, all);
  EXPECT_EQ(steps_of(g, sum, "conv2d_bias_add_act"), 1u);  // no activation (MobileNetV2)
  EXPECT_EQ(steps_of(g, sum, nullptr, CTN_PASS_LAYOUT), 2u);
  EXPECT_EQ(cb.compare(sum, -1e9f, 1e9f), all);
  // The bias sum read elsewhere too: conv + bias fuse, the residual add and relu stay.
  CTN_ASSERT_OK(ctn_neg(g, cb.sum, &other));
  EXPECT_EQ(plan_steps(g, {relu, other}, {"conv2d_bias_add_act", "conv2d_bias_act", "add"}),
            (std::vector<uint32_t>{0, 1, 1}));
  // A residual that broadcasts ([1,4,1,6], the shortcut summed over its rows): not fused.
  const int32_t rows = 2;
  CTN_ASSERT_OK(ctn_sum(g, shortcut, 1, &rows, 1, &bcast));
  CTN_ASSERT_OK(ctn_add(g, cb.sum, bcast, &sum3));
  EXPECT_EQ(steps_of(g, sum3, "conv2d_bias_add_act"), 0u);
  EXPECT_EQ(steps_of(g, sum3, "conv2d_bias_act"), 1u);
  ctn_tensor_release(w2v);
}

// conv2d_bias_add_act built directly refuses a residual of another shape and an unknown
// activation code, naming what is wrong, and adds no node.
TEST(Passes, ConvBiasAddActRejectsBadInput) {
  ConvBias cb;
  ctn_graph *g = cb.t.g;
  ctn_node w, b, r_bad, r_ok, out = CTN_NODE_NONE;
  std::vector<float> wd(4 * 3 * 3 * 3, 0.25f);
  ctn_tensor *wv = make_f32({4, 3, 3, 3}, wd), *bv = make_f32({4}, {1, 2, 3, 4});
  CTN_ASSERT_OK(ctn_constant(g, wv, &w));
  CTN_ASSERT_OK(ctn_constant(g, bv, &b));
  r_bad = cb.t.in({1, 4, 6, 5});
  r_ok = cb.t.in({1, 4, 6, 6});
  ctn_attrs a{};
  const int64_t conv[8] = {1, 1, 1, 1, 1, 1, 1, CTN_ACT_RELU};
  std::copy(conv, conv + 8, a.i);
  a.ni = 8;
  ctn_node ins[4] = {cb.x, w, b, r_bad};
  EXPECT_EQ(ctn_op(g, CTN_OP_CONV2D_BIAS_ADD_ACT, 4, ins, &a, &out), CTN_ERR_SHAPE);
  EXPECT_NE(std::string(ctn_last_error()).find("residual"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(out, CTN_NODE_NONE);
  ins[3] = r_ok;
  a.i[7] = CTN_ACT_HARDSWISH + 1;
  EXPECT_EQ(ctn_op(g, CTN_OP_CONV2D_BIAS_ADD_ACT, 4, ins, &a, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("activation"), std::string::npos) << ctn_last_error();
  a.i[7] = CTN_ACT_SILU;
  CTN_ASSERT_OK(ctn_op(g, CTN_OP_CONV2D_BIAS_ADD_ACT, 4, ins, &a, &out));
  EXPECT_NE(out, CTN_NODE_NONE);
  for (auto *t : {wv, bv}) ctn_tensor_release(t);
}

TEST(Passes, MatmulBiasReluFuses) {
  G t;
  ctn_node x = t.in({5, 3}), w, b, m, s, r;
  ctn_tensor *wv = make_f32({3, 4}, {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f, 0.9f, 1.0f, -1.1f, 1.2f});
  ctn_tensor *bv = make_f32({4}, {0.5f, -0.5f, 0.25f, -0.25f});
  CTN_ASSERT_OK(ctn_constant(t.g, wv, &w));
  CTN_ASSERT_OK(ctn_constant(t.g, bv, &b));
  CTN_ASSERT_OK(ctn_matmul(t.g, x, w, 0, 0, &m));
  CTN_ASSERT_OK(ctn_add(t.g, m, b, &s));
  CTN_ASSERT_OK(ctn_relu(t.g, s, &r));
  EXPECT_EQ(steps_of(t.g, r, "matmul_bias_act"), 1u);
  EXPECT_EQ(steps_of(t.g, r, nullptr), 1u);
  EXPECT_EQ(steps_of(t.g, r, "matmul_bias_act", CTN_PASS_FUSION), 0u);
  std::vector<float> xd(15);
  for (size_t i = 0; i < xd.size(); ++i) xd[i] = std::sin(static_cast<float>(i));
  ctn_tensor *xv = make_f32({5, 3}, xd);
  ctn_compile_options nofuse{sizeof nofuse, CTN_PASS_FUSION, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
  auto fused = run_once(t.g, {r}, {x}, {xv});
  auto plain = run_once(t.g, {r}, {x}, {xv}, &nofuse);
  ASSERT_EQ(fused[0].size(), plain[0].size());
  for (size_t i = 0; i < fused[0].size(); ++i) EXPECT_NEAR(fused[0][i], plain[0][i], 1e-6);
  for (auto *p : {wv, bv, xv}) ctn_tensor_release(p);
}

// ---- channels-last regions (compile stage "layout", CTN_PASS_LAYOUT) ------------------------------
namespace {
// conv(3->8, 3x3) + bias -> relu -> conv(8->8, 3x3) + bias -> add(the first relu) -> relu -> mean
// over H, W -> matmul [8, 5]: one region of two convolutions entered once (x) and left by the
// mean's [1, 8] (no permute), and `mid` (the first relu) for a reader outside when asked.
struct ResidualNet {
  G t;
  ctn_node x = CTN_NODE_NONE, mid = CTN_NODE_NONE, act = CTN_NODE_NONE, out = CTN_NODE_NONE;
  std::vector<ctn_tensor *> owned;
  ctn_tensor *xv = nullptr;
  ctn_node constant(std::vector<int64_t> shape, float scale, float phase) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(static_cast<float>(i) * 0.37f + phase);
    owned.push_back(make_f32(shape, v));
    ctn_node c;
    EXPECT_EQ(ctn_constant(t.g, owned.back(), &c), CTN_OK);
    return c;
  }
  ResidualNet() {
    x = t.in({1, 3, 8, 8});
    ctn_node c1, s1, c2, s2, sum, m;
    EXPECT_EQ(ctn_conv2d(t.g, x, constant({8, 3, 3, 3}, 0.4f, 0), 1, 1, 1, 1, 1, 1, 1, &c1), CTN_OK);
    EXPECT_EQ(ctn_add(t.g, c1, constant({8, 1, 1}, 0.3f, 1), &s1), CTN_OK);
    EXPECT_EQ(ctn_relu(t.g, s1, &mid), CTN_OK);
    EXPECT_EQ(ctn_conv2d(t.g, mid, constant({8, 8, 3, 3}, 0.2f, 2), 1, 1, 1, 1, 1, 1, 1, &c2), CTN_OK);
    EXPECT_EQ(ctn_add(t.g, c2, constant({8, 1, 1}, 0.3f, 3), &s2), CTN_OK);
    EXPECT_EQ(ctn_add(t.g, s2, mid, &sum), CTN_OK);
    EXPECT_EQ(ctn_relu(t.g, sum, &act), CTN_OK);
    const int32_t hw[2] = {2, 3};
    EXPECT_EQ(ctn_mean(t.g, act, 2, hw, 0, &m), CTN_OK);
    EXPECT_EQ(ctn_matmul(t.g, m, constant({8, 5}, 0.5f, 4), 0, 0, &out), CTN_OK);
    std::vector<float> xd(3 * 8 * 8);
    for (size_t i = 0; i < xd.size(); ++i) xd[i] = 2 * std::cos(static_cast<float>(i) * 0.61f);
    xv = make_f32({1, 3, 8, 8}, xd);
  }
  ~ResidualNet() {
    for (auto *p : owned) ctn_tensor_release(p);
    ctn_tensor_release(xv);
  }
  // Every output with the stage on matches the stage off within rtol 1e-5; returns the values
  // compared.
  size_t compare(std::vector<ctn_node> outs) {
    ctn_compile_options off{sizeof off, CTN_PASS_LAYOUT, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
    auto on = run_once(t.g, outs, {x}, {xv});
    auto plain = run_once(t.g, outs, {x}, {xv}, &off);
    size_t n = 0;
    EXPECT_EQ(on.size(), plain.size());
    for (size_t k = 0; k < on.size() && k < plain.size(); ++k) {
      EXPECT_EQ(on[k].size(), plain[k].size());
      for (size_t i = 0; i < on[k].size() && i < plain[k].size(); ++i, ++n)
        EXPECT_NEAR(on[k][i], plain[k][i], 1e-5 * std::fabs(plain[k][i]) + 1e-6) << "output " << k << " [" << i << "]";
    }
    return n;
  }
};

// Node v's shape.
std::vector<int64_t> node_shape(ctn_graph *g, ctn_node v) {
  uint32_t nd = 0;
  int64_t shape[8] = {};
  ctn_dtype dt;
  EXPECT_EQ(ctn_node_info(g, v, &dt, &nd, shape), CTN_OK) << ctn_last_error();
  return std::vector<int64_t>(shape, shape + nd);
}

// The plan's steps of `op` and its describe text, for outs with options disabling `disable`.
uint32_t layout_steps(ctn_graph *g, std::vector<ctn_node> outs, const char *op, uint32_t disable, std::string *desc) {
  ctn_compile_options o{sizeof o, disable, nullptr, nullptr, 0, 0, CTN_PRECISION_F32};
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, static_cast<uint32_t>(outs.size()), outs.data(), &o, &p), CTN_OK) << ctn_last_error();
  if (!p) return 0;
  uint32_t n = 0;
  EXPECT_EQ(ctn_plan_backend_steps(p, "cpu", op, &n), CTN_OK);
  const char *d = nullptr;
  ctn_plan_describe(p, &d);
  if (desc) *desc = d ? d : "";
  ctn_plan_release(p);
  return n;
}
}  // namespace

// conv -> bias/relu -> residual add -> conv -> global mean -> matmul: with the stage, both
// convolutions run NHWC (layout 1) behind one permute of x, the mean reads NHWC and gives the
// NCHW [1, 8] itself; the outputs match the stage off.
TEST(Passes, LayoutRegionRunsChannelsLast) {
  SKIP_WITHOUT_NHWC_CONV();
  ResidualNet net;
  std::string desc;
  EXPECT_EQ(layout_steps(net.t.g, {net.out}, "permute", 0, &desc), 1u) << desc;
  EXPECT_NE(desc.find("layout: 1 channels-last regions, 2 convolutions NHWC, 1 permutes"), std::string::npos) << desc;
  EXPECT_EQ(layout_steps(net.t.g, {net.out}, "permute", CTN_PASS_LAYOUT, &desc), 0u);
  EXPECT_EQ(desc.find("layout:"), std::string::npos) << desc;
  // The same region fused or not (conv2d_bias_act / conv2d_bias_add_act, or conv2d with adds).
  EXPECT_EQ(layout_steps(net.t.g, {net.out}, "conv2d_bias_add_act", 0, &desc), 1u) << desc;
  EXPECT_EQ(layout_steps(net.t.g, {net.out}, "conv2d", CTN_PASS_FUSION, &desc), 2u) << desc;
  EXPECT_NE(desc.find("2 convolutions NHWC"), std::string::npos) << desc;
  EXPECT_EQ(net.compare({net.out}), 5u);
  // The NHWC output before the mean as a plan output: permuted back (a second permute).
  EXPECT_EQ(layout_steps(net.t.g, {net.out, net.act}, "permute", 0, &desc), 2u) << desc;
  EXPECT_EQ(net.compare({net.out, net.act}), 5u + 8 * 8 * 8);
}

// A region value also read by an op that cannot run channels-last (softmax): it leaves the
// region through a permute back and both results match the NCHW plan.
TEST(Passes, LayoutValueReadOutsideTheRegion) {
  SKIP_WITHOUT_NHWC_CONV();
  ResidualNet net;
  ctn_node soft;
  CTN_ASSERT_OK(ctn_softmax(net.t.g, net.mid, 1, &soft));
  std::string desc;
  EXPECT_EQ(layout_steps(net.t.g, {net.out, soft}, "permute", 0, &desc), 2u) << desc;
  EXPECT_EQ(layout_steps(net.t.g, {net.out, soft}, "softmax", 0, &desc), 1u) << desc;
  EXPECT_EQ(net.compare({net.out, soft}), 5u + 8 * 8 * 8);
}

// conv -> max_pool2d (3x3, stride 2, padding 1) -> conv -> avg_pool2d (2x2) -> relu: with the
// pools' layout attribute (ABI 1.7) one region, x permuted in and the result permuted out (two
// permutes; without the stage none), both pools NHWC; the outputs match the stage off.
TEST(Passes, LayoutRegionRunsPoolsChannelsLast) {
  SKIP_WITHOUT_NHWC_CONV();
  ResidualNet net;
  ctn_node c1, p1, c2, p2, out;
  CTN_ASSERT_OK(ctn_conv2d(net.t.g, net.x, net.constant({8, 3, 3, 3}, 0.4f, 5), 1, 1, 1, 1, 1, 1, 1, &c1));
  CTN_ASSERT_OK(ctn_max_pool2d(net.t.g, c1, 3, 3, 2, 2, 1, 1, &p1));
  CTN_ASSERT_OK(ctn_conv2d(net.t.g, p1, net.constant({8, 8, 3, 3}, 0.2f, 6), 1, 1, 1, 1, 1, 1, 1, &c2));
  CTN_ASSERT_OK(ctn_avg_pool2d(net.t.g, c2, 2, 2, 2, 2, 0, 0, 0, &p2));
  CTN_ASSERT_OK(ctn_relu(net.t.g, p2, &out));
  std::string desc;
  EXPECT_EQ(layout_steps(net.t.g, {out}, "permute", 0, &desc), 2u) << desc;
  EXPECT_NE(desc.find("layout: 1 channels-last regions, 2 convolutions NHWC, 2 permutes and 0 reshapes at their "
                      "edges, 2 pools NHWC"),
            std::string::npos)
      << desc;
  EXPECT_EQ(layout_steps(net.t.g, {out}, "max_pool2d", 0, &desc), 1u) << desc;
  EXPECT_EQ(layout_steps(net.t.g, {out}, "permute", CTN_PASS_LAYOUT, &desc), 0u) << desc;
  EXPECT_EQ(net.compare({out}), 8u * 2 * 2);
  // The pooled value as a second plan output: permuted back too.
  EXPECT_EQ(layout_steps(net.t.g, {out, p1}, "permute", 0, &desc), 3u) << desc;
  EXPECT_EQ(net.compare({out, p1}), 8u * 2 * 2 + 8 * 4 * 4);
}

// Layout 1 pools built directly: NHWC shapes, a bad layout refused naming the slot, no
// gradient, no ONNX export.
TEST(Passes, LayoutPoolAttributeChecks) {
  G t;
  ctn_node x = t.in({1, 6, 5, 3}), y, bad = CTN_NODE_NONE;
  ctn_attrs a{};
  const int64_t mp[7] = {3, 3, 2, 2, 1, 1, CTN_LAYOUT_NHWC};
  std::copy(mp, mp + 7, a.i);
  a.ni = 7;
  CTN_ASSERT_OK(ctn_op(t.g, CTN_OP_MAX_POOL2D, 1, &x, &a, &y));
  EXPECT_EQ(node_shape(t.g, y), (std::vector<int64_t>{1, 3, 3, 3}));
  a.i[6] = 2;
  EXPECT_EQ(ctn_op(t.g, CTN_OP_MAX_POOL2D, 1, &x, &a, &bad), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("layout i[6]"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(bad, CTN_NODE_NONE);
  ctn_node av;
  const int64_t ap[8] = {2, 2, 1, 1, 0, 0, 1, CTN_LAYOUT_NHWC};
  std::copy(ap, ap + 8, a.i);
  a.ni = 8;
  CTN_ASSERT_OK(ctn_op(t.g, CTN_OP_AVG_POOL2D, 1, &x, &a, &av));
  EXPECT_EQ(node_shape(t.g, av), (std::vector<int64_t>{1, 5, 4, 3}));
  for (ctn_node v : {y, av}) {
    ctn_node loss, grad = CTN_NODE_NONE;
    CTN_ASSERT_OK(ctn_sum(t.g, v, 0, nullptr, 0, &loss));
    EXPECT_EQ(ctn_grad(t.g, loss, 1, &x, &grad), CTN_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(ctn_last_error()).find("layout 1"), std::string::npos) << ctn_last_error();
    const std::string path = ::testing::TempDir() + "layout_nhwc_pool.onnx";
    EXPECT_EQ(ctn_onnx_export(t.g, nullptr, 1, &v, nullptr, path.c_str()), CTN_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(ctn_last_error()).find("NHWC"), std::string::npos) << ctn_last_error();
  }
}

// A single convolution between a permute in and one out would trade two reorders for two
// permutes: it stays NCHW.
TEST(Passes, LayoutSkipsARegionThatDoesNotPay) {
  ConvBias cb;
  ctn_node r;
  CTN_ASSERT_OK(ctn_relu(cb.t.g, cb.sum, &r));
  std::string desc;
  EXPECT_EQ(layout_steps(cb.t.g, {r}, "permute", 0, &desc), 0u) << desc;
  EXPECT_EQ(desc.find("layout:"), std::string::npos) << desc;
}

// A CPU backend on its own convolution (conv=own) refuses layout 1: the plan is the NCHW one.
TEST(Passes, LayoutUnchangedWhenTheBackendRefuses) {
  ResidualNet net;
  CTN_ASSERT_OK(ctn_context_set_option(net.t.c.ctx, "cpu", "conv", "own"));
  std::string desc;
  EXPECT_EQ(layout_steps(net.t.g, {net.out}, "permute", 0, &desc), 0u) << desc;
  EXPECT_EQ(desc.find("layout:"), std::string::npos) << desc;
  EXPECT_EQ(net.compare({net.out}), 5u);
}

// Layout 1 nodes built directly: shapes in NHWC, a bad layout value refused naming the slot, no
// gradient (the stage makes them in inference plans only), and no ONNX export.
TEST(Passes, LayoutAttributeChecks) {
  G t;
  ctn_node x = t.in({1, 4, 5, 3}), w, y, bad = CTN_NODE_NONE;
  ctn_tensor *wv = make_f32({4, 3, 3, 3}, std::vector<float>(108, 0.5f));
  CTN_ASSERT_OK(ctn_constant(t.g, wv, &w));
  ctn_attrs a{};
  const int64_t conv[8] = {1, 1, 1, 1, 1, 1, 1, CTN_LAYOUT_NHWC};
  std::copy(conv, conv + 8, a.i);
  a.ni = 8;
  ctn_node ins[2] = {x, w};
  CTN_ASSERT_OK(ctn_op(t.g, CTN_OP_CONV2D, 2, ins, &a, &y));
  EXPECT_EQ(node_shape(t.g, y), (std::vector<int64_t>{1, 4, 5, 4}));
  a.i[7] = 2;
  EXPECT_EQ(ctn_op(t.g, CTN_OP_CONV2D, 2, ins, &a, &bad), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("layout i[7]"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(bad, CTN_NODE_NONE);
  ctn_node loss, grad = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_sum(t.g, y, 0, nullptr, 0, &loss));
  EXPECT_EQ(ctn_grad(t.g, loss, 1, &w, &grad), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("layout 1"), std::string::npos) << ctn_last_error();
  // An NHWC conv2d plus a [4,1,1] "bias" (per H here, H = O = 4) is no conv2d_bias_act (a
  // plan, so only where the CPU runs NHWC convolutions).
  ctn_node hb, s;
  ctn_tensor *hbv = make_f32({4, 1, 1}, {1, 2, 3, 4});
  CTN_ASSERT_OK(ctn_constant(t.g, hbv, &hb));
  CTN_ASSERT_OK(ctn_add(t.g, y, hb, &s));
  if (cpu_runs_nhwc_conv()) {
    EXPECT_EQ(steps_of(t.g, s, "conv2d_bias_act"), 0u);
    EXPECT_EQ(steps_of(t.g, s, "conv2d"), 1u);
  }
  ctn_tensor_release(hbv);
  const std::string path = ::testing::TempDir() + "layout_nhwc.onnx";
  EXPECT_EQ(ctn_onnx_export(t.g, nullptr, 1, &y, nullptr, path.c_str()), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("NHWC"), std::string::npos) << ctn_last_error();
  ctn_tensor_release(wv);
}

// ShuffleNet's channel shuffle (reshape [1,2,4,8,8], permute (0,2,1,3,4), reshape back) after the
// region joins it (in NHWC: [1,8,8,2,4], (0,1,2,4,3), [1,8,8,8]): the relu and mean after it stay
// in the region, so x's permute is the only one, and the shuffled channels match the NCHW plan.
TEST(Passes, LayoutChannelShuffleJoinsTheRegion) {
  SKIP_WITHOUT_NHWC_CONV();
  ResidualNet net;
  ctn_node r1, p, r2, relu, pooled;
  const int64_t split[5] = {1, 2, 4, 8, 8}, back[4] = {1, 8, 8, 8};
  const int32_t perm[5] = {0, 2, 1, 3, 4}, hw[2] = {2, 3};
  CTN_ASSERT_OK(ctn_reshape(net.t.g, net.act, 5, split, &r1));
  CTN_ASSERT_OK(ctn_permute(net.t.g, r1, perm, &p));
  CTN_ASSERT_OK(ctn_reshape(net.t.g, p, 4, back, &r2));
  CTN_ASSERT_OK(ctn_relu(net.t.g, r2, &relu));
  CTN_ASSERT_OK(ctn_mean(net.t.g, relu, 2, hw, 0, &pooled));
  std::string desc;
  EXPECT_EQ(layout_steps(net.t.g, {net.out, pooled}, "permute", 0, &desc), 2u) << desc;  // x's and the shuffle's
  EXPECT_NE(desc.find("1 permutes"), std::string::npos) << desc;
  EXPECT_EQ(net.compare({net.out, pooled}), 5u + 8);
  // The shuffled value as a plan output: it leaves the region (one more permute).
  EXPECT_EQ(layout_steps(net.t.g, {net.out, r2}, "permute", 0, &desc), 3u) << desc;
  EXPECT_EQ(net.compare({net.out, r2}), 5u + 8 * 8 * 8);
}
