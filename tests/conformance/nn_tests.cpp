// The neural-network op cases instantiated for every backend (forward against the references,
// gradients against finite differences), plus behaviour that a table cannot express: error
// messages at build time, kernel errors at run time, dropout's reproducibility.
#include <cstring>
#include <memory>

#include "nn_cases.hpp"

namespace conf {
namespace {

class NnForward : public CaseTest {};

TEST_P(NnForward, MatchesReference) { check_forward(nn_forward_cases()); }

INSTANTIATE_TEST_SUITE_P(Nn, NnForward, ::testing::ValuesIn(case_params(nn_forward_cases())),
                         case_param_name(nn_forward_cases));

class QuantForward : public CaseTest {};

TEST_P(QuantForward, MatchesReference) { check_forward(quant_cases()); }

INSTANTIATE_TEST_SUITE_P(Quant, QuantForward, ::testing::ValuesIn(case_params(quant_cases())),
                         case_param_name(quant_cases));

class NnGradient : public CaseTest {};

TEST_P(NnGradient, MatchesFiniteDifferences) { check_gradients(nn_grad_cases()); }

INSTANTIATE_TEST_SUITE_P(Nn, NnGradient, ::testing::ValuesIn(case_params(nn_grad_cases())),
                         case_param_name(nn_grad_cases));

// ---- behaviour --------------------------------------------------------------------------------------

GraphPtr lazy_graph() {
  ctn_graph *g = nullptr;
  EXPECT_EQ(ctn_graph_create(context(), 0, &g), CTN_OK) << ctn_last_error();
  return GraphPtr(g);
}

ctn_node input(ctn_graph *g, ctn_dtype dt, Shape s) {
  ctn_node n = CTN_NODE_NONE;
  EXPECT_EQ(ctn_input(g, nullptr, dt, static_cast<uint32_t>(s.size()), s.data(), &n), CTN_OK) << ctn_last_error();
  return n;
}

TEST(NnBuild, ShapeErrorsNameTheOpAndShapes) {
  ASSERT_NE(context(), nullptr) << setup_error();
  GraphPtr g = lazy_graph();
  ctn_node x = input(g.get(), CTN_F32, {1, 3, 8, 8});
  ctn_node w = input(g.get(), CTN_F32, {8, 4, 3, 3});
  ctn_node out = 12345;
  EXPECT_EQ(ctn_conv2d(g.get(), x, w, 1, 1, 0, 0, 1, 1, 1, &out), CTN_ERR_SHAPE);
  EXPECT_EQ(out, 12345u) << "out-params stay untouched on error";
  EXPECT_NE(std::strstr(ctn_last_error(), "conv2d: input channels 3 do not match weight [8, 4, 3, 3] with groups 1"),
            nullptr)
      << ctn_last_error();
  ctn_node w2 = input(g.get(), CTN_F32, {8, 3, 9, 9});
  EXPECT_EQ(ctn_conv2d(g.get(), x, w2, 1, 1, 0, 0, 1, 1, 1, &out), CTN_ERR_SHAPE);
  EXPECT_NE(std::strstr(ctn_last_error(), "does not fit"), nullptr) << ctn_last_error();
  EXPECT_EQ(ctn_conv2d(g.get(), x, w, -1, 1, 0, 0, 1, 1, 1, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_max_pool2d(g.get(), x, 2, 2, 2, 2, 2, 0, &out), CTN_ERR_INVALID_ARGUMENT) << "pad > kernel / 2";
  ctn_node xd = input(g.get(), CTN_F64, {1, 3, 8, 8});
  ctn_node gam = input(g.get(), CTN_F32, {3});
  EXPECT_EQ(ctn_batch_norm(g.get(), xd, gam, gam, 1e-5, &out), CTN_ERR_DTYPE);
  ctn_node gam4 = input(g.get(), CTN_F32, {4});
  EXPECT_EQ(ctn_batch_norm(g.get(), x, gam4, gam4, 1e-5, &out), CTN_ERR_SHAPE);
  EXPECT_NE(std::strstr(ctn_last_error(), "batch_norm: gamma must be [C] with C = 3"), nullptr) << ctn_last_error();
  ctn_node step32 = input(g.get(), CTN_I32, {});
  EXPECT_EQ(ctn_dropout(g.get(), x, step32, 0.5, 1, &out), CTN_ERR_DTYPE);
  ctn_node step = input(g.get(), CTN_I64, {});
  EXPECT_EQ(ctn_dropout(g.get(), x, step, 1.0, 1, &out), CTN_ERR_INVALID_ARGUMENT);
  ctn_node ids = input(g.get(), CTN_F32, {4});
  ctn_node table = input(g.get(), CTN_F32, {5, 2});
  EXPECT_EQ(ctn_embedding(g.get(), table, ids, &out), CTN_ERR_DTYPE);
  EXPECT_EQ(ctn_conv2d(nullptr, x, w, 1, 1, 0, 0, 1, 1, 1, &out), CTN_ERR_INVALID_ARGUMENT);
}

// batch_norm_stats (1.6): its result shape, its operand checks, and no gradient rule.
TEST(NnBuild, BatchNormStatsShapesErrorsAndNoGradient) {
  ASSERT_NE(context(), nullptr) << setup_error();
  GraphPtr g = lazy_graph();
  auto stats = [&](ctn_node x, ctn_node *out) { return ctn_op(g.get(), CTN_OP_BATCH_NORM_STATS, 1, &x, nullptr, out); };
  ctn_node x = input(g.get(), CTN_F32, {2, 5, 3, 3}), st = CTN_NODE_NONE;
  ASSERT_EQ(stats(x, &st), CTN_OK) << ctn_last_error();
  ctn_dtype dt;
  uint32_t nd = 0;
  int64_t s[CTN_MAX_DIMS];
  ASSERT_EQ(ctn_node_info(g.get(), st, &dt, &nd, s), CTN_OK);
  EXPECT_EQ(dt, CTN_F32);
  ASSERT_EQ(nd, 2u);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[1], 5);
  ctn_node out = 12345;
  EXPECT_EQ(stats(input(g.get(), CTN_F32, {5}), &out), CTN_ERR_SHAPE);
  EXPECT_NE(std::strstr(ctn_last_error(), "batch_norm_stats: the input must be at least 2-d"), nullptr) << ctn_last_error();
  EXPECT_EQ(stats(input(g.get(), CTN_F32, {0, 5, 2}), &out), CTN_ERR_SHAPE);
  EXPECT_EQ(stats(input(g.get(), CTN_I32, {2, 5}), &out), CTN_ERR_DTYPE);
  EXPECT_NE(std::strstr(ctn_last_error(), "batch_norm_stats"), nullptr) << ctn_last_error();
  EXPECT_EQ(out, 12345u) << "out-params stay untouched on error";
  ctn_node loss = CTN_NODE_NONE, dx = CTN_NODE_NONE;
  ASSERT_EQ(ctn_sum(g.get(), st, 0, nullptr, 0, &loss), CTN_OK) << ctn_last_error();
  EXPECT_NE(ctn_grad(g.get(), loss, 1, &x, &dx), CTN_OK);
  EXPECT_NE(std::strstr(ctn_last_error(), "batch_norm_stats"), nullptr) << ctn_last_error();
}

// The int8 ops refuse bad operands at build time with the op's name, leave out-params alone,
// and are not differentiable.
TEST(QuantBuild, ErrorsNameTheOpAndTheOperands) {
  ASSERT_NE(context(), nullptr) << setup_error();
  GraphPtr g = lazy_graph();
  auto op = [&](const char *name, std::vector<ctn_node> in, const ctn_attrs *a, ctn_node *out) {
    return ctn_op(g.get(), name, static_cast<uint32_t>(in.size()), in.data(), a, out);
  };
  auto has = [](const char *text) { return std::strstr(ctn_last_error(), text) != nullptr; };
  ctn_node x = input(g.get(), CTN_F32, {2, 3, 4}), s = input(g.get(), CTN_F32, {}), zu = input(g.get(), CTN_U8, {});
  ctn_node s4 = input(g.get(), CTN_F32, {4, 1}), z4 = input(g.get(), CTN_U8, {4, 1}), zf = input(g.get(), CTN_F32, {});
  ctn_node out = 12345;
  EXPECT_EQ(op(CTN_OP_QUANTIZE_LINEAR, {x, s4, z4}, nullptr, &out), CTN_ERR_SHAPE) << "[4, 1] does not broadcast to [2, 3, 4]";
  EXPECT_TRUE(has("quantize_linear: scale and zero point")) << ctn_last_error();
  EXPECT_EQ(out, 12345u) << "out-params stay untouched on error";
  EXPECT_EQ(op(CTN_OP_QUANTIZE_LINEAR, {x, s, zf}, nullptr, &out), CTN_ERR_DTYPE);
  EXPECT_TRUE(has("quantize_linear: the zero point must be u8 or i8")) << ctn_last_error();
  ctn_node q = CTN_NODE_NONE;
  ASSERT_EQ(op(CTN_OP_QUANTIZE_LINEAR, {x, s, zu}, nullptr, &q), CTN_OK) << ctn_last_error();
  EXPECT_EQ(op(CTN_OP_DEQUANTIZE_LINEAR, {x, s, zu}, nullptr, &out), CTN_ERR_DTYPE);
  EXPECT_TRUE(has("dequantize_linear: x must be u8, i8 or i32")) << ctn_last_error();
  // Not differentiable: ctn_grad through quantize_linear fails naming it.
  ctn_node loss = CTN_NODE_NONE, dx = CTN_NODE_NONE;
  ctn_node deq = CTN_NODE_NONE;
  ASSERT_EQ(op(CTN_OP_DEQUANTIZE_LINEAR, {q, s, zu}, nullptr, &deq), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_sum(g.get(), deq, 0, nullptr, 0, &loss), CTN_OK) << ctn_last_error();
  EXPECT_NE(ctn_grad(g.get(), loss, 1, &s, &dx), CTN_OK);
  EXPECT_TRUE(has("dequantize_linear")) << ctn_last_error();
  // Integer convolution: dtypes, per-channel shapes, bias, activation.
  ctn_node xq = input(g.get(), CTN_U8, {1, 2, 5, 5}), wq = input(g.get(), CTN_I8, {3, 2, 3, 3});
  ctn_node zi = input(g.get(), CTN_I8, {}), z3 = input(g.get(), CTN_I8, {3}), z2 = input(g.get(), CTN_I8, {2});
  ctn_node s3 = input(g.get(), CTN_F32, {3}), b3 = input(g.get(), CTN_I32, {3}), bf = input(g.get(), CTN_F32, {3});
  const ctn_attrs conv = attrs({1, 1, 1, 1, 1, 1, 1, CTN_ACT_NONE});
  ASSERT_EQ(op(CTN_OP_QLINEAR_CONV2D, {xq, s, zu, wq, s3, z3, s, zu, b3}, &conv, &out), CTN_OK) << ctn_last_error();
  out = 12345;
  EXPECT_EQ(op(CTN_OP_QLINEAR_CONV2D, {xq, s, zu, wq, s3, z2, s, zu, b3}, &conv, &out), CTN_ERR_SHAPE);
  EXPECT_TRUE(has("qlinear_conv2d: w_zero_point must be i8 [] or [3]")) << ctn_last_error();
  EXPECT_EQ(op(CTN_OP_QLINEAR_CONV2D, {xq, s, zu, wq, s3, z3, s, zu, bf}, &conv, &out), CTN_ERR_SHAPE);
  EXPECT_TRUE(has("qlinear_conv2d: bias must be i32 [3]")) << ctn_last_error();
  const ctn_attrs gelu = attrs({1, 1, 1, 1, 1, 1, 1, CTN_ACT_GELU});
  EXPECT_EQ(op(CTN_OP_QLINEAR_CONV2D, {xq, s, zu, wq, s3, z3, s, zu, b3}, &gelu, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has("activation i[7] must be none (0) or relu (1)")) << ctn_last_error();
  const ctn_attrs conv7 = attrs({1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(op(CTN_OP_CONV2D_INTEGER, {xq, x, zu, zi}, &conv7, &out), CTN_ERR_DTYPE);
  EXPECT_TRUE(has("conv2d_integer: w must be u8 or i8")) << ctn_last_error();
  EXPECT_EQ(out, 12345u);
  // Integer matmul: inner dimensions.
  ctn_node a = input(g.get(), CTN_U8, {2, 3}), b = input(g.get(), CTN_I8, {4, 5});
  EXPECT_EQ(op(CTN_OP_MATMUL_INTEGER, {a, b, zu, zi}, nullptr, &out), CTN_ERR_SHAPE);
  EXPECT_TRUE(has("matmul_integer: a must be [..., M, K] and b [..., K, N]")) << ctn_last_error();
}

// Runs a one-output plan on `backend` with the given feeds; returns the status of the run.
ctn_status run_one(ctn_graph *g, ctn_node out, const std::string &backend, const std::vector<ctn_node> &nodes,
                   const std::vector<ctn_tensor *> &feeds, Arr *result) {
  ctn_compile_options o = compile_options(backend, true);
  ctn_plan *p = nullptr;
  ctn_status s = ctn_plan_compile(g, 1, &out, &o, &p);
  if (s != CTN_OK) return s;
  PlanPtr plan(p);
  ctn_tensor *t = nullptr;
  s = ctn_plan_output_create(p, 0, &t);
  if (s != CTN_OK) return s;
  TensorPtr tp(t);
  std::vector<const ctn_tensor *> fv(feeds.begin(), feeds.end());
  ctn_tensor *const outs[] = {t};
  s = ctn_plan_run(p, static_cast<uint32_t>(nodes.size()), nodes.data(), fv.data(), 1, outs);
  if (s == CTN_OK && result) *result = read_tensor(t);
  return s;
}

class NnBehaviour : public BackendTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(NnBehaviour, EmbeddingIdOutOfRangeFailsTheRun) {
  begin(GetParam(), "embedding");
  if (IsSkipped() || HasFatalFailure()) return;
  GraphPtr g = lazy_graph();
  ctn_node table = input(g.get(), CTN_F32, {3, 2}), ids = input(g.get(), CTN_I64, {2});
  ctn_node out = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_embedding(g.get(), table, ids, &out));
  TensorPtr tv(make_tensor(CTN_F32, {3, 2}, {1, 2, 3, 4, 5, 6}));
  for (double bad : {3.0, -1.0}) {
    TensorPtr iv(make_tensor(CTN_I64, {2}, {0, bad}));
    ctn_status s = run_one(g.get(), out, GetParam(), {table, ids}, {tv.get(), iv.get()}, nullptr);
    if (s == CTN_ERR_UNSUPPORTED && GetParam() != "cpu") return note_unsupported(ctn_last_error());
    EXPECT_EQ(s, CTN_ERR_INVALID_ARGUMENT) << status_text(s);
  }
  TensorPtr iv(make_tensor(CTN_I64, {2}, {2, 0}));
  Arr r;
  ASSERT_EQ(run_one(g.get(), out, GetParam(), {table, ids}, {tv.get(), iv.get()}, &r), CTN_OK) << ctn_last_error();
  EXPECT_EQ(r.v, (std::vector<double>{5, 6, 1, 2}));
  note_ran();
}

// Same step: the same mask (also across dtypes); another step or seed: another mask; the kept
// fraction is close to 1 - p.
TEST_P(NnBehaviour, DropoutIsReproducible) {
  begin(GetParam(), "dropout");
  if (IsSkipped() || HasFatalFailure()) return;
  const int64_t n = 20000;
  bool f64_declined = false, declined = false;
  auto run = [&](ctn_dtype dt, int64_t step_v, int64_t seed, Arr *r) {
    GraphPtr g = lazy_graph();
    ctn_node x = input(g.get(), dt, {n}), step = input(g.get(), CTN_I64, {});
    ctn_node out = CTN_NODE_NONE;
    ASSERT_EQ(ctn_dropout(g.get(), x, step, 0.25, seed, &out), CTN_OK) << ctn_last_error();
    TensorPtr xv(make_tensor(dt, {n}, std::vector<double>(static_cast<size_t>(n), 1.0)));
    TensorPtr sv(make_tensor(CTN_I64, {}, {static_cast<double>(step_v)}));
    ctn_status s = run_one(g.get(), out, GetParam(), {x, step}, {xv.get(), sv.get()}, r);
    // A device without f64 (a Pi's GPU) declines the f64 run; the CPU must not. A backend
    // without dropout (vendor mode) declines the f32 run: the case is unsupported there.
    if (s == CTN_ERR_UNSUPPORTED && GetParam() != "cpu") {
      (dt == CTN_F64 ? f64_declined : declined) = true;
      if (dt != CTN_F64) note_unsupported(ctn_last_error());
      return;
    }
    ASSERT_EQ(s, CTN_OK) << status_text(s);
  };
  Arr a, b, c, d, e;
  ASSERT_NO_FATAL_FAILURE(run(CTN_F32, 41, 9, &a));
  if (declined) return;
  ASSERT_NO_FATAL_FAILURE(run(CTN_F32, 41, 9, &b));
  ASSERT_NO_FATAL_FAILURE(run(CTN_F64, 41, 9, &c));
  if (f64_declined) c = a;  // nothing to compare the f32 mask with
  ASSERT_NO_FATAL_FAILURE(run(CTN_F32, 42, 9, &d));
  ASSERT_NO_FATAL_FAILURE(run(CTN_F32, 41, 10, &e));
  EXPECT_EQ(a.v, b.v);
  size_t kept = 0, same_d = 0, same_e = 0, mismatch_c = 0;
  for (size_t k = 0; k < a.v.size(); ++k) {
    kept += a.v[k] != 0;
    same_d += (a.v[k] != 0) == (d.v[k] != 0);
    same_e += (a.v[k] != 0) == (e.v[k] != 0);
    mismatch_c += (a.v[k] != 0) != (c.v[k] != 0);
    if (a.v[k] != 0) {
      EXPECT_NEAR(a.v[k], 1 / 0.75, 1e-6);
    }
  }
  EXPECT_EQ(mismatch_c, 0u) << "f32 and f64 must draw the same mask";
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.02);
  // Independent masks agree on about 0.75^2 + 0.25^2 = 62.5% of the elements.
  EXPECT_LT(static_cast<double>(same_d) / n, 0.7);
  EXPECT_LT(static_cast<double>(same_e) / n, 0.7);
  note_ran();
}

INSTANTIATE_TEST_SUITE_P(Nn, NnBehaviour, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string> &info) { return param_name(info.param); });

}  // namespace
}  // namespace conf
