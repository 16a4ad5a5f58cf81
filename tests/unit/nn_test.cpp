// The layer library (abi/chutney/nn.h): layer shapes and errors, initialisers, optimizers against
// hand-computed updates, learning-rate schedules, gradient clipping, the LSTM's gradient against
// finite differences, and small models that must learn on the CPU backend.
#include <chutney/nn.h>
#include <chutney/ops.h>

#include "test_helpers.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

namespace {

struct Fixture {
  Ctx c;
  ctn_graph *g = nullptr;
  ctn_model *m = nullptr;
  explicit Fixture(ctn_dtype dt = CTN_F32, uint64_t seed = 7) {
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK);
    EXPECT_EQ(ctn_model_create(g, dt, seed, &m), CTN_OK) << ctn_last_error();
  }
  ~Fixture() {
    ctn_model_release(m);
    ctn_graph_release(g);
  }
  ctn_node input(const char *name, ctn_dtype dt, std::vector<int64_t> shape) {
    ctn_node n = CTN_NODE_NONE;
    EXPECT_EQ(ctn_input(g, name, dt, static_cast<uint32_t>(shape.size()), shape.data(), &n), CTN_OK) << ctn_last_error();
    return n;
  }
  std::vector<int64_t> shape(ctn_node n) {
    uint32_t nd = 0;
    int64_t s[CTN_MAX_DIMS];
    EXPECT_EQ(ctn_node_info(g, n, nullptr, &nd, s), CTN_OK);
    return std::vector<int64_t>(s, s + nd);
  }
  std::vector<std::string> names(uint32_t kinds) {
    uint32_t n = 0;
    const char *const *nm = nullptr;
    EXPECT_EQ(ctn_model_variables(m, kinds, &n, &nm, nullptr), CTN_OK);
    return std::vector<std::string>(nm, nm + n);
  }
};

ctn_tensor *make_tensor(ctn_dtype dt, std::vector<int64_t> shape, const std::vector<double> &v) {
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_tensor_create(dt, static_cast<uint32_t>(shape.size()), shape.data(), nullptr, &t), CTN_OK);
  void *p = nullptr;
  EXPECT_EQ(ctn_tensor_data(t, &p), CTN_OK);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == CTN_F64) static_cast<double *>(p)[i] = v[i];
    else if (dt == CTN_F32) static_cast<float *>(p)[i] = static_cast<float>(v[i]);
    else if (dt == CTN_I32) static_cast<int32_t *>(p)[i] = static_cast<int32_t>(v[i]);
    else static_cast<int64_t *>(p)[i] = static_cast<int64_t>(v[i]);
  }
  return t;
}

std::vector<double> read(const ctn_tensor *t) {
  ctn_dtype dt;
  int64_t n = 0;
  ctn_tensor_dtype(t, &dt);
  ctn_tensor_numel(t, &n);
  std::vector<double> v(static_cast<size_t>(n));
  if (dt == CTN_F64) {
    EXPECT_EQ(ctn_tensor_read(t, v.data(), v.size() * 8), CTN_OK);
  } else if (dt == CTN_I32) {
    std::vector<int32_t> iv(v.size());
    EXPECT_EQ(ctn_tensor_read(t, iv.data(), iv.size() * 4), CTN_OK);
    for (size_t i = 0; i < iv.size(); ++i) v[i] = iv[i];
  } else {
    std::vector<float> f(v.size());
    EXPECT_EQ(ctn_tensor_read(t, f.data(), f.size() * 4), CTN_OK);
    for (size_t i = 0; i < f.size(); ++i) v[i] = f[i];
  }
  return v;
}

std::vector<double> read_var(ctn_plan *p, ctn_node var) {
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_plan_variable_read(p, var, &t), CTN_OK) << ctn_last_error();
  auto v = read(t);
  ctn_tensor_release(t);
  return v;
}

std::vector<double> randn(size_t n, uint64_t seed, double scale = 1.0) { return random_normal<double>(n, seed, scale); }

ctn_compile_options cpu_only() {
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = "cpu";
  return o;
}

// ---- layers: shapes, names, errors -------------------------------------------------------------

TEST(NnLayers, LinearShapesNamesAndErrors) {
  Fixture f;
  ctn_node x = f.input("x", CTN_F32, {4, 3}), y = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_nn_linear(f.m, x, 3, 5, 1, &y));
  EXPECT_EQ(f.shape(y), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER), (std::vector<std::string>{"linear1.weight", "linear1.bias"}));
  ctn_node bad = 12345;
  EXPECT_EQ(ctn_nn_linear(f.m, x, 4, 5, 1, &bad), CTN_ERR_SHAPE);
  EXPECT_NE(std::string(ctn_last_error()).find("ctn_nn_linear(linear2)"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(bad, 12345u);  // untouched on failure
  ctn_node xd = f.input("xd", CTN_F64, {4, 3});
  EXPECT_EQ(ctn_nn_linear(f.m, xd, 3, 5, 1, &bad), CTN_ERR_DTYPE);
  EXPECT_EQ(ctn_nn_linear(nullptr, x, 3, 5, 1, &bad), CTN_ERR_INVALID_ARGUMENT);
  // A named layer reuses a same-shaped variable and rejects another shape.
  ctn_node y2, y3;
  CTN_ASSERT_OK(ctn_model_name_next(f.m, "linear1"));
  CTN_ASSERT_OK(ctn_nn_linear(f.m, x, 3, 5, 1, &y2));
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER).size(), 2u);
  CTN_ASSERT_OK(ctn_model_name_next(f.m, "linear1"));
  EXPECT_EQ(ctn_nn_linear(f.m, x, 3, 6, 1, &y3), CTN_ERR_SHAPE);
}

TEST(NnLayers, SequentialCnnShapesAndVariableKinds) {
  Fixture f;
  ctn_node x = f.input("x", CTN_F32, {2, 1, 28, 28}), y = CTN_NODE_NONE;
  const ctn_layer cnn[] = {
      {CTN_LAYER_CONV2D, 8, 5, 1, 2, 0, 0, 0, nullptr}, {CTN_LAYER_BATCH_NORM, 0, 0, 0, 0, 0, 0, 0, nullptr},
      {CTN_LAYER_RELU, 0, 0, 0, 0, 0, 0, 0, nullptr},    {CTN_LAYER_MAX_POOL2D, 0, 2, 0, 0, 0, 0, 0, nullptr},
      {CTN_LAYER_CONV2D, 16, 5, 1, 2, 0, 0, 0, "c2"},    {CTN_LAYER_RELU, 0, 0, 0, 0, 0, 0, 0, nullptr},
      {CTN_LAYER_MAX_POOL2D, 0, 2, 0, 0, 0, 0, 0, nullptr}, {CTN_LAYER_FLATTEN, 0, 0, 0, 0, 0, 0, 0, nullptr},
      {CTN_LAYER_LINEAR, 32, 0, 0, 0, 0, 0, 0, nullptr}, {CTN_LAYER_DROPOUT, 0, 0, 0, 0, 0, 0.25, 0, nullptr},
      {CTN_LAYER_LINEAR, 10, 0, 0, 0, CTN_LAYER_NO_BIAS, 0, 0, nullptr}};
  CTN_ASSERT_OK(ctn_nn_sequential(f.m, x, sizeof cnn / sizeof cnn[0], cnn, &y));
  EXPECT_EQ(f.shape(y), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "batch_norm1.weight", "batch_norm1.bias",
                                      "c2.weight", "c2.bias", "linear1.weight", "linear1.bias", "linear2.weight"}));
  EXPECT_EQ(f.names(CTN_VAR_BUFFER), (std::vector<std::string>{"batch_norm1.running_mean", "batch_norm1.running_var"}));
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER | CTN_VAR_BUFFER).size(), 11u);
  // A bad layer is reported with its index.
  const ctn_layer bad[] = {{CTN_LAYER_CONV2D, 4, 3, 1, 1, 0, 0, 0, nullptr}};
  ctn_node flat;
  CTN_ASSERT_OK(ctn_nn_flatten(f.m, x, &flat));
  EXPECT_EQ(ctn_nn_sequential(f.m, flat, 1, bad, &y), CTN_ERR_SHAPE);
  EXPECT_NE(std::string(ctn_last_error()).find("layer 0"), std::string::npos) << ctn_last_error();
  const ctn_layer unknown[] = {{99, 0, 0, 0, 0, 0, 0, 0, nullptr}};
  EXPECT_EQ(ctn_nn_sequential(f.m, x, 1, unknown, &y), CTN_ERR_INVALID_ARGUMENT);
}

TEST(NnLayers, LstmAndEmbeddingShapes) {
  Fixture f;
  ctn_node x = f.input("x", CTN_F32, {5, 3, 4}), hs = CTN_NODE_NONE, hl = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_nn_lstm(f.m, x, 6, &hs, &hl));
  EXPECT_EQ(f.shape(hs), (std::vector<int64_t>{5, 3, 6}));
  EXPECT_EQ(f.shape(hl), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER), (std::vector<std::string>{"lstm1.weight_ih", "lstm1.weight_hh", "lstm1.bias"}));
  ctn_node x2 = f.input("x2", CTN_F32, {5, 4});
  EXPECT_EQ(ctn_nn_lstm(f.m, x2, 6, &hs, &hl), CTN_ERR_SHAPE);
  ctn_node ids = f.input("ids", CTN_I64, {2, 7}), e;
  CTN_ASSERT_OK(ctn_nn_embedding(f.m, ids, 11, 3, &e));
  EXPECT_EQ(f.shape(e), (std::vector<int64_t>{2, 7, 3}));
  ctn_node d;
  EXPECT_EQ(ctn_nn_dropout(f.m, e, 1.0, &d), CTN_ERR_INVALID_ARGUMENT);
  CTN_ASSERT_OK(ctn_model_set_training(f.m, 0));
  CTN_ASSERT_OK(ctn_nn_dropout(f.m, e, 0.5, &d));
  EXPECT_EQ(d, e);  // inference: identity
}

// ---- initialisers ------------------------------------------------------------------------------

TEST(NnInit, DeterministicAndScaled) {
  const int64_t n = 20000;
  ctn_tensor *a = make_tensor(CTN_F64, {n}, {}), *b = make_tensor(CTN_F64, {n}, {}), *c = make_tensor(CTN_F64, {n}, {});
  CTN_ASSERT_OK(ctn_nn_init_fill(a, CTN_INIT_KAIMING_UNIFORM, 50, 10, 0, 1));
  CTN_ASSERT_OK(ctn_nn_init_fill(b, CTN_INIT_KAIMING_UNIFORM, 50, 10, 0, 1));
  CTN_ASSERT_OK(ctn_nn_init_fill(c, CTN_INIT_KAIMING_UNIFORM, 50, 10, 0, 2));
  auto va = read(a), vb = read(b), vc = read(c);
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 50), mx = 0;
  for (double v : va) mx = std::max(mx, std::fabs(v));
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.99 * bound);
  auto moments = [](const std::vector<double> &v) {
    double s = 0, s2 = 0;
    for (double x : v) s += x;
    double mean = s / static_cast<double>(v.size());
    for (double x : v) s2 += (x - mean) * (x - mean);
    return std::make_pair(mean, std::sqrt(s2 / static_cast<double>(v.size())));
  };
  struct Case { ctn_init k; double want_std; };
  const Case cases[] = {{CTN_INIT_KAIMING_NORMAL, std::sqrt(2.0 / 50)},
                        {CTN_INIT_XAVIER_NORMAL, std::sqrt(2.0 / 60)},
                        {CTN_INIT_XAVIER_UNIFORM, std::sqrt(6.0 / 60) / std::sqrt(3.0)},
                        {CTN_INIT_NORMAL, 1.0}};
  for (const Case &k : cases) {
    CTN_ASSERT_OK(ctn_nn_init_fill(a, k.k, 50, 10, 0, 3));
    auto [mean, sd] = moments(read(a));
    EXPECT_NEAR(mean, 0, 4 * k.want_std / std::sqrt(double(n))) << k.k;
    EXPECT_NEAR(sd, k.want_std, 0.03 * k.want_std) << k.k;
  }
  CTN_ASSERT_OK(ctn_nn_init_fill(a, CTN_INIT_ONES, 0, 0, 0, 0));
  EXPECT_EQ(read(a)[123], 1.0);
  EXPECT_EQ(ctn_nn_init_fill(a, CTN_INIT_KAIMING_UNIFORM, 0, 1, 0, 0), CTN_ERR_INVALID_ARGUMENT);
  ctn_tensor_release(a);
  ctn_tensor_release(b);
  ctn_tensor_release(c);
}

TEST(NnInit, SameSeedAndNameGiveSameValuesInAnyOrder) {
  Fixture f1(CTN_F32, 99), f2(CTN_F32, 99);
  const int64_t s1[2] = {4, 3}, s2[1] = {5};
  ctn_node a1, b1, a2, b2;
  CTN_ASSERT_OK(ctn_model_variable(f1.m, "a", CTN_VAR_PARAMETER, 2, s1, CTN_INIT_XAVIER_UNIFORM, 3, 4, 0, &a1));
  CTN_ASSERT_OK(ctn_model_variable(f1.m, "b", CTN_VAR_PARAMETER, 1, s2, CTN_INIT_NORMAL, 0, 0, 0.5, &b1));
  CTN_ASSERT_OK(ctn_model_variable(f2.m, "b", CTN_VAR_PARAMETER, 1, s2, CTN_INIT_NORMAL, 0, 0, 0.5, &b2));
  CTN_ASSERT_OK(ctn_model_variable(f2.m, "a", CTN_VAR_PARAMETER, 2, s1, CTN_INIT_XAVIER_UNIFORM, 3, 4, 0, &a2));
  auto v1 = run_once(f1.g, {a1, b1}), v2 = run_once(f2.g, {a2, b2});
  ASSERT_EQ(v1.size(), 2u);
  ASSERT_EQ(v2.size(), 2u);
  EXPECT_EQ(v1[0], v2[0]);
  EXPECT_EQ(v1[1], v2[1]);
  EXPECT_NE(v1[0][0], 0.0f);
}

// ---- optimizers against hand-computed updates --------------------------------------------------

// An optimizer of `kind` (CTN_OPTIM_*) at learning rate `lr`; every other field 0 (its default).
ctn_optimizer optimizer(int32_t kind, double lr) {
  ctn_optimizer o{};
  o.struct_size = sizeof o;
  o.kind = kind;
  o.lr = lr;
  return o;
}

struct OptCase {
  const char *label;
  ctn_optimizer opt;
};

// loss = 0.5 * sum(x * w * w) so that g = x * w, with x fed per step; lr follows a schedule.
void check_optimizer(const OptCase &oc) {
  SCOPED_TRACE(oc.label);
  Fixture f(CTN_F64);
  const std::vector<double> w0 = {0.5, -1.25, 2.0};
  const int64_t shape[1] = {3};
  ctn_node w, x = f.input("x", CTN_F64, {3}), xw, xww, half, s, loss;
  CTN_ASSERT_OK(ctn_model_variable(f.m, "w", CTN_VAR_PARAMETER, 1, shape, CTN_INIT_ZEROS, 0, 0, 0, &w));
  CTN_ASSERT_OK(ctn_mul(f.g, x, w, &xw));
  CTN_ASSERT_OK(ctn_mul(f.g, xw, w, &xww));
  CTN_ASSERT_OK(ctn_sum(f.g, xww, 0, nullptr, 0, &s));
  CTN_ASSERT_OK(ctn_scalar(f.g, CTN_F64, 0.5, &half));
  CTN_ASSERT_OK(ctn_mul(f.g, s, half, &loss));
  CTN_ASSERT_OK(ctn_nn_minimize(f.m, loss, &oc.opt, nullptr));
  ctn_compile_options co = cpu_only();
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(f.g, 1, &loss, &co, &p));
  ctn_tensor *wt = make_tensor(CTN_F64, {3}, w0);
  CTN_ASSERT_OK(ctn_plan_variable_write(p, w, wt));
  ctn_tensor_release(wt);
  const char *apply = oc.opt.kind == CTN_OPTIM_SGD ? CTN_OP_SGD_APPLY : CTN_OP_ADAM_APPLY;
  uint32_t steps_on_cpu = 0;
  CTN_ASSERT_OK(ctn_plan_backend_steps(p, "cpu", apply, &steps_on_cpu));
  EXPECT_EQ(steps_on_cpu, 1u);

  const ctn_optimizer &o = oc.opt;
  double b1 = o.beta1 ? o.beta1 : 0.9, b2 = o.beta2 ? o.beta2 : 0.999, eps = o.eps ? o.eps : 1e-8;
  std::vector<double> ref = w0, v(3, 0.0), m1(3, 0.0), m2(3, 0.0);
  for (int step = 1; step <= 5; ++step) {
    const std::vector<double> xv = {1.0 + 0.1 * step, -0.5 * step, 0.25};
    const double lr = o.lr / step;
    ctn_tensor *xt = make_tensor(CTN_F64, {3}, xv);
    CTN_ASSERT_OK(ctn_model_set_step(f.m, step));
    CTN_ASSERT_OK(ctn_model_set_lr(f.m, lr));
    const ctn_tensor *feeds[1] = {xt};
    CTN_ASSERT_OK(ctn_model_run(f.m, p, 1, &x, feeds, 0, nullptr));
    ctn_tensor_release(xt);
    for (int i = 0; i < 3; ++i) {
      double g = xv[i] * ref[i];
      if (o.kind == CTN_OPTIM_SGD) {
        double d = g + o.weight_decay * ref[i];
        v[i] = o.momentum * v[i] + d;
        ref[i] -= lr * (o.nesterov ? d + o.momentum * v[i] : v[i]);
      } else {
        if (o.kind == CTN_OPTIM_ADAM) g += o.weight_decay * ref[i];
        m1[i] = b1 * m1[i] + (1 - b1) * g;
        m2[i] = b2 * m2[i] + (1 - b2) * g * g;
        double mh = m1[i] / (1 - std::pow(b1, step)), vh = m2[i] / (1 - std::pow(b2, step));
        ref[i] -= lr * (mh / (std::sqrt(vh) + eps) + (o.kind == CTN_OPTIM_ADAMW ? o.weight_decay * ref[i] : 0.0));
      }
    }
    auto got = read_var(p, w);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], ref[i], 1e-12 * (1 + std::fabs(ref[i]))) << "step " << step << " i " << i;
  }
  ctn_plan_release(p);
}

// ctn_model_adopt_variable (1.5): a graph variable made outside the model (as ctn_onnx_load makes
// them) is trained by ctn_nn_minimize from its own value, and listed under its name.
TEST(NnAdopt, AdoptedVariableIsTrainedFromItsValue) {
  Fixture f(CTN_F64);
  ctn_tensor *w0 = make_tensor(CTN_F64, {2}, {3.0, -2.0});
  ctn_node w, x = f.input("x", CTN_F64, {2}), xw, loss;
  CTN_ASSERT_OK(ctn_variable(f.g, "imported.w", w0, &w));
  ctn_tensor_release(w0);
  CTN_ASSERT_OK(ctn_model_adopt_variable(f.m, w, CTN_VAR_PARAMETER, nullptr));
  CTN_ASSERT_OK(ctn_model_adopt_variable(f.m, w, CTN_VAR_PARAMETER, "imported.w"));  // again: a no-op
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER), std::vector<std::string>{"imported.w"});
  // Errors name what is wrong and change nothing.
  EXPECT_EQ(ctn_model_adopt_variable(f.m, x, CTN_VAR_PARAMETER, "x"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("not a variable"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_model_adopt_variable(f.m, 9999, CTN_VAR_PARAMETER, "n"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_model_adopt_variable(f.m, w, CTN_VAR_PARAMETER, "other"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_model_adopt_variable(f.m, w, 3u, "imported.w"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_model_adopt_variable(nullptr, w, CTN_VAR_PARAMETER, nullptr), CTN_ERR_INVALID_ARGUMENT);
  ctn_tensor *v32 = make_tensor(CTN_F32, {1}, {1.0});
  ctn_node w32;
  CTN_ASSERT_OK(ctn_variable(f.g, "f32", v32, &w32));
  ctn_tensor_release(v32);
  EXPECT_EQ(ctn_model_adopt_variable(f.m, w32, CTN_VAR_PARAMETER, nullptr), CTN_ERR_DTYPE);
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER | CTN_VAR_BUFFER | CTN_VAR_OPTIMIZER), std::vector<std::string>{"imported.w"});
  // loss = sum(x * w); SGD without momentum: w -= lr * x each step.
  CTN_ASSERT_OK(ctn_mul(f.g, x, w, &xw));
  CTN_ASSERT_OK(ctn_sum(f.g, xw, 0, nullptr, 0, &loss));
  ctn_optimizer o = optimizer(CTN_OPTIM_SGD, 0.5);
  CTN_ASSERT_OK(ctn_nn_minimize(f.m, loss, &o, nullptr));
  ctn_compile_options co = cpu_only();
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(f.g, 1, &loss, &co, &p));
  ctn_tensor *xt = make_tensor(CTN_F64, {2}, {1.0, 4.0});
  const ctn_tensor *feeds[1] = {xt};
  CTN_ASSERT_OK(ctn_model_run(f.m, p, 1, &x, feeds, 0, nullptr));
  ctn_tensor_release(xt);
  EXPECT_EQ(read_var(p, w), (std::vector<double>{3.0 - 0.5 * 1.0, -2.0 - 0.5 * 4.0}));
  ctn_plan_release(p);
}

TEST(NnOptim, MatchesHandComputedUpdates) {
  std::vector<OptCase> cases;
  cases.push_back({"sgd", optimizer(CTN_OPTIM_SGD, 0.1)});
  cases.push_back({"sgd wd", optimizer(CTN_OPTIM_SGD, 0.1)});
  cases.back().opt.weight_decay = 0.05;
  cases.push_back({"sgd momentum", optimizer(CTN_OPTIM_SGD, 0.1)});
  cases.back().opt.momentum = 0.9;
  cases.push_back({"sgd nesterov wd", optimizer(CTN_OPTIM_SGD, 0.1)});
  cases.back().opt.momentum = 0.8;
  cases.back().opt.nesterov = 1;
  cases.back().opt.weight_decay = 0.01;
  cases.push_back({"adam", optimizer(CTN_OPTIM_ADAM, 0.05)});
  cases.push_back({"adam l2", optimizer(CTN_OPTIM_ADAM, 0.05)});
  cases.back().opt.weight_decay = 0.1;
  cases.back().opt.beta1 = 0.8;
  cases.back().opt.eps = 1e-3;
  cases.push_back({"adamw", optimizer(CTN_OPTIM_ADAMW, 0.05)});
  cases.back().opt.weight_decay = 0.1;
  cases.back().opt.beta2 = 0.99;
  for (const auto &c : cases) check_optimizer(c);
}

TEST(NnOptim, StateVariablesAndErrors) {
  Fixture f;
  ctn_node x = f.input("x", CTN_F32, {2, 3}), y, loss;
  CTN_ASSERT_OK(ctn_nn_linear(f.m, x, 3, 2, 1, &y));
  CTN_ASSERT_OK(ctn_sum(f.g, y, 0, nullptr, 0, &loss));
  ctn_optimizer o = optimizer(CTN_OPTIM_ADAMW, 0);
  o.beta1 = 1.0;
  EXPECT_EQ(ctn_nn_minimize(f.m, loss, &o, nullptr), CTN_ERR_INVALID_ARGUMENT);
  o.beta1 = 0;
  ctn_node norm = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_nn_minimize(f.m, loss, &o, &norm));
  EXPECT_NE(norm, CTN_NODE_NONE);
  EXPECT_EQ(f.names(CTN_VAR_OPTIMIZER),
            (std::vector<std::string>{"linear1.weight.adam_m", "linear1.weight.adam_v", "linear1.bias.adam_m",
                                      "linear1.bias.adam_v"}));
  EXPECT_EQ(ctn_nn_minimize(f.m, loss, &o, nullptr), CTN_ERR_STATE);  // one optimizer per graph
  EXPECT_EQ(f.names(CTN_VAR_PARAMETER | CTN_VAR_BUFFER | CTN_VAR_OPTIMIZER).size(), 6u);

  // The ops validate their operands.
  ctn_node w, v, gr, lr, lr_bad, step_bad, out = 777;
  const int64_t s3[1] = {3};
  CTN_ASSERT_OK(ctn_input(f.g, "w3", CTN_F32, 1, s3, &w));
  CTN_ASSERT_OK(ctn_input(f.g, "v3", CTN_F32, 1, s3, &v));
  CTN_ASSERT_OK(ctn_input(f.g, "g3", CTN_F32, 1, s3, &gr));
  CTN_ASSERT_OK(ctn_scalar(f.g, CTN_F32, 0.1, &lr));
  CTN_ASSERT_OK(ctn_input(f.g, "lr3", CTN_F32, 1, s3, &lr_bad));
  CTN_ASSERT_OK(ctn_scalar(f.g, CTN_F32, 1, &step_bad));
  ctn_attrs a{};
  a.f[0] = 0.9;
  a.nf = 2;
  ctn_node in4[4] = {w, v, gr, lr_bad};
  EXPECT_EQ(ctn_op(f.g, CTN_OP_SGD_APPLY, 4, in4, &a, &out), CTN_ERR_SHAPE);
  EXPECT_NE(std::string(ctn_last_error()).find("lr"), std::string::npos) << ctn_last_error();
  a.f[0] = 0;
  a.i[0] = 1;
  in4[3] = lr;
  EXPECT_EQ(ctn_op(f.g, CTN_OP_SGD_APPLY, 4, in4, &a, &out), CTN_ERR_INVALID_ARGUMENT);  // Nesterov, momentum 0
  ctn_attrs aa{};
  aa.f[0] = 0.9;
  aa.f[1] = 0.999;
  ctn_node in5[5] = {w, v, gr, lr, step_bad};
  EXPECT_EQ(ctn_op(f.g, CTN_OP_ADAM_APPLY, 5, in5, &aa, &out), CTN_ERR_DTYPE);
  ctn_node xd;
  const int64_t s4[1] = {4};
  CTN_ASSERT_OK(ctn_input(f.g, "g4", CTN_F32, 1, s4, &xd));
  ctn_node in2[2] = {v, xd};
  EXPECT_EQ(ctn_op(f.g, CTN_OP_ADAM_MOMENT1, 2, in2, &aa, &out), CTN_ERR_SHAPE);
  EXPECT_EQ(out, 777u);
}

// ---- schedules ----------------------------------------------------------------------------------

double lr_at(const ctn_lr_schedule &s, int64_t step) {
  double lr = -1;
  EXPECT_EQ(ctn_nn_lr_at(&s, step, &lr), CTN_OK) << ctn_last_error();
  return lr;
}

TEST(NnSchedule, StepCosineLinearWarmup) {
  ctn_lr_schedule s{};
  s.kind = CTN_LR_CONSTANT;
  s.base_lr = 0.1;
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 1000), 0.1);
  s.kind = CTN_LR_STEP;
  s.step_size = 2;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.05);
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.025);
  s.kind = CTN_LR_COSINE;
  s.warmup_steps = 4;
  s.total_steps = 14;  // decay over T = 10 steps after warm-up
  s.min_lr = 0.01;
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.025);
  EXPECT_DOUBLE_EQ(lr_at(s, 4), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.1);                      // e = 0
  EXPECT_NEAR(lr_at(s, 10), 0.01 + 0.09 * 0.5, 1e-15);     // e = 5 = T/2
  EXPECT_NEAR(lr_at(s, 15), 0.01, 1e-15);                  // e = T
  EXPECT_NEAR(lr_at(s, 100), 0.01, 1e-15);                 // clamped
  EXPECT_GT(lr_at(s, 7), lr_at(s, 8));
  s.kind = CTN_LR_LINEAR;
  EXPECT_NEAR(lr_at(s, 10), 0.1 + (0.01 - 0.1) * 0.5, 1e-15);
  double out = 42;
  EXPECT_EQ(ctn_nn_lr_at(&s, 0, &out), CTN_ERR_INVALID_ARGUMENT);
  s.total_steps = 3;
  EXPECT_EQ(ctn_nn_lr_at(&s, 10, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, 42);
}

// ---- clipping -----------------------------------------------------------------------------------

TEST(NnClip, NormAndScaledGradients) {
  Fixture f(CTN_F64);
  const std::vector<double> a = {3.0, -4.0}, b = {12.0, 0.0, 0.0};  // global norm 13
  ctn_tensor *ta = make_tensor(CTN_F64, {2}, a), *tb = make_tensor(CTN_F64, {3}, b);
  ctn_node ga, gb;
  CTN_ASSERT_OK(ctn_variable(f.g, "ga", ta, &ga));  // variables: nothing folds away
  CTN_ASSERT_OK(ctn_variable(f.g, "gb", tb, &gb));
  ctn_tensor_release(ta);
  ctn_tensor_release(tb);
  for (double max_norm : {6.5, 100.0}) {
    SCOPED_TRACE(max_norm);
    ctn_node in[2] = {ga, gb}, clipped[2], norm;
    CTN_ASSERT_OK(ctn_nn_clip_grad_norm(f.m, 2, in, max_norm, clipped, &norm));
    ctn_plan *p = nullptr;
    ctn_node outs[3] = {norm, clipped[0], clipped[1]};
    CTN_ASSERT_OK(ctn_plan_compile(f.g, 3, outs, nullptr, &p));
    std::vector<ctn_tensor *> t(3);
    for (uint32_t i = 0; i < 3; ++i) CTN_ASSERT_OK(ctn_plan_output_create(p, i, &t[i]));
    CTN_ASSERT_OK(ctn_plan_run(p, 0, nullptr, nullptr, 3, t.data()));
    EXPECT_DOUBLE_EQ(read(t[0])[0], 13.0);
    double scale = std::min(1.0, max_norm / (13.0 + 1e-6));
    auto ca = read(t[1]), cb = read(t[2]);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_DOUBLE_EQ(ca[i], a[i] * scale);
    for (size_t i = 0; i < b.size(); ++i) EXPECT_DOUBLE_EQ(cb[i], b[i] * scale);
    if (max_norm > 13) {
      EXPECT_EQ(ca, a);  // unchanged, bit for bit
    }
    for (auto *x : t) ctn_tensor_release(x);
    ctn_plan_release(p);
  }
  ctn_node in[1] = {ga}, out[1];
  EXPECT_EQ(ctn_nn_clip_grad_norm(f.m, 1, in, 0.0, out, nullptr), CTN_ERR_INVALID_ARGUMENT);
}

// ---- LSTM gradient against finite differences ------------------------------------------------

TEST(NnLstm, GradientMatchesFiniteDifferences) {
  Fixture f(CTN_F64, 3);
  const int64_t T = 3, N = 2, I = 2, H = 3;
  ctn_tensor *xt = make_tensor(CTN_F64, {T, N, I}, randn(T * N * I, 1));
  ctn_tensor *rt = make_tensor(CTN_F64, {T, N, H}, randn(T * N * H, 2));
  ctn_tensor *r2 = make_tensor(CTN_F64, {N, H}, randn(N * H, 3));
  ctn_node x, r, rl, hs, hl, p1, p2, s1, s2, loss;
  CTN_ASSERT_OK(ctn_constant(f.g, xt, &x));
  CTN_ASSERT_OK(ctn_constant(f.g, rt, &r));
  CTN_ASSERT_OK(ctn_constant(f.g, r2, &rl));
  for (auto *t : {xt, rt, r2}) ctn_tensor_release(t);
  CTN_ASSERT_OK(ctn_nn_lstm(f.m, x, H, &hs, &hl));
  CTN_ASSERT_OK(ctn_mul(f.g, hs, r, &p1));
  CTN_ASSERT_OK(ctn_mul(f.g, hl, rl, &p2));
  CTN_ASSERT_OK(ctn_sum(f.g, p1, 0, nullptr, 0, &s1));
  CTN_ASSERT_OK(ctn_sum(f.g, p2, 0, nullptr, 0, &s2));
  CTN_ASSERT_OK(ctn_add(f.g, s1, s2, &loss));
  uint32_t np = 0;
  const ctn_node *params = nullptr;
  CTN_ASSERT_OK(ctn_model_variables(f.m, CTN_VAR_PARAMETER, &np, nullptr, &params));
  ASSERT_EQ(np, 3u);
  std::vector<ctn_node> wrt(params, params + np), grads(np);
  CTN_ASSERT_OK(ctn_grad(f.g, loss, np, wrt.data(), grads.data()));
  std::vector<ctn_node> outs = {loss};
  outs.insert(outs.end(), grads.begin(), grads.end());
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(f.g, static_cast<uint32_t>(outs.size()), outs.data(), nullptr, &p));
  std::vector<ctn_tensor *> ot(outs.size());
  for (uint32_t i = 0; i < ot.size(); ++i) CTN_ASSERT_OK(ctn_plan_output_create(p, i, &ot[i]));
  auto run_loss = [&]() {
    EXPECT_EQ(ctn_plan_run(p, 0, nullptr, nullptr, static_cast<uint32_t>(ot.size()), ot.data()), CTN_OK) << ctn_last_error();
    return read(ot[0])[0];
  };
  run_loss();
  std::vector<std::vector<double>> analytic;
  for (uint32_t k = 0; k < np; ++k) analytic.push_back(read(ot[k + 1]));
  const double h = 1e-6;
  double worst = 0;
  for (uint32_t k = 0; k < np; ++k) {
    std::vector<double> base = read_var(p, wrt[k]);
    ctn_dtype dt;
    uint32_t nd = 0;
    int64_t shape[CTN_MAX_DIMS];
    CTN_ASSERT_OK(ctn_node_info(f.g, wrt[k], &dt, &nd, shape));
    std::vector<int64_t> sv(shape, shape + nd);
    for (size_t i = 0; i < base.size(); ++i) {
      double fx[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<double> v = base;
        v[i] += side ? -h : h;
        ctn_tensor *t = make_tensor(CTN_F64, sv, v);
        CTN_ASSERT_OK(ctn_plan_variable_write(p, wrt[k], t));
        ctn_tensor_release(t);
        fx[side] = run_loss();
      }
      double num = (fx[0] - fx[1]) / (2 * h);
      double err = std::fabs(num - analytic[k][i]) / std::max(1.0, std::fabs(num));
      worst = std::max(worst, err);
      EXPECT_LT(err, 1e-6) << "param " << k << " element " << i << ": numeric " << num << " analytic " << analytic[k][i];
    }
    ctn_tensor *t = make_tensor(CTN_F64, sv, base);
    CTN_ASSERT_OK(ctn_plan_variable_write(p, wrt[k], t));
    ctn_tensor_release(t);
  }
  for (auto *t : ot) ctn_tensor_release(t);
  ctn_plan_release(p);
}

// ---- small models learn on the CPU backend --------------------------------------------------

// Runs `steps` training steps on a fixed batch; returns the loss of each step.
std::vector<double> train(Fixture &f, ctn_node loss, const std::vector<ctn_node> &feed_nodes,
                          const std::vector<const ctn_tensor *> &feeds, int steps, ctn_plan **keep = nullptr,
                          const ctn_lr_schedule *sched = nullptr, uint32_t disable = 0) {
  std::vector<double> losses;
  ctn_compile_options co = cpu_only();
  co.disable = disable;
  ctn_plan *p = nullptr;
  ctn_status s = ctn_plan_compile(f.g, 1, &loss, &co, &p);
  EXPECT_EQ(s, CTN_OK) << ctn_last_error();
  if (s != CTN_OK) return losses;
  uint32_t cpu_steps = 0, all_steps = 0;
  EXPECT_EQ(ctn_plan_backend_steps(p, "cpu", nullptr, &cpu_steps), CTN_OK);
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(ctn_plan_stats_get(p, &st), CTN_OK);
  all_steps = st.n_steps;
  EXPECT_EQ(cpu_steps, all_steps);  // everything ran on the CPU backend
  ctn_tensor *out = nullptr;
  EXPECT_EQ(ctn_plan_output_create(p, 0, &out), CTN_OK);
  for (int step = 1; step <= steps; ++step) {
    EXPECT_EQ(ctn_model_set_step(f.m, step), CTN_OK);
    if (sched) {
      double lr = 0;
      EXPECT_EQ(ctn_nn_lr_at(sched, step, &lr), CTN_OK);
      EXPECT_EQ(ctn_model_set_lr(f.m, lr), CTN_OK);
    }
    EXPECT_EQ(ctn_model_run(f.m, p, static_cast<uint32_t>(feeds.size()), feed_nodes.data(), feeds.data(), 1, &out), CTN_OK)
        << ctn_last_error();
    losses.push_back(read(out)[0]);
  }
  ctn_tensor_release(out);
  if (keep) *keep = p;
  else ctn_plan_release(p);
  return losses;
}

std::vector<double> labels_of(int n, int classes, uint64_t seed) {
  std::mt19937_64 r(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v) x = static_cast<double>(r() % static_cast<uint64_t>(classes));
  return v;
}

TEST(NnTrain, MlpOverfitsSmallBatch) {
  Fixture f(CTN_F32, 11);
  const int64_t B = 16, D = 8;
  ctn_node x = f.input("x", CTN_F32, {B, D}), y = f.input("y", CTN_I32, {B}), logits, loss;
  const ctn_layer mlp[] = {CTN_NN_LINEAR(32), CTN_NN_RELU(), CTN_NN_LINEAR(4)};  // the C99 macros
  CTN_ASSERT_OK(ctn_nn_sequential(f.m, x, 3, mlp, &logits));
  CTN_ASSERT_OK(ctn_cross_entropy(f.g, logits, y, &loss));
  ctn_optimizer o = optimizer(CTN_OPTIM_ADAM, 0.02);
  CTN_ASSERT_OK(ctn_nn_minimize(f.m, loss, &o, nullptr));
  ctn_tensor *xt = make_tensor(CTN_F32, {B, D}, randn(B * D, 5)), *yt = make_tensor(CTN_I32, {B}, labels_of(B, 4, 6));
  auto losses = train(f, loss, {x, y}, {xt, yt}, 150);
  ASSERT_EQ(losses.size(), 150u);
  EXPECT_LT(losses.back() * 10, losses.front()) << "first " << losses.front() << " last " << losses.back();
  ctn_tensor_release(xt);
  ctn_tensor_release(yt);
}

// conv + batch norm + pool + dropout, SGD with Nesterov momentum and a cosine schedule; then the
// trained state is copied into an inference model, whose predictions must fit the batch.
TEST(NnTrain, CnnOverfitsSmallBatchAndEvalModelAgrees) {
  const int64_t B = 8;
  const ctn_layer cnn[] = {
      {CTN_LAYER_CONV2D, 4, 3, 1, 1, 0, 0, 0, nullptr},  {CTN_LAYER_BATCH_NORM, 0, 0, 0, 0, 0, 0, 0, nullptr},
      {CTN_LAYER_RELU, 0, 0, 0, 0, 0, 0, 0, nullptr},     {CTN_LAYER_MAX_POOL2D, 0, 2, 0, 0, 0, 0, 0, nullptr},
      {CTN_LAYER_FLATTEN, 0, 0, 0, 0, 0, 0, 0, nullptr}, {CTN_LAYER_DROPOUT, 0, 0, 0, 0, 0, 0.1, 0, nullptr},
      {CTN_LAYER_LINEAR, 4, 0, 0, 0, 0, 0, 0, nullptr}};
  const uint32_t nl = sizeof cnn / sizeof cnn[0];
  Fixture f(CTN_F32, 21);
  ctn_node x = f.input("x", CTN_F32, {B, 1, 8, 8}), y = f.input("y", CTN_I32, {B}), logits, loss;
  ctn_status s = ctn_nn_sequential(f.m, x, nl, cnn, &logits);
  if (s == CTN_ERR_INVALID_ARGUMENT && std::string(ctn_last_error()).find("unknown op") != std::string::npos)
    GTEST_SKIP() << "nn ops not built yet: " << ctn_last_error();
  CTN_ASSERT_OK(s);
  CTN_ASSERT_OK(ctn_cross_entropy(f.g, logits, y, &loss));
  ctn_optimizer o = optimizer(CTN_OPTIM_SGD, 0.1);
  o.momentum = 0.9;
  o.nesterov = 1;
  CTN_ASSERT_OK(ctn_nn_minimize(f.m, loss, &o, nullptr));
  ctn_tensor *xt = make_tensor(CTN_F32, {B, 1, 8, 8}, randn(B * 64, 8)), *yt = make_tensor(CTN_I32, {B}, labels_of(B, 4, 9));
  ctn_lr_schedule sched{};
  sched.kind = CTN_LR_COSINE;
  sched.base_lr = 0.1;
  sched.warmup_steps = 5;
  sched.total_steps = 120;
  sched.min_lr = 0.01;
  ctn_plan *p = nullptr;
  auto losses = train(f, loss, {x, y}, {xt, yt}, 120, &p, &sched);
  ASSERT_EQ(losses.size(), 120u);
  ASSERT_NE(p, nullptr);
  EXPECT_LT(losses.back() * 10, losses.front()) << "first " << losses.front() << " last " << losses.back();

  // Inference twin: same seed and layers, training 0; the trained state copied over.
  Fixture e(CTN_F32, 21);
  CTN_ASSERT_OK(ctn_model_set_training(e.m, 0));
  ctn_node ex = e.input("x", CTN_F32, {B, 1, 8, 8}), elog;
  CTN_ASSERT_OK(ctn_nn_sequential(e.m, ex, nl, cnn, &elog));
  ctn_plan *ep = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(e.g, 1, &elog, nullptr, &ep));
  uint32_t copied = 0;
  CTN_ASSERT_OK(ctn_model_copy_state(f.m, p, e.m, ep, &copied));
  EXPECT_EQ(copied, 8u);  // conv w/b, bn w/b + running mean/var, linear w/b
  ctn_tensor *out = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(ep, 0, &out));
  const ctn_tensor *feeds[1] = {xt};
  CTN_ASSERT_OK(ctn_plan_run(ep, 1, &ex, feeds, 1, &out));
  auto lg = read(out), lab = read(yt);
  int correct = 0;
  for (int64_t i = 0; i < B; ++i) {
    int best = 0;
    for (int k = 1; k < 4; ++k)
      if (lg[static_cast<size_t>(i * 4 + k)] > lg[static_cast<size_t>(i * 4 + best)]) best = k;
    correct += best == static_cast<int>(lab[static_cast<size_t>(i)]);
  }
  EXPECT_GE(correct, 7) << "the inference model disagrees with the trained one";
  ctn_tensor_release(out);
  ctn_plan_release(ep);
  ctn_plan_release(p);
  ctn_tensor_release(xt);
  ctn_tensor_release(yt);
}

// Batch norm's running statistics as they were built before batch_norm_stats (1.6): mean(x),
// x - mean, (x - mean)^2 and mean(...) as graph ops, the same momentum updates, the same names.
ctn_node bn_four_passes(Fixture &f, ctn_node x, int64_t C, double momentum, double eps) {
  const int64_t c1[1] = {C}, kshape[4] = {1, C, 1, 1};
  const int32_t axes[3] = {0, 2, 3};
  auto s = f.shape(x);
  const double count = static_cast<double>(s[0] * s[2] * s[3]);
  ctn_node gamma, beta, rm, rv, y, mean, mk, d, d2, var, t1, t2, k1, k2, nrm, nrv, done;
  EXPECT_EQ(ctn_model_variable(f.m, "batch_norm1.weight", CTN_VAR_PARAMETER, 1, c1, CTN_INIT_ONES, 0, 0, 0, &gamma), CTN_OK);
  EXPECT_EQ(ctn_model_variable(f.m, "batch_norm1.bias", CTN_VAR_PARAMETER, 1, c1, CTN_INIT_ZEROS, 0, 0, 0, &beta), CTN_OK);
  EXPECT_EQ(ctn_model_variable(f.m, "batch_norm1.running_mean", CTN_VAR_BUFFER, 1, c1, CTN_INIT_ZEROS, 0, 0, 0, &rm), CTN_OK);
  EXPECT_EQ(ctn_model_variable(f.m, "batch_norm1.running_var", CTN_VAR_BUFFER, 1, c1, CTN_INIT_ONES, 0, 0, 0, &rv), CTN_OK);
  EXPECT_EQ(ctn_batch_norm(f.g, x, gamma, beta, eps, &y), CTN_OK);
  EXPECT_EQ(ctn_mean(f.g, x, 3, axes, 0, &mean), CTN_OK);
  EXPECT_EQ(ctn_reshape(f.g, mean, 4, kshape, &mk), CTN_OK);
  EXPECT_EQ(ctn_sub(f.g, x, mk, &d), CTN_OK);
  EXPECT_EQ(ctn_mul(f.g, d, d, &d2), CTN_OK);
  EXPECT_EQ(ctn_mean(f.g, d2, 3, axes, 0, &var), CTN_OK);
  auto blend = [&](ctn_node run, ctn_node batch, double w, ctn_node *out) {
    EXPECT_EQ(ctn_scalar(f.g, CTN_F32, 1 - momentum, &k1), CTN_OK);
    EXPECT_EQ(ctn_scalar(f.g, CTN_F32, w, &k2), CTN_OK);
    EXPECT_EQ(ctn_mul(f.g, run, k1, &t1), CTN_OK);
    EXPECT_EQ(ctn_mul(f.g, batch, k2, &t2), CTN_OK);
    EXPECT_EQ(ctn_add(f.g, t1, t2, out), CTN_OK);
  };
  blend(rm, mean, momentum, &nrm);
  blend(rv, var, momentum * count / (count - 1), &nrv);
  EXPECT_EQ(ctn_assign(f.g, rm, nrm, &done), CTN_OK);
  EXPECT_EQ(ctn_assign(f.g, rv, nrv, &done), CTN_OK);
  return y;
}

// ctn_nn_batch_norm takes its running statistics from batch_norm_stats (one sweep over x) since
// 1.6. The same CNN built with the old four-pass statistics must train to the same losses and
// running statistics (within f32 rounding), with fewer plan steps; batch_norm -> relu is one
// batch_norm_relu step unless the fusion pass is disabled.
TEST(NnTrain, BatchNormStatsMatchTheFourPassStatistics) {
  const int64_t B = 8, C = 4;
  struct Run {
    std::vector<double> losses, rm, rv;
    uint32_t steps = 0;
    std::vector<uint32_t> op_steps;  // steps of mean, sub, batch_norm_stats, relu, batch_norm_relu
  };
  auto run = [&](bool four_pass, uint32_t disable) {
    Run r;
    Fixture f(CTN_F32, 31);
    ctn_node x = f.input("x", CTN_F32, {B, 2, 6, 6}), y = f.input("y", CTN_I32, {B}), h, logits, loss;
    EXPECT_EQ(ctn_nn_conv2d(f.m, x, 2, C, 3, 1, 1, &h), CTN_OK) << ctn_last_error();
    if (four_pass) h = bn_four_passes(f, h, C, 0.1, 1e-5);
    else EXPECT_EQ(ctn_nn_batch_norm(f.m, h, C, 0.1, 1e-5, &h), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_relu(f.g, h, &h), CTN_OK);
    EXPECT_EQ(ctn_nn_flatten(f.m, h, &h), CTN_OK);
    EXPECT_EQ(ctn_nn_linear(f.m, h, C * 36, 3, 1, &logits), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_cross_entropy(f.g, logits, y, &loss), CTN_OK);
    ctn_optimizer o = optimizer(CTN_OPTIM_SGD, 0.05);
    EXPECT_EQ(ctn_nn_minimize(f.m, loss, &o, nullptr), CTN_OK) << ctn_last_error();
    // Input far from zero (mean ~3): the one-sweep variance must not cancel.
    auto xv = randn(static_cast<size_t>(B * 72), 41);
    for (double &v : xv) v += 3;
    ctn_tensor *xt = make_tensor(CTN_F32, {B, 2, 6, 6}, xv), *yt = make_tensor(CTN_I32, {B}, labels_of(B, 3, 42));
    ctn_plan *p = nullptr;
    r.losses = train(f, loss, {x, y}, {xt, yt}, 5, &p, nullptr, disable);
    if (p == nullptr) return r;
    ctn_plan_stats st{};
    st.struct_size = sizeof st;
    EXPECT_EQ(ctn_plan_stats_get(p, &st), CTN_OK);
    r.steps = st.n_steps;
    for (const char *op : {CTN_OP_MEAN, CTN_OP_SUB, CTN_OP_BATCH_NORM_STATS, CTN_OP_RELU, CTN_OP_BATCH_NORM_RELU}) {
      uint32_t k = 0;
      EXPECT_EQ(ctn_plan_backend_steps(p, "cpu", op, &k), CTN_OK);
      r.op_steps.push_back(k);
    }
    uint32_t n = 0;
    const char *const *names = nullptr;
    const ctn_node *nodes = nullptr;
    EXPECT_EQ(ctn_model_variables(f.m, CTN_VAR_BUFFER, &n, &names, &nodes), CTN_OK);
    EXPECT_EQ(n, 2u);
    if (n == 2) r.rm = read_var(p, nodes[0]), r.rv = read_var(p, nodes[1]);
    ctn_plan_release(p);
    ctn_tensor_release(xt);
    ctn_tensor_release(yt);
    return r;
  };
  // b also without the fusion pass: batch_norm and relu as two steps.
  const Run a = run(true, 0), b = run(false, 0), u = run(false, CTN_PASS_FUSION);
  ASSERT_EQ(a.losses.size(), 5u);
  ASSERT_EQ(b.losses.size(), 5u);
  ASSERT_EQ(u.losses.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(a.losses[i], b.losses[i], 1e-5 * std::fabs(a.losses[i])) << "step " << i;
    EXPECT_NEAR(u.losses[i], b.losses[i], 1e-5 * std::fabs(u.losses[i])) << "step " << i << ", unfused";
  }
  EXPECT_EQ(u.op_steps, (std::vector<uint32_t>{0, 0, 1, 1, 0}));
  ASSERT_EQ(u.rv.size(), b.rv.size());
  for (size_t c = 0; c < b.rv.size(); ++c) EXPECT_NEAR(u.rv[c], b.rv[c], 1e-6 * b.rv[c]) << "unfused running_var " << c;
  ASSERT_EQ(a.rm.size(), static_cast<size_t>(C));
  ASSERT_EQ(b.rm.size(), static_cast<size_t>(C));
  ASSERT_EQ(b.rv.size(), static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(a.rm[c], b.rm[c], 1e-5 * (1 + std::fabs(a.rm[c]))) << "running_mean " << c;
    EXPECT_NEAR(a.rv[c], b.rv[c], 1e-5 * a.rv[c]) << "running_var " << c;
    EXPECT_NE(b.rm[c], 0.0);  // the statistics moved
    EXPECT_NE(b.rv[c], 1.0);
  }
  // mean, sub, mul, mean (4 steps over x) became batch_norm_stats (1 step over x); the row slices
  // and momentum updates are [C]-sized. In both, the fusion pass made batch_norm + relu one step.
  EXPECT_EQ(a.op_steps, (std::vector<uint32_t>{2, 1, 0, 0, 1}));
  EXPECT_EQ(b.op_steps, (std::vector<uint32_t>{0, 0, 1, 0, 1}));
  EXPECT_LT(b.steps, a.steps) << "four-pass plan " << a.steps << " steps, batch_norm_stats plan " << b.steps;
}

// Remember the sign of the first element of a sequence: only BPTT through every step can learn
// it. Adam with global-norm clipping.
TEST(NnTrain, LstmLearnsToyMemoryTaskWithClipping) {
  Fixture f(CTN_F32, 5);
  const int64_t T = 6, N = 32, H = 12;
  std::mt19937_64 r(17);
  std::vector<double> xs(static_cast<size_t>(T * N)), ys(static_cast<size_t>(N));
  for (auto &v : xs) v = (r() & 1) ? 1.0 : -1.0;
  for (int64_t n = 0; n < N; ++n) ys[static_cast<size_t>(n)] = xs[static_cast<size_t>(n)] > 0 ? 1 : 0;
  ctn_node x = f.input("x", CTN_F32, {T, N, 1}), y = f.input("y", CTN_I32, {N}), hl, logits, loss, norm;
  CTN_ASSERT_OK(ctn_nn_lstm(f.m, x, H, nullptr, &hl));
  CTN_ASSERT_OK(ctn_nn_linear(f.m, hl, H, 2, 1, &logits));
  CTN_ASSERT_OK(ctn_cross_entropy(f.g, logits, y, &loss));
  ctn_optimizer o = optimizer(CTN_OPTIM_ADAM, 0.03);
  o.clip_norm = 1.0;
  CTN_ASSERT_OK(ctn_nn_minimize(f.m, loss, &o, &norm));
  ctn_tensor *xt = make_tensor(CTN_F32, {T, N, 1}, xs), *yt = make_tensor(CTN_I32, {N}, ys);
  auto losses = train(f, loss, {x, y}, {xt, yt}, 150);
  ASSERT_EQ(losses.size(), 150u);
  EXPECT_LT(losses.back(), 0.05) << "first " << losses.front() << " last " << losses.back();
  EXPECT_LT(losses.back() * 10, losses.front());
  ctn_tensor_release(xt);
  ctn_tensor_release(yt);
}

}  // namespace
