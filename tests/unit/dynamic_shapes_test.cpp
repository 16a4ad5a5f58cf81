// Data-dependent output shapes (since 1.6, docs/EXECUTION.md "Data-dependent shapes"): the ops
// nonzero, compress, unique, topk and non_max_suppression through the C API, in compiled plans
// (run in stages, what follows specialised to the shape produced) and in eager graphs.
#include <chutney/ops.h>

#include "test_helpers.h"

#include <cstring>
#include <vector>

namespace {

struct Graph {
  ctn_graph *g = nullptr;
  explicit Graph(ctn_context *ctx, uint32_t flags = 0) { EXPECT_EQ(ctn_graph_create(ctx, flags, &g), CTN_OK); }
  ~Graph() { ctn_graph_release(g); }
};

std::vector<int64_t> read_i64(const ctn_tensor *t) {
  int64_t n = 0;
  ctn_tensor_numel(t, &n);
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (n && ctn_tensor_read(t, v.data(), v.size() * 8) != CTN_OK) ADD_FAILURE() << ctn_last_error();
  return v;
}

ctn_node op(ctn_graph *g, const char *name, std::vector<ctn_node> in, std::vector<int64_t> ints = {}) {
  ctn_attrs a{};
  for (int64_t v : ints) a.i[a.ni++] = v;
  ctn_node out = CTN_NODE_NONE;
  EXPECT_EQ(ctn_op(g, name, static_cast<uint32_t>(in.size()), in.data(), &a, &out), CTN_OK) << ctn_last_error();
  return out;
}

// Runs `p` on one f32 input, returning output i (created by ctn_plan_output_create each time).
struct Runner {
  ctn_plan *p = nullptr;
  ~Runner() { ctn_plan_release(p); }
  std::vector<ctn_tensor *> run(ctn_node x, ctn_tensor *xv, uint32_t n_out) {
    std::vector<ctn_tensor *> outs(n_out, nullptr);
    for (uint32_t i = 0; i < n_out; ++i) EXPECT_EQ(ctn_plan_output_create(p, i, &outs[i]), CTN_OK) << ctn_last_error();
    const ctn_tensor *feeds[1] = {xv};
    EXPECT_EQ(ctn_plan_run(p, 1, &x, feeds, n_out, outs.data()), CTN_OK) << ctn_last_error();
    return outs;
  }
};

TEST(DynamicShapes, NonzeroGatherAddChainRunTwiceWithDifferentShapes) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t xs[1] = {6};
  ctn_node x = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "x", CTN_F32, 1, xs, &x));
  ctn_node nz = op(g.g, CTN_OP_NONZERO, {x});  // i64 [1, count]
  // The gather: rows of a [6, 2] table at the indices, then + 100: [1, count, 2].
  ctn_tensor *tv = make_f32({6, 2}, {0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51});
  ctn_node table = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_constant(g.g, tv, &table));
  ctn_tensor_release(tv);
  ctn_node rows = op(g.g, "embedding", {table, nz});
  ctn_tensor *hv = make_f32({}, {100});
  ctn_node hundred = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_constant(g.g, hv, &hundred));
  ctn_tensor_release(hv);
  ctn_node y = op(g.g, "add", {rows, hundred});
  ctn_node outs[2] = {y, nz};
  Runner r;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 2, outs, nullptr, &r.p));
  ctn_tensor *bound = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(r.p, 0, &bound));
  EXPECT_EQ(shape_of(bound), (std::vector<int64_t>{1, 6, 2}));  // the upper bound
  ctn_tensor_release(bound);

  ctn_tensor *x1 = make_f32({6}, {0, 3, 0, 0, -1, 0});
  std::vector<ctn_tensor *> o1 = r.run(x, x1, 2);
  EXPECT_EQ(shape_of(o1[0]), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(read_f32(o1[0]), (std::vector<float>{110, 111, 140, 141}));
  EXPECT_EQ(read_i64(o1[1]), (std::vector<int64_t>{1, 4}));

  ctn_tensor *x2 = make_f32({6}, {1, 1, 0, 1, 0, 2});
  std::vector<ctn_tensor *> o2 = r.run(x, x2, 2);
  EXPECT_EQ(shape_of(o2[0]), (std::vector<int64_t>{1, 4, 2}));
  EXPECT_EQ(read_f32(o2[0]), (std::vector<float>{100, 101, 110, 111, 130, 131, 150, 151}));

  // The first shape again (its stage plan is cached), into the outputs of the second run.
  const ctn_tensor *feeds[1] = {x1};
  CTN_ASSERT_OK(ctn_plan_run(r.p, 1, &x, feeds, 2, o2.data()));
  EXPECT_EQ(shape_of(o2[0]), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(read_f32(o2[0]), (std::vector<float>{110, 111, 140, 141}));

  // No non-zero element: an empty result, and what follows is empty too.
  ctn_tensor *x3 = make_f32({6}, {0, 0, 0, 0, 0, 0});
  std::vector<ctn_tensor *> o3 = r.run(x, x3, 2);
  EXPECT_EQ(shape_of(o3[0]), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(shape_of(o3[1]), (std::vector<int64_t>{1, 0}));
  for (ctn_tensor *t : {x1, x2, x3}) ctn_tensor_release(t);
  for (auto *v : {&o1, &o2, &o3})
    for (ctn_tensor *t : *v) ctn_tensor_release(t);
}

TEST(DynamicShapes, NonzeroOf2dRowMajor) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t xs[2] = {2, 3};
  ctn_node x = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "x", CTN_F32, 2, xs, &x));
  ctn_node nz = op(g.g, CTN_OP_NONZERO, {x});
  Runner r;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 1, &nz, nullptr, &r.p));
  ctn_tensor *xv = make_f32({2, 3}, {0, 5, 6, 7, 0, 0});
  std::vector<ctn_tensor *> o = r.run(x, xv, 1);
  EXPECT_EQ(shape_of(o[0]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read_i64(o[0]), (std::vector<int64_t>{0, 0, 1, 1, 2, 0}));
  ctn_tensor_release(xv);
  ctn_tensor_release(o[0]);
}

TEST(DynamicShapes, UniqueSortedAndUnsortedOutputs) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t xs[1] = {6};
  ctn_node x = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "x", CTN_F32, 1, xs, &x));
  std::vector<ctn_node> outs;
  for (int64_t sorted : {1, 0})
    for (int64_t k = 0; k < 4; ++k) outs.push_back(op(g.g, CTN_OP_UNIQUE, {x}, {-1, sorted, k}));
  Runner r;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 8, outs.data(), nullptr, &r.p));
  ctn_tensor *xv = make_f32({6}, {2, 1, 1, 3, 4, 3});
  std::vector<ctn_tensor *> o = r.run(x, xv, 8);
  EXPECT_EQ(read_f32(o[0]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(read_i64(o[1]), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(read_i64(o[2]), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(read_i64(o[3]), (std::vector<int64_t>{2, 1, 2, 1}));
  EXPECT_EQ(read_f32(o[4]), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(read_i64(o[5]), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(read_i64(o[6]), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(read_i64(o[7]), (std::vector<int64_t>{1, 2, 2, 1}));
  ctn_tensor_release(xv);
  for (ctn_tensor *t : o) ctn_tensor_release(t);
}

TEST(DynamicShapes, TopkWithKFedAtRunTime) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t xs[2] = {2, 4}, ks[1] = {1};
  ctn_node x = CTN_NODE_NONE, k = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "x", CTN_F32, 2, xs, &x));
  CTN_ASSERT_OK(ctn_input(g.g, "k", CTN_I64, 1, ks, &k));
  ctn_node outs[2] = {op(g.g, CTN_OP_TOPK, {x, k}, {1, 1, 1, 0}), op(g.g, CTN_OP_TOPK, {x, k}, {-1, 0, 1, 1})};
  Runner r;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 2, outs, nullptr, &r.p));
  ctn_tensor *xv = make_f32({2, 4}, {3, 1, 4, 1, 5, 9, 2, 6});
  for (int64_t kk : {2, 3}) {
    ctn_tensor *kv = nullptr;
    CTN_ASSERT_OK(ctn_tensor_create(CTN_I64, 1, ks, &kk, &kv));
    ctn_tensor *o[2] = {nullptr, nullptr};
    for (uint32_t i = 0; i < 2; ++i) CTN_ASSERT_OK(ctn_plan_output_create(r.p, i, &o[i]));
    const ctn_tensor *fv[2] = {xv, kv};
    const ctn_node fn[2] = {x, k};
    CTN_ASSERT_OK(ctn_plan_run(r.p, 2, fn, fv, 2, o));
    EXPECT_EQ(shape_of(o[0]), (std::vector<int64_t>{2, kk}));
    if (kk == 2) {
      EXPECT_EQ(read_f32(o[0]), (std::vector<float>{4, 3, 9, 6}));
      EXPECT_EQ(read_i64(o[1]), (std::vector<int64_t>{1, 3, 2, 0}));  // smallest; the tie 1, 1: lower index first
    } else {
      EXPECT_EQ(read_f32(o[0]), (std::vector<float>{4, 3, 1, 9, 6, 5}));
    }
    for (ctn_tensor *t : o) ctn_tensor_release(t);
    ctn_tensor_release(kv);
  }
  // k past the axis: a clear error naming the op.
  int64_t big = 5;
  ctn_tensor *kv = nullptr, *o = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_I64, 1, ks, &big, &kv));
  CTN_ASSERT_OK(ctn_plan_output_create(r.p, 0, &o));
  const ctn_tensor *fv[2] = {xv, kv};
  const ctn_node fn[2] = {x, k};
  EXPECT_EQ(ctn_plan_run(r.p, 2, fn, fv, 1, &o), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ctn_last_error(), "topk: k is 5"), nullptr) << ctn_last_error();
  ctn_tensor_release(o);
  ctn_tensor_release(kv);
  ctn_tensor_release(xv);
}

TEST(DynamicShapes, CompressAlongAnAxisThenMatmul) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t xs[2] = {3, 2}, cs[1] = {3};
  ctn_node x = CTN_NODE_NONE, cond = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "x", CTN_F32, 2, xs, &x));
  CTN_ASSERT_OK(ctn_input(g.g, "cond", CTN_BOOL, 1, cs, &cond));
  ctn_node sel = op(g.g, CTN_OP_COMPRESS, {x, cond}, {0});  // [count, 2]
  ctn_tensor *wv = make_f32({2, 1}, {1, 10});
  ctn_node w = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_constant(g.g, wv, &w));
  ctn_tensor_release(wv);
  ctn_node y = op(g.g, "matmul", {sel, w}, {0, 0});
  Runner r;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 1, &y, nullptr, &r.p));
  ctn_tensor *xv = make_f32({3, 2}, {1, 2, 3, 4, 5, 6});
  unsigned char cv[3] = {1, 0, 1};
  ctn_tensor *ct = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_BOOL, 1, cs, cv, &ct));
  ctn_tensor *o = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(r.p, 0, &o));
  const ctn_tensor *fv[2] = {xv, ct};
  const ctn_node fn[2] = {x, cond};
  CTN_ASSERT_OK(ctn_plan_run(r.p, 2, fn, fv, 1, &o));
  EXPECT_EQ(shape_of(o), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(read_f32(o), (std::vector<float>{21, 65}));
  for (ctn_tensor *t : {xv, ct, o}) ctn_tensor_release(t);
}

TEST(DynamicShapes, NonMaxSuppressionKeepsTheBestOfOverlappingBoxes) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t bs[3] = {1, 3, 4}, ss[3] = {1, 1, 3}, one[1] = {1};
  ctn_node b = CTN_NODE_NONE, s = CTN_NODE_NONE, mx = CTN_NODE_NONE, iou = CTN_NODE_NONE, thr = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "boxes", CTN_F32, 3, bs, &b));
  CTN_ASSERT_OK(ctn_input(g.g, "scores", CTN_F32, 3, ss, &s));
  CTN_ASSERT_OK(ctn_input(g.g, "max", CTN_I64, 1, one, &mx));
  CTN_ASSERT_OK(ctn_input(g.g, "iou", CTN_F32, 1, one, &iou));
  CTN_ASSERT_OK(ctn_input(g.g, "thr", CTN_F32, 1, one, &thr));
  ctn_node y = op(g.g, CTN_OP_NON_MAX_SUPPRESSION, {b, s, mx, iou, thr}, {0});
  Runner r;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 1, &y, nullptr, &r.p));
  // Boxes 0 and 1 overlap (IoU 0.81), box 2 is apart; box 1 scores highest.
  ctn_tensor *bv = make_f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 5, 5, 6, 6});
  ctn_tensor *sv = make_f32({1, 1, 3}, {0.8f, 0.9f, 0.7f});
  int64_t m = 10;
  ctn_tensor *mv = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_I64, 1, one, &m, &mv));
  ctn_tensor *iv = make_f32({1}, {0.5f}), *tv = make_f32({1}, {0.0f});
  ctn_tensor *o = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(r.p, 0, &o));
  const ctn_tensor *fv[5] = {bv, sv, mv, iv, tv};
  const ctn_node fn[5] = {b, s, mx, iou, thr};
  CTN_ASSERT_OK(ctn_plan_run(r.p, 5, fn, fv, 1, &o));
  EXPECT_EQ(shape_of(o), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read_i64(o), (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
  for (ctn_tensor *t : {bv, sv, mv, iv, tv, o}) ctn_tensor_release(t);
}

TEST(DynamicShapes, EagerGraphsTakeTheActualShape) {
  Ctx c;
  Graph g(c.ctx, CTN_GRAPH_EAGER);
  ctn_tensor *xv = make_f32({5}, {0, 2, 0, 2, 7});
  ctn_node x = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_constant(g.g, xv, &x));
  ctn_node u = op(g.g, CTN_OP_UNIQUE, {x}, {-1, 1, 0});
  ctn_node d = op(g.g, "add", {u, u});  // inferred from the actual shape [3]
  ctn_dtype dt{};
  uint32_t nd = 0;
  int64_t dims[CTN_MAX_DIMS];
  CTN_ASSERT_OK(ctn_node_info(g.g, d, &dt, &nd, dims));
  ASSERT_EQ(nd, 1u);
  EXPECT_EQ(dims[0], 3);
  ctn_tensor *v = nullptr;
  CTN_ASSERT_OK(ctn_graph_value(g.g, d, &v));
  EXPECT_EQ(read_f32(v), (std::vector<float>{0, 4, 14}));
  ctn_tensor_release(v);
  ctn_tensor_release(xv);
}

TEST(DynamicShapes, BadUsesFailWithAMessage) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t xs[2] = {2, 3};
  ctn_node x = CTN_NODE_NONE, out = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "x", CTN_F32, 2, xs, &x));
  ctn_attrs a{};
  a.ni = 3;
  a.i[0] = -1;
  a.i[2] = 7;  // no such output
  EXPECT_EQ(ctn_op(g.g, CTN_OP_UNIQUE, 1, &x, &a, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ctn_last_error(), "unique: output i[2] must be 0..3"), nullptr) << ctn_last_error();
  ctn_node in2[2] = {x, x};
  a = ctn_attrs{};
  a.ni = 4;
  EXPECT_EQ(ctn_op(g.g, CTN_OP_TOPK, 2, in2, &a, &out), CTN_ERR_SHAPE);  // k must be one integer
  EXPECT_NE(std::strstr(ctn_last_error(), "topk: k must be"), nullptr) << ctn_last_error();
  const int64_t cs[1] = {2};
  ctn_node cond = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "cond", CTN_BOOL, 1, cs, &cond));
  ctn_node cin[2] = {x, cond};
  a = ctn_attrs{};
  a.ni = 1;
  a.i[0] = -2;  // -1 is "flattened"; other negative axes are refused
  EXPECT_EQ(ctn_op(g.g, CTN_OP_COMPRESS, 2, cin, &a, &out), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ctn_last_error(), "compress: axis -2 must be -1"), nullptr) << ctn_last_error();
  // Not fed: the staged plan names the input.
  ctn_node nz = op(g.g, CTN_OP_NONZERO, {x});
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 1, &nz, nullptr, &p));
  ctn_tensor *o = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &o));
  EXPECT_EQ(ctn_plan_run(p, 0, nullptr, nullptr, 1, &o), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ctn_last_error(), "\"x\""), nullptr) << ctn_last_error();
  ctn_tensor_release(o);
  ctn_plan_release(p);
  // A plan that assigns a variable cannot be staged (no training through these ops).
  ctn_tensor *init = make_f32({2, 3}, {1, 0, 1, 0, 1, 0});
  ctn_node v = CTN_NODE_NONE, v2 = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_variable(g.g, "v", init, &v));
  CTN_ASSERT_OK(ctn_assign(g.g, v, op(g.g, "relu", {v}), &v2));
  ctn_node vz = op(g.g, CTN_OP_NONZERO, {v});
  p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g.g, 1, &vz, nullptr, &p), CTN_ERR_UNSUPPORTED);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::strstr(ctn_last_error(), "cannot assign variables"), nullptr) << ctn_last_error();
  ctn_tensor_release(init);
}


// Outputs that do not depend on the data-dependent op come from the first stage; an input fed
// straight through is an output too. Only plans over such ops are staged.
TEST(DynamicShapes, MixedOutputsAndOnlyThosePlansAreStaged) {
  Ctx c;
  Graph g(c.ctx);
  const int64_t xs[1] = {4};
  ctn_node x = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(g.g, "x", CTN_F32, 1, xs, &x));
  ctn_node r = op(g.g, "relu", {x});
  ctn_node u = op(g.g, CTN_OP_UNIQUE, {r}, {-1, 1, 0});
  ctn_node outs[3] = {u, r, x};
  Runner staged;
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 3, outs, nullptr, &staged.p));
  const char *text = nullptr;
  CTN_ASSERT_OK(ctn_plan_describe(staged.p, &text));
  EXPECT_NE(std::strstr(text, "staged plan"), nullptr) << text;
  ctn_tensor *xv = make_f32({4}, {-1, 2, -3, 2});
  std::vector<ctn_tensor *> o = staged.run(x, xv, 3);
  EXPECT_EQ(read_f32(o[0]), (std::vector<float>{0, 2}));
  EXPECT_EQ(read_f32(o[1]), (std::vector<float>{0, 2, 0, 2}));
  EXPECT_EQ(read_f32(o[2]), (std::vector<float>{-1, 2, -3, 2}));
  Runner plain;  // relu alone: an ordinary plan, whatever else the graph holds
  CTN_ASSERT_OK(ctn_plan_compile(g.g, 1, &r, nullptr, &plain.p));
  CTN_ASSERT_OK(ctn_plan_describe(plain.p, &text));
  EXPECT_EQ(std::strstr(text, "staged plan"), nullptr) << text;
  ctn_tensor_release(xv);
  for (ctn_tensor *t : o) ctn_tensor_release(t);
}

}  // namespace
