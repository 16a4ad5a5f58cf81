// ONNX export (ctn_onnx_export, abi/chutney/onnx.h): a CNN inference graph (conv, batch norm,
// pooling, linear, softmax...) and a graph of the elementwise/shape ops export, re-import with
// ctn_onnx_load and give the original's outputs; an imported model exports back and re-imports
// with bit-identical outputs; trained values come from the plan; ops without an exporter,
// assignments and bad arguments are refused. tools/test.d/40-onnx.sh runs an exported trained
// CNN in onnxruntime (tests/onnx/export_ort.py).
#include <chutney/checkpoint.h>
#include <chutney/nn.h>
#include <chutney/onnx.h>
#include <gtest/gtest.h>

#include "test_helpers.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Graph {
  ctn_graph *g = nullptr;
  ctn_model *m = nullptr;
  ctn_node x{};
  std::vector<ctn_node> outs;
  ~Graph() {
    ctn_model_release(m);
    ctn_graph_release(g);
  }
};

// Inference CNN: conv -> batch norm (running statistics) -> relu -> max pool -> avg pool ->
// flatten -> linear -> (softmax, log_softmax).
void build_cnn(ctn_context *ctx, Graph &t) {
  ASSERT_EQ(ctn_graph_create(ctx, 0, &t.g), CTN_OK);
  ASSERT_EQ(ctn_model_create(t.g, CTN_F32, 3, &t.m), CTN_OK);
  ASSERT_EQ(ctn_model_set_training(t.m, 0), CTN_OK);
  int64_t xs[4] = {2, 2, 8, 8};
  ASSERT_EQ(ctn_input(t.g, "image", CTN_F32, 4, xs, &t.x), CTN_OK);
  ctn_node h, logits, sm, lsm;
  ASSERT_EQ(ctn_nn_conv2d(t.m, t.x, 2, 4, 3, 1, 1, &h), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_nn_batch_norm(t.m, h, 4, 0.1, 1e-5, &h), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_nn_relu(t.m, h, &h), CTN_OK);
  ASSERT_EQ(ctn_nn_max_pool2d(t.m, h, 2, 2, &h), CTN_OK);
  ASSERT_EQ(ctn_avg_pool2d(t.g, h, 2, 2, 1, 1, 0, 0, 1, &h), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_nn_flatten(t.m, h, &h), CTN_OK);
  ASSERT_EQ(ctn_nn_linear(t.m, h, 36, 5, 1, &logits), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_softmax(t.g, logits, 1, &sm), CTN_OK);
  ASSERT_EQ(ctn_log_softmax(t.g, logits, -1, &lsm), CTN_OK);
  t.outs = {logits, sm, lsm};
}

// Elementwise, comparison, reduction and shape ops on x [3, 4].
void build_basic(ctn_context *ctx, Graph &t) {
  ASSERT_EQ(ctn_graph_create(ctx, 0, &t.g), CTN_OK);
  int64_t xs[2] = {3, 4};
  ASSERT_EQ(ctn_input(t.g, "x", CTN_F32, 2, xs, &t.x), CTN_OK);
  ctn_tensor *w0 = make_f32({4, 3}, {0.5f, -1, 2, 1, 0.25f, -0.5f, 3, 1, -2, 0.1f, 0.2f, 0.3f});
  ctn_node w, a, b, c, d, e, f, k, sl, cat, tr, mm, red, mx, cmp, sel, one, cl, lk, bc, rs, cast;
  ASSERT_EQ(ctn_variable(t.g, "w", w0, &w), CTN_OK);
  ctn_tensor_release(w0);
  ASSERT_EQ(ctn_scalar(t.g, CTN_F32, 1.5, &one), CTN_OK);
  ASSERT_EQ(ctn_mul(t.g, t.x, one, &a), CTN_OK);
  ASSERT_EQ(ctn_exp(t.g, a, &b), CTN_OK);
  ASSERT_EQ(ctn_tanh(t.g, b, &c), CTN_OK);
  ASSERT_EQ(ctn_sigmoid(t.g, t.x, &d), CTN_OK);
  ASSERT_EQ(ctn_sub(t.g, c, d, &e), CTN_OK);
  ASSERT_EQ(ctn_abs(t.g, e, &f), CTN_OK);
  ASSERT_EQ(ctn_sqrt(t.g, f, &k), CTN_OK);
  ASSERT_EQ(ctn_div(t.g, k, one, &k), CTN_OK);
  ASSERT_EQ(ctn_matmul(t.g, k, w, 0, 0, &mm), CTN_OK);         // [3, 3]
  ASSERT_EQ(ctn_matmul(t.g, w, k, 1, 1, &tr), CTN_OK);         // [3, 3], transposes
  ASSERT_EQ(ctn_slice(t.g, t.x, 1, 1, 4, 2, &sl), CTN_OK) << ctn_last_error();  // columns 1, 3
  ASSERT_EQ(ctn_concat(t.g, 2, std::vector<ctn_node>{mm, tr}.data(), 1, &cat), CTN_OK);  // [3, 6]
  int32_t ax[1] = {1};
  ASSERT_EQ(ctn_sum(t.g, cat, 1, ax, 1, &red), CTN_OK);        // [3, 1]
  ASSERT_EQ(ctn_max(t.g, cat, 1, ax, 0, &mx), CTN_OK);         // [3]
  ASSERT_EQ(ctn_compare(t.g, "gt", cat, red, &cmp), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_where(t.g, cmp, cat, red, &sel), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_clamp(t.g, sel, -2, 2, &cl), CTN_OK);
  ASSERT_EQ(ctn_leaky_relu(t.g, cl, 0.2, &lk), CTN_OK);
  int64_t bs[3] = {2, 3, 6}, rss[2] = {6, 6};
  ASSERT_EQ(ctn_broadcast_to(t.g, lk, 3, bs, &bc), CTN_OK);
  ASSERT_EQ(ctn_reshape(t.g, bc, 2, rss, &rs), CTN_OK);
  ASSERT_EQ(ctn_cast(t.g, cmp, CTN_F32, &cast), CTN_OK);
  ctn_node mean, perm;
  ASSERT_EQ(ctn_mean(t.g, rs, 0, nullptr, 0, &mean), CTN_OK);
  ASSERT_EQ(ctn_transpose(t.g, sl, &perm), CTN_OK);
  t.outs = {rs, mx, cast, mean, perm};
}

// Runs outputs of g fed with x (deterministic values) and returns them.
std::vector<std::vector<float>> run(ctn_graph *g, ctn_node x, const std::vector<ctn_node> &outs,
                                    const std::vector<int64_t> &shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  std::vector<float> xv(n);
  for (size_t i = 0; i < n; ++i) xv[i] = std::sin(static_cast<float>(i) * 0.37f) * 2.0f;
  ctn_tensor *xt = make_f32(shape, xv);
  auto r = run_once(g, outs, {x}, {xt});
  ctn_tensor_release(xt);
  return r;
}

struct Imported {
  ctn_graph *g = nullptr;
  ctn_onnx_model *m = nullptr;
  ctn_node x = CTN_NODE_NONE;
  std::vector<ctn_node> outs;
  std::vector<std::string> names;
  ~Imported() {
    ctn_onnx_model_release(m);
    ctn_graph_release(g);
  }
};

void import(ctn_context *ctx, const std::string &path, Imported &im) {
  ASSERT_EQ(ctn_onnx_load(ctx, path.c_str(), nullptr, &im.g, &im.m), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_onnx_model_entry(im.m, CTN_ONNX_INPUTS, 0, nullptr, &im.x), CTN_OK);
  uint32_t n = 0;
  ASSERT_EQ(ctn_onnx_model_count(im.m, CTN_ONNX_OUTPUTS, &n), CTN_OK);
  for (uint32_t i = 0; i < n; ++i) {
    const char *name = nullptr;
    ctn_node node{};
    ASSERT_EQ(ctn_onnx_model_entry(im.m, CTN_ONNX_OUTPUTS, i, &name, &node), CTN_OK);
    im.outs.push_back(node);
    im.names.push_back(name);
  }
}

void expect_close(const std::vector<std::vector<float>> &a, const std::vector<std::vector<float>> &b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].size(), b[k].size()) << "output " << k;
    for (size_t i = 0; i < a[k].size(); ++i)
      EXPECT_NEAR(a[k][i], b[k][i], tol * (1 + std::fabs(a[k][i]))) << "output " << k << " element " << i;
  }
}

}  // namespace

TEST(OnnxExport, CnnAndBasicOpsReimportWithTheOriginalsOutputs) {
  Ctx c;
  // tests/onnx/export_ort.py sets CTN_ONNX_EXPORT_KEEP to a folder to run the models in
  // onnxruntime afterwards.
  const char *keep = std::getenv("CTN_ONNX_EXPORT_KEEP");
  std::string dir = keep && *keep ? keep : scratch_dir("ctn_onnx_export");
  for (int which = 0; which < 2; ++which) {
    Graph t;
    std::vector<int64_t> shape = which == 0 ? std::vector<int64_t>{2, 2, 8, 8} : std::vector<int64_t>{3, 4};
    if (which == 0) build_cnn(c.ctx, t);
    else build_basic(c.ctx, t);
    if (HasFatalFailure()) return;
    std::string path = dir + "/m" + std::to_string(which) + ".onnx";
    CTN_ASSERT_OK(ctn_onnx_export(t.g, nullptr, static_cast<uint32_t>(t.outs.size()), t.outs.data(), nullptr, path.c_str()));
    Imported im;
    import(c.ctx, path, im);
    if (HasFatalFailure()) return;
    EXPECT_EQ(im.names[0], "output0");
    expect_close(run(t.g, t.x, t.outs, shape), run(im.g, im.x, im.outs, shape), 1e-5f);

    // The imported model exports back; its re-import computes exactly what the first import did.
    std::string again = dir + "/again" + std::to_string(which) + ".onnx";
    std::vector<const char *> names;
    for (const std::string &s : im.names) names.push_back(s.c_str());
    CTN_ASSERT_OK(ctn_onnx_export(im.g, nullptr, static_cast<uint32_t>(im.outs.size()), im.outs.data(), names.data(),
                                  again.c_str()));
    Imported im2;
    import(c.ctx, again, im2);
    if (HasFatalFailure()) return;
    EXPECT_EQ(im2.names, im.names);
    EXPECT_EQ(run(im.g, im.x, im.outs, shape), run(im2.g, im2.x, im2.outs, shape));
  }
}

TEST(OnnxExport, VariablesTakeThePlansValues) {
  Ctx c;
  std::string dir = scratch_dir("ctn_onnx_export");
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  int64_t xs[1] = {3};
  ctn_node x, w, y;
  ctn_tensor *w0 = make_f32({3}, {1, 2, 3}), *w1 = make_f32({3}, {-4, 5, 0.5f});
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F32, 1, xs, &x));
  CTN_ASSERT_OK(ctn_variable(g, "w", w0, &w));
  CTN_ASSERT_OK(ctn_mul(g, x, w, &y));
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &y, nullptr, &p));
  CTN_ASSERT_OK(ctn_plan_variable_write(p, w, w1));
  std::string with_plan = dir + "/p.onnx", without = dir + "/i.onnx";
  CTN_ASSERT_OK(ctn_onnx_export(g, p, 1, &y, nullptr, with_plan.c_str()));
  CTN_ASSERT_OK(ctn_onnx_export(g, nullptr, 1, &y, nullptr, without.c_str()));
  for (const std::string &path : {with_plan, without}) {
    Imported im;
    import(c.ctx, path, im);
    if (HasFatalFailure()) break;
    auto got = run(im.g, im.x, im.outs, {3});
    std::vector<float> xv = {0.0f, std::sin(0.37f) * 2, std::sin(0.74f) * 2};
    std::vector<float> wv = path == with_plan ? std::vector<float>{-4, 5, 0.5f} : std::vector<float>{1, 2, 3};
    for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(got[0][static_cast<size_t>(i)], xv[static_cast<size_t>(i)] * wv[static_cast<size_t>(i)]) << path;
  }
  ctn_plan_release(p);
  ctn_tensor_release(w0);
  ctn_tensor_release(w1);
  ctn_graph_release(g);
}

TEST(OnnxExport, UnsupportedOpsAssignmentsAndBadArgumentsAreRefused) {
  Ctx c;
  std::string dir = scratch_dir("ctn_onnx_export"), path = dir + "/x.onnx";
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  int64_t xs[2] = {2, 3}, ls[1] = {2};
  ctn_node x, labels, ce, gl, w, up, out_dup[2];
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F32, 2, xs, &x));
  CTN_ASSERT_OK(ctn_input(g, "labels", CTN_I32, 1, ls, &labels));
  CTN_ASSERT_OK(ctn_cross_entropy(g, x, labels, &ce));
  EXPECT_EQ(ctn_onnx_export(g, nullptr, 1, &ce, nullptr, path.c_str()), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("cross_entropy"), std::string::npos) << ctn_last_error();
  CTN_ASSERT_OK(ctn_gelu(g, x, &gl));
  EXPECT_EQ(ctn_onnx_export(g, nullptr, 1, &gl, nullptr, path.c_str()), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("\"gelu\""), std::string::npos) << ctn_last_error();
  ctn_tensor *w0 = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  CTN_ASSERT_OK(ctn_variable(g, "w", w0, &w));
  ctn_tensor_release(w0);
  CTN_ASSERT_OK(ctn_assign(g, w, x, &up));
  EXPECT_EQ(ctn_onnx_export(g, nullptr, 1, &up, nullptr, path.c_str()), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("assignment"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_onnx_export(g, nullptr, 0, nullptr, nullptr, path.c_str()), CTN_ERR_INVALID_ARGUMENT);
  out_dup[0] = out_dup[1] = x;
  const char *dup[2] = {"y", "y"}, *clash[1] = {"w"};
  EXPECT_EQ(ctn_onnx_export(g, nullptr, 2, out_dup, dup, path.c_str()), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_onnx_export(g, nullptr, 1, &w, clash, path.c_str()), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(access(path.c_str(), F_OK), -1);  // nothing was written by the failed calls
  ctn_graph *eg = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, CTN_GRAPH_EAGER, &eg));
  ctn_node s;
  CTN_ASSERT_OK(ctn_scalar(eg, CTN_F32, 1, &s));
  EXPECT_EQ(ctn_onnx_export(eg, nullptr, 1, &s, nullptr, path.c_str()), CTN_ERR_STATE);
  EXPECT_EQ(ctn_onnx_export(g, nullptr, 1, &x, nullptr, (dir + "/no/such/dir.onnx").c_str()), CTN_ERR_IO);
  ctn_graph_release(eg);
  ctn_graph_release(g);
}
