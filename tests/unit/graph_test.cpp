// Graph building: shape/dtype inference at the building call, error messages naming the op and
// the offending operands, DOT export.
#include "test_helpers.h"

#include <chutney/ops.h>

namespace {
ctn_node input(ctn_graph *g, std::vector<int64_t> shape, ctn_dtype dt = CTN_F32) {
  ctn_node n = CTN_NODE_NONE;
  EXPECT_EQ(ctn_input(g, nullptr, dt, static_cast<uint32_t>(shape.size()), shape.data(), &n), CTN_OK) << ctn_last_error();
  return n;
}
std::vector<int64_t> shape_of(ctn_graph *g, ctn_node n) {
  uint32_t nd = 0;
  int64_t s[8];
  EXPECT_EQ(ctn_node_info(g, n, nullptr, &nd, s), CTN_OK);
  return std::vector<int64_t>(s, s + nd);
}
}  // namespace

TEST(Graph, InfersBroadcastAndMatmulShapes) {
  Ctx c;
  ctn_graph *g;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  ctn_node a = input(g, {5, 1, 3}), b = input(g, {4, 3}), s, m;
  CTN_ASSERT_OK(ctn_add(g, a, b, &s));
  EXPECT_EQ(shape_of(g, s), (std::vector<int64_t>{5, 4, 3}));
  ctn_node w = input(g, {2, 3});
  CTN_ASSERT_OK(ctn_matmul(g, s, w, 0, 1, &m));  // [5,4,3] x [3,2]^T... w is [2,3] transposed -> [3,2]
  EXPECT_EQ(shape_of(g, m), (std::vector<int64_t>{5, 4, 2}));
  int32_t axes[2] = {0, -1};
  ctn_node r;
  CTN_ASSERT_OK(ctn_sum(g, m, 2, axes, 1, &r));
  EXPECT_EQ(shape_of(g, r), (std::vector<int64_t>{1, 4, 1}));
  CTN_ASSERT_OK(ctn_mean(g, m, 2, axes, 0, &r));
  EXPECT_EQ(shape_of(g, r), (std::vector<int64_t>{4}));
  int64_t rs[2] = {-1, 2};
  CTN_ASSERT_OK(ctn_reshape(g, m, 2, rs, &r));
  EXPECT_EQ(shape_of(g, r), (std::vector<int64_t>{20, 2}));
  ctn_node sl;
  CTN_ASSERT_OK(ctn_slice(g, m, 1, -3, 100, 2, &sl));
  EXPECT_EQ(shape_of(g, sl), (std::vector<int64_t>{5, 2, 2}));
  ctn_node parts[2] = {m, m}, cat;
  CTN_ASSERT_OK(ctn_concat(g, 2, parts, -1, &cat));
  EXPECT_EQ(shape_of(g, cat), (std::vector<int64_t>{5, 4, 4}));
  ctn_node cmp;
  CTN_ASSERT_OK(ctn_compare(g, "gt", m, m, &cmp));
  ctn_dtype dt;
  ctn_node_info(g, cmp, &dt, nullptr, nullptr);
  EXPECT_EQ(dt, CTN_BOOL);
  ctn_graph_release(g);
}

TEST(Graph, BadCallsNameTheOpAndOperands) {
  Ctx c;
  ctn_graph *g;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  ctn_node a = input(g, {2, 3}), b = input(g, {4, 5}), d = input(g, {2, 3}, CTN_F64), out = 12345;
  EXPECT_EQ(ctn_matmul(g, a, b, 0, 0, &out), CTN_ERR_SHAPE);
  std::string m = ctn_last_error();
  EXPECT_NE(m.find("matmul"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  EXPECT_EQ(out, 12345u);  // untouched on error
  EXPECT_EQ(ctn_add(g, a, d, &out), CTN_ERR_DTYPE);
  m = ctn_last_error();
  EXPECT_NE(m.find("add"), std::string::npos) << m;
  EXPECT_NE(m.find("f64"), std::string::npos) << m;
  EXPECT_EQ(ctn_add(g, a, b, &out), CTN_ERR_SHAPE);
  int32_t ax = 5;
  EXPECT_EQ(ctn_sum(g, a, 1, &ax, 0, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("axis 5"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_add(g, a, 999, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("node 999"), std::string::npos);
  EXPECT_EQ(ctn_op(g, "no_such_op", 1, &a, nullptr, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("no_such_op"), std::string::npos);
  EXPECT_EQ(ctn_op(g, "add", 1, &a, nullptr, &out), CTN_ERR_INVALID_ARGUMENT);  // arity
  EXPECT_EQ(ctn_compare(g, "approx", a, a, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_clamp(g, a, 1.0, 0.0, &out), CTN_ERR_INVALID_ARGUMENT);
  ctn_node lbl = input(g, {2}, CTN_F32);
  EXPECT_EQ(ctn_cross_entropy(g, a, lbl, &out), CTN_ERR_DTYPE);
  EXPECT_EQ(out, 12345u);
  ctn_graph_release(g);
}

TEST(Graph, LossMustBeScalarForGrad) {
  Ctx c;
  ctn_graph *g;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  ctn_node a = input(g, {2, 3}), out;
  EXPECT_EQ(ctn_grad(g, a, 1, &a, &out), CTN_ERR_SHAPE);
  EXPECT_NE(std::string(ctn_last_error()).find("one element"), std::string::npos);
  ctn_graph_release(g);
}

TEST(Graph, DotExportListsNodesAndEdges) {
  Ctx c;
  ctn_graph *g;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  ctn_node a = input(g, {2}), r, l, gr;
  CTN_ASSERT_OK(ctn_relu(g, a, &r));
  CTN_ASSERT_OK(ctn_sum(g, r, 0, nullptr, 0, &l));
  CTN_ASSERT_OK(ctn_grad(g, l, 1, &a, &gr));
  const char *dot = nullptr;
  CTN_ASSERT_OK(ctn_graph_to_dot(g, &dot));
  std::string s = dot;
  EXPECT_NE(s.find("digraph"), std::string::npos);
  EXPECT_NE(s.find("relu_grad"), std::string::npos);
  EXPECT_NE(s.find("n0 -> n1"), std::string::npos);
  ctn_graph_release(g);
}

// Composite ops (ops.h): ctn_op adds the parts, never a node of the composite's own name; bad
// calls name the composite and leave the graph as it was.
TEST(Graph, CompositeOpsExpandIntoTheirParts) {
  Ctx c;
  ctn_graph *g;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  ctn_node x = input(g, {2, 3}), y = CTN_NODE_NONE;
  uint32_t before = 0, after = 0;
  CTN_ASSERT_OK(ctn_graph_node_count(g, &before));
  CTN_ASSERT_OK(ctn_op(g, CTN_OP_SOFTSIGN, 1, &x, nullptr, &y));
  CTN_ASSERT_OK(ctn_graph_node_count(g, &after));
  EXPECT_GT(after, before + 1) << "a composite adds its parts";
  EXPECT_EQ(shape_of(g, y), (std::vector<int64_t>{2, 3}));
  const char *dot = nullptr;
  CTN_ASSERT_OK(ctn_graph_to_dot(g, &dot));
  EXPECT_EQ(std::string(dot).find(CTN_OP_SOFTSIGN), std::string::npos) << dot;

  ctn_node xi = input(g, {4}, CTN_I32), out = 777;
  CTN_ASSERT_OK(ctn_graph_node_count(g, &before));
  EXPECT_EQ(ctn_op(g, CTN_OP_SOFTSIGN, 1, &xi, nullptr, &out), CTN_ERR_DTYPE);
  std::string m = ctn_last_error();
  EXPECT_NE(m.find(CTN_OP_SOFTSIGN), std::string::npos) << m;
  EXPECT_NE(m.find("i32"), std::string::npos) << m;
  EXPECT_EQ(out, 777u) << "a failed call writes no output";
  CTN_ASSERT_OK(ctn_graph_node_count(g, &after));
  EXPECT_EQ(after, before) << "a failed call adds no node";
  ctn_graph_release(g);
}
