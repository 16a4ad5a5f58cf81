// Mixed-precision training (issue 27, part 3): the compile stage autocast
// (ctn_compile_options.precision, core/compile/autocast.cpp) and dynamic loss scaling
// (ctn_optimizer.loss_scale, core/nn/optim.cpp), on the CPU backend.
//
// Autocast: which steps of a CNN's training plan run in bf16/f16 (matmul, conv and their
// gradients) and which stay f32 (everything else, the variables); that a value is cast once
// however many low-precision ops read it; results within the low dtype's tolerance of f32; the
// loss falls and every parameter moves (gradients flow through the casts); the planner counts
// the smaller buffers; bad and old option structs. Loss scaling: a power-of-two scale changes
// nothing in f32, an overflowing step leaves every variable as it was and halves the scale,
// clean steps double it, and f16 training recovers from a scale that overflows.
#include <chutney/nn.h>
#include <chutney/ops.h>

#include "test_helpers.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

// One step line of ctn_plan_describe: op and output dtype.
struct StepLine {
  std::string op, dtype;
};

std::vector<StepLine> steps_of(ctn_plan *p) {
  const char *text = nullptr;
  EXPECT_EQ(ctn_plan_describe(p, &text), CTN_OK) << ctn_last_error();
  std::vector<StepLine> out;
  std::istringstream in(text ? text : "");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    size_t idx;
    StepLine s;
    std::string backend, ty;
    if (!(ls >> idx >> s.op >> backend >> ty)) continue;
    s.dtype = ty.substr(0, ty.find('['));
    out.push_back(s);
  }
  return out;
}

std::string describe(ctn_plan *p) {
  const char *text = nullptr;
  EXPECT_EQ(ctn_plan_describe(p, &text), CTN_OK) << ctn_last_error();
  return text ? text : "";
}

// "autocast bf16: N nodes run in bf16, M casts added, K kept f32": {N, M, K}.
std::vector<int> autocast_counts(ctn_plan *p) {
  const std::string d = describe(p);
  const size_t at = d.find("autocast ");
  if (at == std::string::npos) return {};
  int n = -1, m = -1, k = -1;
  char low[8] = {}, low2[8] = {};
  if (std::sscanf(d.c_str() + at, "autocast %7[^:]: %d nodes run in %7s %d casts added, %d kept", low, &n, low2, &m, &k) != 5)
    return {};
  return {n, m, k};
}

ctn_plan *compile(ctn_graph *g, ctn_node out, uint32_t precision) {
  ctn_compile_options co{};
  co.struct_size = sizeof co;
  co.precision = precision;
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, 1, &out, &co, &p), CTN_OK) << ctn_last_error();
  return p;
}

std::vector<float> random_values(size_t n, uint64_t seed, float scale = 1.0f) {
  return random_normal<float>(n, seed, scale);
}

// A small CNN (conv, batch norm, relu, pool, conv, relu, pool, linear, relu, linear) with
// cross-entropy and an optimizer from ctn_nn_minimize, on fixed random data.
struct Cnn {
  Ctx c;
  ctn_graph *g = nullptr;
  ctn_model *m = nullptr;
  ctn_node x = 0, labels = 0, loss = 0;
  ctn_tensor *xt = nullptr, *yt = nullptr;
  static constexpr int64_t kN = 8;

  explicit Cnn(const ctn_optimizer &opt) {
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
    EXPECT_EQ(ctn_model_create(g, CTN_F32, 11, &m), CTN_OK) << ctn_last_error();
    ctn_node h = image_classifier_stem(g, m, kN, 12, 4, &x, &labels);
    EXPECT_EQ(ctn_nn_conv2d(m, h, 4, 8, 3, 1, 1, &h), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_nn_relu(m, h, &h), CTN_OK);
    EXPECT_EQ(ctn_nn_max_pool2d(m, h, 2, 2, &h), CTN_OK);
    EXPECT_EQ(ctn_nn_flatten(m, h, &h), CTN_OK);
    EXPECT_EQ(ctn_nn_linear(m, h, 8 * 3 * 3, 16, 1, &h), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_nn_relu(m, h, &h), CTN_OK);
    EXPECT_EQ(ctn_nn_linear(m, h, 16, 4, 1, &h), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_cross_entropy(g, h, labels, &loss), CTN_OK);
    EXPECT_EQ(ctn_nn_minimize(m, loss, &opt, nullptr), CTN_OK) << ctn_last_error();
    xt = make_f32({kN, 1, 12, 12}, random_values(kN * 144, 3));
    std::vector<int32_t> y(kN);
    for (int64_t i = 0; i < kN; ++i) y[static_cast<size_t>(i)] = static_cast<int32_t>(i % 4);
    EXPECT_EQ(ctn_tensor_create(CTN_I32, 1, &kN, y.data(), &yt), CTN_OK);
  }
  ~Cnn() {
    ctn_tensor_release(xt);
    ctn_tensor_release(yt);
    ctn_model_release(m);
    ctn_graph_release(g);
  }
  std::vector<ctn_node> params() {
    uint32_t n = 0;
    const ctn_node *nodes = nullptr;
    EXPECT_EQ(ctn_model_variables(m, CTN_VAR_PARAMETER, &n, nullptr, &nodes), CTN_OK);
    return std::vector<ctn_node>(nodes, nodes + n);
  }
  // Runs `steps` updates; returns the loss of each.
  std::vector<float> train(ctn_plan *p, int steps, const ctn_tensor *x_value = nullptr) {
    std::vector<float> losses;
    ctn_tensor *out = nullptr;
    EXPECT_EQ(ctn_plan_output_create(p, 0, &out), CTN_OK);
    const ctn_node feeds[2] = {x, labels};
    const ctn_tensor *vals[2] = {x_value ? x_value : xt, yt};
    for (int s = 1; s <= steps; ++s) {
      EXPECT_EQ(ctn_model_set_step(m, s), CTN_OK);
      EXPECT_EQ(ctn_model_run(m, p, 2, feeds, vals, 1, &out), CTN_OK) << ctn_last_error();
      losses.push_back(read_f32(out)[0]);
    }
    ctn_tensor_release(out);
    return losses;
  }
};

ctn_optimizer sgd(double lr = 0.05) {
  ctn_optimizer o{};
  o.struct_size = sizeof o;
  o.kind = CTN_OPTIM_SGD;
  o.lr = lr;
  o.momentum = 0.9;
  return o;
}

bool runs_low(const std::string &op) {
  return op == "matmul" || op == "matmul_bias_act" || op == "conv2d" || op == "conv2d_bias_act" ||
         op == "conv2d_grad_input" || op == "conv2d_grad_weight";
}

class AutocastCnn : public ::testing::TestWithParam<uint32_t> {};

TEST_P(AutocastCnn, MatmulAndConvRunLowEverythingElseF32) {
  const uint32_t prec = GetParam();
  const std::string low = prec == CTN_PRECISION_BF16 ? "bf16" : "f16";
  Cnn net(sgd());
  ctn_plan *p = compile(net.g, net.loss, prec);
  ASSERT_NE(p, nullptr);
  std::map<std::string, int> low_ops;
  int casts = 0;
  for (const StepLine &s : steps_of(p)) {
    if (s.op == "cast") {
      ++casts;
      continue;
    }
    if (runs_low(s.op)) {
      EXPECT_EQ(s.dtype, low) << s.op;
      ++low_ops[s.op];
    } else {
      EXPECT_NE(s.dtype, low) << s.op << " should stay f32";
    }
    if (s.op.rfind("batch_norm", 0) == 0 || s.op.rfind("cross_entropy", 0) == 0 || s.op.rfind("sgd", 0) == 0 ||
        s.op == "sum" || s.op.rfind("max_pool", 0) == 0) {
      EXPECT_EQ(s.dtype, "f32") << s.op;
    }
  }
  // Forward conv x2 (fused with their biases where the fusion pass could), both convolutions'
  // weight gradients and the second's input gradient (the first's input gradient is not needed),
  // the linear layers forward and backward.
  EXPECT_EQ(low_ops["conv2d"] + low_ops["conv2d_bias_act"], 2);
  EXPECT_EQ(low_ops["conv2d_grad_weight"], 2);
  EXPECT_EQ(low_ops["conv2d_grad_input"], 1);
  EXPECT_GE(low_ops["matmul"] + low_ops["matmul_bias_act"], 5);
  EXPECT_GT(casts, 0);
  const std::vector<int> counts = autocast_counts(p);
  ASSERT_EQ(counts.size(), 3u) << describe(p);
  EXPECT_EQ(counts[1], casts);
  EXPECT_EQ(counts[2], 0);  // the CPU has every kernel in 16 bits
  // The master weights stay f32.
  for (ctn_node v : net.params()) {
    ctn_tensor *t = nullptr;
    ASSERT_EQ(ctn_plan_variable_read(p, v, &t), CTN_OK);
    ctn_dtype dt;
    ASSERT_EQ(ctn_tensor_dtype(t, &dt), CTN_OK);
    EXPECT_EQ(dt, CTN_F32);
    ctn_tensor_release(t);
  }
  ctn_plan_release(p);
}

// Same seed, same data: the low-precision run's losses follow f32's within the dtype's
// tolerance, fall, and every parameter moves (the gradients flow through the casts).
TEST_P(AutocastCnn, TrainsLikeF32) {
  const uint32_t prec = GetParam();
  Cnn ref(sgd()), low(sgd());
  ctn_plan *pf = compile(ref.g, ref.loss, CTN_PRECISION_F32);
  ctn_plan *pl = compile(low.g, low.loss, prec);
  ASSERT_TRUE(pf && pl);
  const std::vector<ctn_node> params = low.params();
  std::vector<std::vector<float>> before;
  for (ctn_node v : params) before.push_back(read_variable(pl, v));
  const std::vector<float> lf = ref.train(pf, 8), ll = low.train(pl, 8);
  const float tol = prec == CTN_PRECISION_BF16 ? 0.03f : 0.01f;  // relative, per step
  for (size_t i = 0; i < lf.size(); ++i) EXPECT_NEAR(ll[i], lf[i], tol * lf[i] + 1e-3f) << "step " << i + 1;
  EXPECT_LT(ll.back(), 0.7f * ll.front());
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> after = read_variable(pl, params[i]);
    double moved = 0;
    for (size_t k = 0; k < after.size(); ++k) moved += std::fabs(after[k] - before[i][k]);
    EXPECT_GT(moved, 0.0) << "parameter " << i << " did not change";
  }
  ctn_plan_release(pf);
  ctn_plan_release(pl);
}

INSTANTIATE_TEST_SUITE_P(Precisions, AutocastCnn, ::testing::Values(CTN_PRECISION_BF16, CTN_PRECISION_F16),
                         [](const ::testing::TestParamInfo<uint32_t> &i) {
                           return std::string(i.param == CTN_PRECISION_BF16 ? "bf16" : "f16");
                         });

struct Mlp {
  Ctx c;
  ctn_graph *g = nullptr;
  ctn_node x = 0, w[3] = {}, out = 0;
  std::vector<ctn_tensor *> owned;
  explicit Mlp(int64_t n = 16, int64_t d = 32) {
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
    const int64_t xs[2] = {n, d};
    EXPECT_EQ(ctn_input(g, "x", CTN_F32, 2, xs, &x), CTN_OK);
    for (int i = 0; i < 3; ++i) {
      owned.push_back(make_f32({d, d}, random_values(static_cast<size_t>(d * d), 10 + i, 1.0f / std::sqrt(static_cast<float>(d)))));
      EXPECT_EQ(ctn_variable(g, ("w" + std::to_string(i)).c_str(), owned.back(), &w[i]), CTN_OK);
    }
  }
  ~Mlp() {
    for (ctn_tensor *t : owned) ctn_tensor_release(t);
    ctn_graph_release(g);
  }
  std::vector<float> run(ctn_plan *p, const ctn_tensor *xv) {
    ctn_tensor *o = nullptr;
    EXPECT_EQ(ctn_plan_output_create(p, 0, &o), CTN_OK);
    EXPECT_EQ(ctn_plan_run(p, 1, &x, &xv, 1, &o), CTN_OK) << ctn_last_error();
    std::vector<float> v = read_f32(o);
    ctn_tensor_release(o);
    return v;
  }
};

// a = x w0, b = x w1 (x read by two low ops: cast once), c = a w2 (a low op reading a low op:
// no cast at all), out = tanh(b + c). Casts: x, w0, w1, w2 down, b and c up.
TEST(Autocast, CastsEachValueOnceAndMatchesF32) {
  Mlp net;
  ctn_node a, b, cc, s;
  ASSERT_EQ(ctn_matmul(net.g, net.x, net.w[0], 0, 0, &a), CTN_OK);
  ASSERT_EQ(ctn_matmul(net.g, net.x, net.w[1], 0, 0, &b), CTN_OK);
  ASSERT_EQ(ctn_matmul(net.g, a, net.w[2], 0, 0, &cc), CTN_OK);
  ASSERT_EQ(ctn_add(net.g, b, cc, &s), CTN_OK);
  ASSERT_EQ(ctn_tanh(net.g, s, &net.out), CTN_OK);
  ctn_tensor *xv = make_f32({16, 32}, random_values(16 * 32, 5));
  ctn_plan *pf = compile(net.g, net.out, CTN_PRECISION_F32);
  const std::vector<float> ref = net.run(pf, xv);
  for (uint32_t prec : {CTN_PRECISION_BF16, CTN_PRECISION_F16}) {
    ctn_plan *p = compile(net.g, net.out, prec);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(autocast_counts(p), (std::vector<int>{3, 6, 0})) << describe(p);
    uint32_t n_cast = 0;
    ASSERT_EQ(ctn_plan_backend_steps(p, "cpu", "cast", &n_cast), CTN_OK);
    EXPECT_EQ(n_cast, 6u);
    const std::vector<float> got = net.run(p, xv);
    // bf16 keeps 8 significant bits, f16 11: a few roundings of each size on values ~1.
    const double tol = prec == CTN_PRECISION_BF16 ? 4e-2 : 5e-3;
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]));
    EXPECT_LT(worst, tol);
    EXPECT_GT(worst, 0.0);  // it did run in low precision
    ctn_plan_release(p);
  }
  ctn_plan_release(pf);
  ctn_tensor_release(xv);
}

// A chain of matmuls keeps its intermediates in 16 bits: the planner sizes them by dtype.
TEST(Autocast, PlannerCountsTheSmallerBuffers) {
  Mlp net(256, 128);
  ctn_node h = net.x;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ctn_matmul(net.g, h, net.w[i], 0, 0, &h), CTN_OK);
  ASSERT_EQ(ctn_tanh(net.g, h, &net.out), CTN_OK);
  ctn_plan *pf = compile(net.g, net.out, CTN_PRECISION_F32);
  ctn_plan *pb = compile(net.g, net.out, CTN_PRECISION_BF16);
  ASSERT_TRUE(pf && pb);
  ctn_plan_stats sf{}, sb{};
  sf.struct_size = sb.struct_size = sizeof sf;
  ASSERT_EQ(ctn_plan_stats_get(pf, &sf), CTN_OK);
  ASSERT_EQ(ctn_plan_stats_get(pb, &sb), CTN_OK);
  // f32: three [256,128] intermediates and tanh's output. bf16: x cast, two intermediates and
  // the last matmul in bf16, the weights' casts, its cast up and tanh in f32.
  const uint64_t act = 256 * 128;
  EXPECT_EQ(sf.naive_bytes, 4 * act * 4);
  EXPECT_EQ(sb.naive_bytes, 4 * act * 2 + 3 * 128 * 128 * 2 + 2 * act * 4);
  EXPECT_LT(sb.planned_peak_bytes, sf.planned_peak_bytes + 3 * 128 * 128 * 2);
  EXPECT_EQ(sb.persistent_bytes, sf.persistent_bytes);  // the variables stay f32
  ctn_plan_release(pf);
  ctn_plan_release(pb);
}

TEST(Autocast, BadAndOldOptions) {
  Mlp net;
  ASSERT_EQ(ctn_matmul(net.g, net.x, net.w[0], 0, 0, &net.out), CTN_OK);
  ctn_compile_options co{};
  co.struct_size = sizeof co;
  co.precision = 7;
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(net.g, 1, &net.out, &co, &p), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("precision"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(p, nullptr);
  // A caller built against 1.4 passes the struct without the field: f32, whatever follows it.
  co.struct_size = offsetof(ctn_compile_options, precision);
  co.precision = CTN_PRECISION_BF16;
  ASSERT_EQ(ctn_plan_compile(net.g, 1, &net.out, &co, &p), CTN_OK) << ctn_last_error();
  for (const StepLine &s : steps_of(p)) EXPECT_EQ(s.dtype, "f32") << s.op;
  EXPECT_TRUE(autocast_counts(p).empty());
  ctn_plan_release(p);
  // An f64 graph is left alone: autocast lowers f32 only.
  Ctx c;
  ctn_graph *g = nullptr;
  ASSERT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
  const int64_t s2[2] = {4, 4};
  ctn_node a, y;
  ASSERT_EQ(ctn_input(g, "a", CTN_F64, 2, s2, &a), CTN_OK);
  ASSERT_EQ(ctn_matmul(g, a, a, 0, 0, &y), CTN_OK);
  p = compile(g, y, CTN_PRECISION_BF16);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(autocast_counts(p), (std::vector<int>{0, 0, 0}));
  ctn_plan_release(p);
  ctn_graph_release(g);
}

// ---- dynamic loss scaling -------------------------------------------------------------------

ctn_node model_var(ctn_model *m, const char *name) {
  uint32_t n = 0;
  const char *const *names = nullptr;
  const ctn_node *nodes = nullptr;
  EXPECT_EQ(ctn_model_variables(m, CTN_VAR_OPTIMIZER, &n, &names, &nodes), CTN_OK);
  for (uint32_t i = 0; i < n; ++i)
    if (std::strcmp(names[i], name) == 0) return nodes[i];
  ADD_FAILURE() << "no variable " << name;
  return CTN_NODE_NONE;
}

ctn_optimizer adam_scaled(double scale, int64_t interval) {
  ctn_optimizer o{};
  o.struct_size = sizeof o;
  o.kind = CTN_OPTIM_ADAM;
  o.lr = 1e-2;
  o.loss_scale = scale;
  o.loss_scale_interval = interval;
  return o;
}

// With a power-of-two scale and no overflow, f32 training is bit-identical to no scaling.
TEST(LossScaling, PowerOfTwoScaleChangesNothingInF32) {
  Cnn plain(adam_scaled(0, 0)), scaled(adam_scaled(1024, 0));
  ctn_plan *pp = compile(plain.g, plain.loss, CTN_PRECISION_F32), *ps = compile(scaled.g, scaled.loss, CTN_PRECISION_F32);
  ASSERT_TRUE(pp && ps);
  EXPECT_EQ(plain.train(pp, 4), scaled.train(ps, 4));
  const std::vector<ctn_node> a = plain.params(), b = scaled.params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(read_variable(pp, a[i]), read_variable(ps, b[i]));
  EXPECT_EQ(read_variable(ps, model_var(scaled.m, "loss_scale")), std::vector<float>{1024.0f});
  EXPECT_EQ(read_variable(ps, model_var(scaled.m, "loss_scale.clean_steps")), std::vector<float>{4.0f});
  ctn_plan_release(pp);
  ctn_plan_release(ps);
}

// Clean steps count up and double the scale after `interval`; a step whose gradients are not
// finite (a NaN in the input) changes no variable - weights, batch-norm statistics excepted
// (the forward pass updates them, as PyTorch's does), Adam's moments - and halves the scale.
TEST(LossScaling, OverflowSkipsTheStepAndHalvesTheScale) {
  Cnn net(adam_scaled(256, 2));
  ctn_plan *p = compile(net.g, net.loss, CTN_PRECISION_F32);
  ASSERT_NE(p, nullptr);
  const ctn_node scale = model_var(net.m, "loss_scale"), clean = model_var(net.m, "loss_scale.clean_steps");
  net.train(p, 1);
  EXPECT_EQ(read_variable(p, scale), std::vector<float>{256.0f});
  EXPECT_EQ(read_variable(p, clean), std::vector<float>{1.0f});
  net.train(p, 1);
  EXPECT_EQ(read_variable(p, scale), std::vector<float>{512.0f});
  EXPECT_EQ(read_variable(p, clean), std::vector<float>{0.0f});

  std::vector<float> bad = read_f32(net.xt);
  bad[7] = std::nanf("");
  ctn_tensor *xbad = make_f32({Cnn::kN, 1, 12, 12}, bad);
  uint32_t n = 0;
  const ctn_node *nodes = nullptr;
  const char *const *names = nullptr;
  ASSERT_EQ(ctn_model_variables(net.m, CTN_VAR_PARAMETER | CTN_VAR_OPTIMIZER, &n, &names, &nodes), CTN_OK);
  std::vector<ctn_node> watched;
  for (uint32_t i = 0; i < n; ++i)
    if (std::strncmp(names[i], "loss_scale", 10) != 0) watched.push_back(nodes[i]);
  std::vector<std::vector<float>> before;
  for (ctn_node v : watched) before.push_back(read_variable(p, v));
  net.train(p, 1, xbad);  // the loss itself may be finite: relu(NaN) is 0 on the CPU
  for (size_t i = 0; i < watched.size(); ++i) EXPECT_EQ(read_variable(p, watched[i]), before[i]) << "variable " << i;
  EXPECT_EQ(read_variable(p, scale), std::vector<float>{256.0f});
  EXPECT_EQ(read_variable(p, clean), std::vector<float>{0.0f});
  // And training goes on from there.
  const std::vector<float> after = net.train(p, 3);
  for (float l : after) EXPECT_TRUE(std::isfinite(l));
  EXPECT_NE(read_variable(p, watched[0]), before[0]);
  ctn_tensor_release(xbad);
  ctn_plan_release(p);
}

// f16 autocast with a scale so large that the 16-bit gradients overflow: the first steps are
// skipped (variables unchanged) and halve the scale until the gradients fit; then it trains.
TEST(LossScaling, F16RecoversFromAnOverflowingScale) {
  Cnn net(adam_scaled(std::ldexp(1.0, 40), 0));
  ctn_plan *p = compile(net.g, net.loss, CTN_PRECISION_F16);
  ASSERT_NE(p, nullptr);
  const ctn_node scale = model_var(net.m, "loss_scale");
  const std::vector<ctn_node> params = net.params();
  const std::vector<float> w0 = read_variable(p, params[0]);
  net.train(p, 1);
  EXPECT_EQ(read_variable(p, scale), std::vector<float>{static_cast<float>(std::ldexp(1.0, 39))});
  EXPECT_EQ(read_variable(p, params[0]), w0);  // skipped
  const std::vector<float> losses = net.train(p, 40);
  const float s = read_variable(p, scale)[0];
  EXPECT_LE(s, std::ldexp(1.0f, 30));  // f16's largest value is 65504: it had to come down
  EXPECT_GE(s, 1.0f);
  EXPECT_NE(read_variable(p, params[0]), w0);
  EXPECT_LT(losses.back(), losses.front());
  ctn_plan_release(p);
}

TEST(LossScaling, BadOptionsNameTheField) {
  for (double bad : {-1.0, static_cast<double>(INFINITY), static_cast<double>(NAN)}) {
    Ctx c;
    ctn_graph *g = nullptr;
    ctn_model *m = nullptr;
    ASSERT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
    ASSERT_EQ(ctn_model_create(g, CTN_F32, 1, &m), CTN_OK);
    const int64_t xs[2] = {2, 3};
    ctn_node x, y, loss;
    ASSERT_EQ(ctn_input(g, "x", CTN_F32, 2, xs, &x), CTN_OK);
    ASSERT_EQ(ctn_nn_linear(m, x, 3, 1, 1, &y), CTN_OK);
    ASSERT_EQ(ctn_sum(g, y, 0, nullptr, 0, &loss), CTN_OK);
    ctn_optimizer o = adam_scaled(bad, 0);
    EXPECT_EQ(ctn_nn_minimize(m, loss, &o, nullptr), CTN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ctn_last_error()).find("loss_scale"), std::string::npos) << ctn_last_error();
    o = adam_scaled(8, -3);
    EXPECT_EQ(ctn_nn_minimize(m, loss, &o, nullptr), CTN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ctn_last_error()).find("loss_scale_interval"), std::string::npos) << ctn_last_error();
    ctn_model_release(m);
    ctn_graph_release(g);
  }
}

}  // namespace
