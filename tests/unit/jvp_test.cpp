// Forward mode (ctn_jvp, core/autodiff/jvp.cpp) in f64 on the CPU backend: for every op with a
// tangent rule, the JVP matches central finite differences, and <J v, w> = <v, J^T w> with the
// reverse rule (ctn_grad). A Hessian-vector product of an MLP (ctn_jvp of ctn_grad) matches
// finite differences of gradients. Ops without a rule fail naming the op and leave the graph as
// it was.
#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace {

#define OK(expr)                                                                                  \
  do {                                                                                            \
    ctn_status s_ = (expr);                                                                       \
    ASSERT_EQ(s_, CTN_OK) << #expr << ": " << ctn_status_name(s_) << " " << ctn_last_error();     \
  } while (0)

using Shape = std::vector<int64_t>;
using Builder = std::function<ctn_status(ctn_graph *, const std::vector<ctn_node> &, ctn_node *)>;

struct Case {
  std::string name;
  std::vector<Shape> shapes;  // f64 inputs, all differentiated
  Builder build;
  double lo = -1.5, hi = 1.5;  // input range
  bool reverse = true;         // the op has a reverse rule: check <J v, w> = <v, J^T w> too
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

size_t numel(const Shape &s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}

ctn_tensor *make(const Shape &s, const std::vector<double> &v) {
  ctn_tensor *t = nullptr;
  ctn_tensor_create(CTN_F64, static_cast<uint32_t>(s.size()), s.data(), v.data(), &t);
  return t;
}

std::vector<double> read(ctn_tensor *t) {
  int64_t n = 0;
  ctn_tensor_numel(t, &n);
  std::vector<double> v(static_cast<size_t>(n));
  ctn_tensor_read(t, v.data(), v.size() * sizeof(double));
  return v;
}

ctn_node const_i(ctn_graph *g, ctn_dtype dt, Shape s, std::vector<int64_t> v) {
  ctn_tensor *t = nullptr;
  std::vector<int32_t> v32(v.begin(), v.end());
  ctn_tensor_create(dt, static_cast<uint32_t>(s.size()), s.data(),
                    dt == CTN_I32 ? static_cast<const void *>(v32.data()) : static_cast<const void *>(v.data()), &t);
  ctn_node n = 0;
  ctn_constant(g, t, &n);
  ctn_tensor_release(t);
  return n;
}

void check_case(const Case &c) {
  SCOPED_TRACE(c.name);
  ctn_context *ctx = nullptr;
  OK(ctn_context_create(nullptr, &ctx));
  OK(ctn_context_set_backends(ctx, "cpu"));
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  const size_t k = c.shapes.size();
  std::vector<ctn_node> x(k), v(k);
  for (size_t i = 0; i < k; ++i) {
    OK(ctn_input(g, ("x" + std::to_string(i)).c_str(), CTN_F64, static_cast<uint32_t>(c.shapes[i].size()),
                 c.shapes[i].data(), &x[i]));
    OK(ctn_input(g, ("v" + std::to_string(i)).c_str(), CTN_F64, static_cast<uint32_t>(c.shapes[i].size()),
                 c.shapes[i].data(), &v[i]));
  }
  ctn_node y = 0;
  OK(c.build(g, x, &y));
  ctn_node ty = 0;
  OK(ctn_jvp(g, 1, &y, static_cast<uint32_t>(k), x.data(), v.data(), &ty));
  // <y, w> and its gradient: the reverse rule's J^T w.
  uint32_t nd = 0;
  int64_t ys[8] = {0};
  ctn_dtype ydt;
  OK(ctn_node_info(g, y, &ydt, &nd, ys));
  Shape yshape(ys, ys + nd);
  ctn_node w = 0, yw = 0, l = 0;
  OK(ctn_input(g, "w", CTN_F64, nd, ys, &w));
  OK(ctn_mul(g, y, w, &yw));
  std::vector<int32_t> axes;
  for (uint32_t d = 0; d < nd; ++d) axes.push_back(static_cast<int32_t>(d));
  if (nd) OK(ctn_sum(g, yw, nd, axes.data(), 0, &l));
  else l = yw;
  std::vector<ctn_node> vjp(k);
  std::vector<ctn_node> outs = {y, ty};
  if (c.reverse) {
    OK(ctn_grad(g, l, static_cast<uint32_t>(k), x.data(), vjp.data()));
    outs.insert(outs.end(), vjp.begin(), vjp.end());
  }
  ctn_plan *p = nullptr;
  OK(ctn_plan_compile(g, static_cast<uint32_t>(outs.size()), outs.data(), nullptr, &p));

  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> ux(c.lo, c.hi), uv(-1.0, 1.0);
  std::vector<std::vector<double>> xv(k), vv(k);
  for (size_t i = 0; i < k; ++i) {
    for (size_t e = 0; e < numel(c.shapes[i]); ++e) {
      xv[i].push_back(ux(rng));
      vv[i].push_back(uv(rng));
    }
  }
  std::vector<double> wv;
  for (size_t e = 0; e < numel(yshape); ++e) wv.push_back(uv(rng));

  std::vector<ctn_tensor *> res(outs.size(), nullptr);
  for (size_t i = 0; i < outs.size(); ++i) OK(ctn_plan_output_create(p, static_cast<uint32_t>(i), &res[i]));
  auto run = [&](double h) {
    std::vector<ctn_node> fn;
    std::vector<ctn_tensor *> fv;
    for (size_t i = 0; i < k; ++i) {
      std::vector<double> xs = xv[i];
      for (size_t e = 0; e < xs.size(); ++e) xs[e] += h * vv[i][e];
      fn.push_back(x[i]);
      fv.push_back(make(c.shapes[i], xs));
      fn.push_back(v[i]);
      fv.push_back(make(c.shapes[i], vv[i]));
    }
    fn.push_back(w);
    fv.push_back(make(yshape, wv));
    std::vector<const ctn_tensor *> cfv(fv.begin(), fv.end());
    ctn_status s = ctn_plan_run(p, static_cast<uint32_t>(fn.size()), fn.data(), cfv.data(),
                                static_cast<uint32_t>(res.size()), res.data());
    for (ctn_tensor *t : fv) ctn_tensor_release(t);
    return s;
  };
  const double h = 1e-6;
  OK(run(h));
  std::vector<double> yp = read(res[0]);
  OK(run(-h));
  std::vector<double> ym = read(res[0]);
  OK(run(0));
  std::vector<double> jv = read(res[1]);
  ASSERT_EQ(jv.size(), yp.size());
  for (size_t e = 0; e < jv.size(); ++e) {
    const double fd = (yp[e] - ym[e]) / (2 * h);
    EXPECT_NEAR(jv[e], fd, 1e-6 * (1 + std::fabs(fd))) << "element " << e;
  }
  // <J v, w> = <v, J^T w>
  if (!c.reverse) {
    for (ctn_tensor *t : res) ctn_tensor_release(t);
    ctn_plan_release(p);
    ctn_graph_release(g);
    ctn_context_release(ctx);
    return;
  }
  double lhs = 0, rhs = 0, scale = 0;
  for (size_t e = 0; e < jv.size(); ++e) {
    lhs += jv[e] * wv[e];
    scale += std::fabs(jv[e] * wv[e]);
  }
  for (size_t i = 0; i < k; ++i) {
    std::vector<double> gv = read(res[2 + i]);
    ASSERT_EQ(gv.size(), vv[i].size());
    for (size_t e = 0; e < gv.size(); ++e) {
      rhs += gv[e] * vv[i][e];
      scale += std::fabs(gv[e] * vv[i][e]);
    }
  }
  EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + scale)) << "<jvp(v), w> = " << lhs << ", <v, vjp(w)> = " << rhs;
  for (ctn_tensor *t : res) ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}

// Whether unary op `op` gives finite values at the points (an eager f64 graph on the CPU).
bool finite_on(ctn_context *ctx, const char *op, const std::vector<double> &points) {
  ctn_graph *g = nullptr;
  if (ctn_graph_create(ctx, CTN_GRAPH_EAGER, &g) != CTN_OK) return false;
  const int64_t n = static_cast<int64_t>(points.size());
  ctn_tensor *t = make({n}, points), *out = nullptr;
  ctn_node x = 0, y = 0;
  bool ok = ctn_constant(g, t, &x) == CTN_OK && ctn_op(g, op, 1, &x, nullptr, &y) == CTN_OK &&
            ctn_graph_value(g, y, &out) == CTN_OK;
  if (ok)
    for (double v : read(out)) ok = ok && std::isfinite(v);
  ctn_tensor_release(out);
  ctn_tensor_release(t);
  ctn_graph_release(g);
  return ok;
}

std::vector<Case> cases() {
  using X = const std::vector<ctn_node> &;
  const Shape m{3, 4}, r{4};
  std::vector<Case> cs;
  auto unary = [&](const char *name, ctn_status (*f)(ctn_graph *, ctn_node, ctn_node *), double lo = -1.5,
                   double hi = 1.5) {
    cs.push_back({name, {m}, [f](ctn_graph *g, X x, ctn_node *y) { return f(g, x[0], y); }, lo, hi});
  };
  auto binary = [&](const char *name, ctn_status (*f)(ctn_graph *, ctn_node, ctn_node, ctn_node *), double lo = -1.5,
                    double hi = 1.5) {
    cs.push_back({name, {m, m}, [f](ctn_graph *g, X x, ctn_node *y) { return f(g, x[0], x[1], y); }, lo, hi});
    cs.push_back({std::string(name) + "_bcast", {m, r},
                  [f](ctn_graph *g, X x, ctn_node *y) { return f(g, x[0], x[1], y); }, lo, hi});
  };
  // Every built-in elementwise unary op without attributes, by name from the registry, so a new
  // op's tangent rule is checked without touching this file; on [0.2, 0.9], clear of the kinks at
  // 0 and inside the domains of log, sqrt, asin, acos and atanh, or on [1.2, 1.9] for an op that
  // is not finite there (acosh), found by evaluating it.
  {
    ctn_context *ctx = nullptr;
    uint32_t n = 0;
    if (ctn_context_create(nullptr, &ctx) == CTN_OK && ctn_context_op_count(ctx, &n) == CTN_OK)
      for (uint32_t i = 0; i < n; ++i) {
        ctn_op_info info{};
        info.struct_size = sizeof info;
        if (ctn_context_op_info(ctx, i, &info) != CTN_OK || std::string(info.origin) != "builtin" ||
            info.n_inputs != 1 || !info.differentiable || !(info.flags & CTN_OP_INFO_ELEMENTWISE) ||
            info.attributes[0] != '\0')
          continue;
        const std::string op = info.name;
        const bool low = finite_on(ctx, op.c_str(), {0.2, 0.55, 0.9});
        cs.push_back({"registry_" + op, {m},
                      [op](ctn_graph *g, X x, ctn_node *y) { return ctn_op(g, op.c_str(), 1, &x[0], nullptr, y); },
                      low ? 0.2 : 1.2, low ? 0.9 : 1.9});
      }
    ctn_context_release(ctx);
  }
  unary("neg", ctn_neg);
  unary("exp", ctn_exp);
  unary("log", ctn_log, 0.2, 2.0);
  unary("sqrt", ctn_sqrt, 0.2, 2.0);
  unary("abs", ctn_abs);
  unary("tanh", ctn_tanh);
  unary("sigmoid", ctn_sigmoid);
  unary("relu", ctn_relu);
  unary("gelu", ctn_gelu);
  cs.push_back({"leaky_relu", {m}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_leaky_relu(g, x[0], 0.1, y); }});
  cs.push_back({"clamp", {m}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_clamp(g, x[0], -0.7, 0.9, y); }});
  cs.push_back({"cast_f32_f64", {m}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_cast(g, x[0], CTN_F64, y); }});
  binary("add", ctn_add);
  binary("sub", ctn_sub);
  binary("mul", ctn_mul);
  binary("div", ctn_div, 0.3, 2.0);
  binary("pow", ctn_pow, 0.3, 2.0);
  binary("maximum", [](ctn_graph *g, ctn_node a, ctn_node b, ctn_node *y) {
    ctn_node in[2] = {a, b};
    return ctn_op(g, "maximum", 2, in, nullptr, y);
  });
  binary("minimum", [](ctn_graph *g, ctn_node a, ctn_node b, ctn_node *y) {
    ctn_node in[2] = {a, b};
    return ctn_op(g, "minimum", 2, in, nullptr, y);
  });
  cs.push_back({"where", {m, m, m}, [](ctn_graph *g, X x, ctn_node *y) {
                  ctn_node c;
                  ctn_status s = ctn_compare(g, "gt", x[0], x[1], &c);
                  return s ? s : ctn_where(g, c, x[1], x[2], y);
                }});
  cs.push_back({"matmul", {{3, 4}, {4, 5}}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_matmul(g, x[0], x[1], 0, 0, y); }});
  cs.push_back({"matmul_tt", {{4, 3}, {5, 4}}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_matmul(g, x[0], x[1], 1, 1, y); }});
  cs.push_back({"sum", {{2, 3, 4}}, [](ctn_graph *g, X x, ctn_node *y) {
                  int32_t ax[1] = {1};
                  return ctn_sum(g, x[0], 1, ax, 0, y);
                }});
  cs.push_back({"mean", {{2, 3, 4}}, [](ctn_graph *g, X x, ctn_node *y) {
                  int32_t ax[2] = {0, 2};
                  return ctn_mean(g, x[0], 2, ax, 1, y);
                }});
  cs.push_back({"max", {{2, 3, 4}}, [](ctn_graph *g, X x, ctn_node *y) {
                  int32_t ax[1] = {2};
                  return ctn_max(g, x[0], 1, ax, 0, y);
                }});
  cs.push_back({"reshape", {{2, 6}}, [](ctn_graph *g, X x, ctn_node *y) {
                  int64_t s[3] = {3, 2, 2};
                  return ctn_reshape(g, x[0], 3, s, y);
                }});
  cs.push_back({"permute", {{2, 3, 4}}, [](ctn_graph *g, X x, ctn_node *y) {
                  int32_t p[3] = {2, 0, 1};
                  return ctn_permute(g, x[0], p, y);
                }});
  cs.push_back({"slice", {{5, 4}}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_slice(g, x[0], 0, 1, 5, 2, y); }});
  cs.push_back({"concat", {{2, 4}, {3, 4}}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_concat(g, 2, x.data(), 0, y); }});
  cs.push_back({"broadcast_to", {{1, 4}}, [](ctn_graph *g, X x, ctn_node *y) {
                  int64_t s[2] = {3, 4};
                  return ctn_broadcast_to(g, x[0], 2, s, y);
                }});
  cs.push_back({"softmax", {m}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_softmax(g, x[0], 1, y); }});
  cs.push_back({"log_softmax", {m}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_log_softmax(g, x[0], 1, y); }});
  cs.push_back({"cross_entropy", {m}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_cross_entropy(g, x[0], const_i(g, CTN_I32, {3}, {0, 3, 1}), y);
                }});
  cs.push_back({"conv2d", {{2, 2, 5, 5}, {3, 2, 3, 3}}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_conv2d(g, x[0], x[1], 1, 1, 1, 1, 1, 1, 1, y);
                }});
  cs.push_back({"conv2d_stride_groups", {{1, 4, 6, 6}, {4, 2, 3, 3}}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_conv2d(g, x[0], x[1], 2, 2, 0, 0, 1, 1, 2, y);
                }});
  cs.push_back({"conv_transpose2d", {{1, 2, 4, 4}, {2, 3, 3, 3}}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_conv_transpose2d(g, x[0], x[1], 2, 2, 1, 1, 1, 1, 1, 1, 1, y);
                }});
  cs.push_back({"avg_pool2d", {{2, 2, 4, 4}}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_avg_pool2d(g, x[0], 2, 2, 2, 2, 0, 0, 1, y);
                }});
  cs.push_back({"batch_norm", {{4, 3, 2, 2}, {3}, {3}}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_batch_norm(g, x[0], x[1], x[2], 1e-5, y);
                }});
  cs.push_back({"dropout", {m}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_dropout(g, x[0], const_i(g, CTN_I64, {}, {3}), 0.3, 9, y);
                }});
  cs.push_back({"embedding", {{5, 3}}, [](ctn_graph *g, X x, ctn_node *y) {
                  return ctn_embedding(g, x[0], const_i(g, CTN_I32, {4}, {1, 4, 1, 0}), y);
                }});
  // An op library's op through its own tangent rule (ctn_op_def.jvp_ex, plugins/swish: the
  // context loads it from the build tree like every plugin there).
  cs.push_back({"oplib_swish", {m}, [](ctn_graph *g, X x, ctn_node *y) { return ctn_op(g, "swish", 1, x.data(), nullptr, y); }});
  // Backward ops (forward over reverse): they have no reverse rules, so finite differences only.
  auto op2 = [&](const char *name, double lo = -1.5, double hi = 1.5) {
    cs.push_back({name, {m, m}, [name](ctn_graph *g, X x, ctn_node *y) {
                    ctn_node in[2] = {x[0], x[1]};
                    return ctn_op(g, name, 2, in, nullptr, y);
                  }, lo, hi, false});
  };
  op2("relu_grad");
  op2("tanh_grad", -0.9, 0.9);
  op2("sigmoid_grad", 0.1, 0.9);
  cs.push_back({"cross_entropy_grad", {m, {}}, [](ctn_graph *g, X x, ctn_node *y) {
                  ctn_node in[3] = {x[0], const_i(g, CTN_I32, {3}, {2, 0, 1}), x[1]};
                  return ctn_op(g, "cross_entropy_grad", 3, in, nullptr, y);
                }, -1.5, 1.5, false});
  return cs;
}

class Jvp : public ::testing::TestWithParam<Case> {};

TEST_P(Jvp, MatchesFiniteDifferencesAndTheReverseRule) { check_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, Jvp, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &i) { return i.param.name; });

TEST(JvpErrors, OpWithoutRuleNamesItAndLeavesTheGraph) {
  ctn_context *ctx = nullptr;
  OK(ctn_context_create(nullptr, &ctx));
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  int64_t s[4] = {1, 1, 4, 4};
  ctn_node x, v, y, e, t = 0;
  OK(ctn_input(g, "x", CTN_F64, 4, s, &x));
  OK(ctn_input(g, "v", CTN_F64, 4, s, &v));
  OK(ctn_exp(g, x, &e));
  OK(ctn_max_pool2d(g, e, 2, 2, 2, 2, 0, 0, &y));
  uint32_t before = 0, after = 0;
  OK(ctn_graph_node_count(g, &before));
  EXPECT_EQ(ctn_jvp(g, 1, &y, 1, &x, &v, &t), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("max_pool2d"), std::string::npos) << ctn_last_error();
  OK(ctn_graph_node_count(g, &after));
  EXPECT_EQ(before, after);
  // A tangent of the wrong shape.
  int64_t s2[1] = {3};
  ctn_node bad;
  OK(ctn_input(g, "bad", CTN_F64, 1, s2, &bad));
  EXPECT_EQ(ctn_jvp(g, 1, &e, 1, &x, &bad, &t), CTN_ERR_SHAPE);
  ctn_graph_release(g);
  // Eager graphs are refused.
  OK(ctn_graph_create(ctx, CTN_GRAPH_EAGER, &g));
  EXPECT_EQ(ctn_jvp(g, 0, nullptr, 0, nullptr, nullptr, nullptr), CTN_ERR_STATE);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}

// An op-library op without a tangent rule (swish_grad has none): the error names the op and
// the library, and the graph is unchanged.
TEST(JvpErrors, OpLibraryOpWithoutRuleNamesTheLibrary) {
  ctn_context *ctx = nullptr;
  OK(ctn_context_create(nullptr, &ctx));  // loads the build tree's plugins, swish included
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  int64_t s[2] = {2, 3};
  ctn_node x, v, dy, y, t = 0;
  OK(ctn_input(g, "x", CTN_F64, 2, s, &x));
  OK(ctn_input(g, "v", CTN_F64, 2, s, &v));
  OK(ctn_input(g, "dy", CTN_F64, 2, s, &dy));
  ctn_node in[2] = {x, dy};
  OK(ctn_op(g, "swish_grad", 2, in, nullptr, &y));
  uint32_t before = 0, after = 0;
  OK(ctn_graph_node_count(g, &before));
  EXPECT_EQ(ctn_jvp(g, 1, &y, 1, &x, &v, &t), CTN_ERR_UNSUPPORTED);
  const std::string m = ctn_last_error();
  EXPECT_NE(m.find("swish_grad"), std::string::npos) << m;
  EXPECT_NE(m.find("swish-ops"), std::string::npos) << m;
  EXPECT_NE(m.find("jvp_ex"), std::string::npos) << m;
  OK(ctn_graph_node_count(g, &after));
  EXPECT_EQ(before, after);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}

// Hessian-vector product of an MLP loss (forward over reverse) against central differences of
// the gradient, in f64.
TEST(Hvp, MlpMatchesFiniteDifferencesOfGradients) {
  ctn_context *ctx = nullptr;
  OK(ctn_context_create(nullptr, &ctx));
  OK(ctn_context_set_backends(ctx, "cpu"));
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  const int n = 6, d = 5, h = 7, c = 3;
  std::vector<Shape> ps = {{d, h}, {h}, {h, c}, {c}};
  std::vector<ctn_node> p(4), v(4);
  for (size_t i = 0; i < 4; ++i) {
    OK(ctn_input(g, ("p" + std::to_string(i)).c_str(), CTN_F64, static_cast<uint32_t>(ps[i].size()), ps[i].data(), &p[i]));
    OK(ctn_input(g, ("v" + std::to_string(i)).c_str(), CTN_F64, static_cast<uint32_t>(ps[i].size()), ps[i].data(), &v[i]));
  }
  int64_t xs[2] = {n, d};
  ctn_node x, z, zb, a, o, ob, loss;
  OK(ctn_input(g, "x", CTN_F64, 2, xs, &x));
  OK(ctn_matmul(g, x, p[0], 0, 0, &z));
  OK(ctn_add(g, z, p[1], &zb));
  OK(ctn_tanh(g, zb, &a));
  OK(ctn_matmul(g, a, p[2], 0, 0, &o));
  OK(ctn_add(g, o, p[3], &ob));
  OK(ctn_cross_entropy(g, ob, const_i(g, CTN_I32, {n}, {0, 1, 2, 0, 1, 2}), &loss));
  std::vector<ctn_node> grads(4), hv(4);
  OK(ctn_grad(g, loss, 4, p.data(), grads.data()));
  OK(ctn_jvp(g, 4, grads.data(), 4, p.data(), v.data(), hv.data()));
  std::vector<ctn_node> outs = grads;
  outs.insert(outs.end(), hv.begin(), hv.end());
  ctn_plan *plan = nullptr;
  OK(ctn_plan_compile(g, 8, outs.data(), nullptr, &plan));
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::vector<double>> pv(4), vv(4);
  for (size_t i = 0; i < 4; ++i)
    for (size_t e = 0; e < numel(ps[i]); ++e) {
      pv[i].push_back(u(rng));
      vv[i].push_back(u(rng));
    }
  std::vector<double> xvals;
  for (int e = 0; e < n * d; ++e) xvals.push_back(u(rng));
  std::vector<ctn_tensor *> res(8);
  for (uint32_t i = 0; i < 8; ++i) OK(ctn_plan_output_create(plan, i, &res[i]));
  auto run = [&](double eps, std::vector<std::vector<double>> *gr, std::vector<std::vector<double>> *hvo) {
    std::vector<ctn_node> fn;
    std::vector<ctn_tensor *> fv;
    for (size_t i = 0; i < 4; ++i) {
      std::vector<double> q = pv[i];
      for (size_t e = 0; e < q.size(); ++e) q[e] += eps * vv[i][e];
      fn.push_back(p[i]);
      fv.push_back(make(ps[i], q));
      fn.push_back(v[i]);
      fv.push_back(make(ps[i], vv[i]));
    }
    fn.push_back(x);
    fv.push_back(make({n, d}, xvals));
    std::vector<const ctn_tensor *> cfv(fv.begin(), fv.end());
    ASSERT_EQ(ctn_plan_run(plan, static_cast<uint32_t>(fn.size()), fn.data(), cfv.data(), 8, res.data()), CTN_OK)
        << ctn_last_error();
    for (ctn_tensor *t : fv) ctn_tensor_release(t);
    gr->clear();
    hvo->clear();
    for (int i = 0; i < 4; ++i) gr->push_back(read(res[static_cast<size_t>(i)]));
    for (int i = 4; i < 8; ++i) hvo->push_back(read(res[static_cast<size_t>(i)]));
  };
  const double eps = 1e-5;
  std::vector<std::vector<double>> gp, gm, g0, hvp, dummy;
  ASSERT_NO_FATAL_FAILURE(run(eps, &gp, &dummy));
  ASSERT_NO_FATAL_FAILURE(run(-eps, &gm, &dummy));
  ASSERT_NO_FATAL_FAILURE(run(0, &g0, &hvp));
  double norm = 0;
  for (size_t i = 0; i < 4; ++i)
    for (size_t e = 0; e < hvp[i].size(); ++e) {
      const double fd = (gp[i][e] - gm[i][e]) / (2 * eps);
      EXPECT_NEAR(hvp[i][e], fd, 1e-6 * (1 + std::fabs(fd))) << "parameter " << i << " element " << e;
      norm += std::fabs(hvp[i][e]);
    }
  EXPECT_GT(norm, 1e-3) << "the Hessian-vector product should not vanish";
  for (ctn_tensor *t : res) ctn_tensor_release(t);
  ctn_plan_release(plan);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}

}  // namespace
