// Whole-graph files (ctn_graph_save / ctn_graph_load, abi/chutney/checkpoint.h): a trained CNN
// with its optimizer saved and reloaded trains on bit for bit like the original, node ids and
// names survive, and damaged or foreign files are refused with precise statuses.
#include <chutney/checkpoint.h>
#include <chutney/nn.h>
#include <gtest/gtest.h>

#include "test_helpers.h"

#include <cstring>
#include <unistd.h>
#include <string>
#include <vector>

namespace {

// A small CNN (conv, batch norm, relu, pool, flatten, linear) with cross-entropy and SGD with
// momentum, compiled for one training step that returns the loss and the logits.
struct Cnn {
  ctn_graph *g = nullptr;
  ctn_model *m = nullptr;
  ctn_plan *p = nullptr;
  ctn_node x{}, labels{}, logits{}, loss{}, step{}, lr{};
  explicit Cnn(ctn_context *ctx) {
    EXPECT_EQ(ctn_graph_create(ctx, 0, &g), CTN_OK);
    EXPECT_EQ(ctn_model_create(g, CTN_F32, 7, &m), CTN_OK);
    ctn_node h = image_classifier_stem(g, m, 4, 6, 3, &x, &labels);
    EXPECT_EQ(ctn_nn_flatten(m, h, &h), CTN_OK);
    EXPECT_EQ(ctn_nn_linear(m, h, 27, 5, 1, &logits), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_cross_entropy(g, logits, labels, &loss), CTN_OK) << ctn_last_error();
    uint32_t np = 0;
    const char *const *names = nullptr;
    const ctn_node *params = nullptr;
    EXPECT_EQ(ctn_model_variables(m, CTN_VAR_PARAMETER, &np, &names, &params), CTN_OK);
    std::vector<ctn_node> wrt(params, params + np), grads(np);
    EXPECT_EQ(ctn_grad(g, loss, np, wrt.data(), grads.data()), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_nn_sgd(m, grads.data(), 0.9, 0, 1e-4), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_model_step(m, &step), CTN_OK);
    EXPECT_EQ(ctn_model_lr(m, &lr), CTN_OK);
    compile();
  }
  void compile() {
    ctn_node outs[2] = {loss, logits};
    EXPECT_EQ(ctn_plan_compile(g, 2, outs, nullptr, &p), CTN_OK) << ctn_last_error();
  }
  ~Cnn() {
    ctn_plan_release(p);
    ctn_model_release(m);
    ctn_graph_release(g);
  }
};

// Runs one training step of plan `p` (over graph nodes with Cnn's ids) and returns the raw bytes
// of the loss and logits.
std::vector<char> train_step(ctn_plan *p, const Cnn &ids, int64_t step) {
  std::vector<float> xv(4 * 36);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37 + static_cast<size_t>(step) * 11) % 19) / 7.0f - 1.0f;
  int32_t lv[4] = {0, 3, 1, 4};
  int64_t xs[4] = {4, 1, 6, 6}, ls[1] = {4};
  ctn_tensor *xt = nullptr, *lt = nullptr, *st = nullptr, *rt = nullptr;
  float lrv = 0.05f;
  EXPECT_EQ(ctn_tensor_create(CTN_F32, 4, xs, xv.data(), &xt), CTN_OK);
  EXPECT_EQ(ctn_tensor_create(CTN_I32, 1, ls, lv, &lt), CTN_OK);
  EXPECT_EQ(ctn_tensor_create(CTN_I64, 0, nullptr, &step, &st), CTN_OK);
  EXPECT_EQ(ctn_tensor_create(CTN_F32, 0, nullptr, &lrv, &rt), CTN_OK);
  ctn_node feeds[4] = {ids.x, ids.labels, ids.step, ids.lr};
  const ctn_tensor *vals[4] = {xt, lt, st, rt};
  ctn_tensor *outs[2] = {};
  for (uint32_t i = 0; i < 2; ++i) EXPECT_EQ(ctn_plan_output_create(p, i, &outs[i]), CTN_OK);
  EXPECT_EQ(ctn_plan_run(p, 4, feeds, vals, 2, outs), CTN_OK) << ctn_last_error();
  std::vector<char> bytes(4 + 4 * 20);
  EXPECT_EQ(ctn_tensor_read(outs[0], bytes.data(), 4), CTN_OK);
  EXPECT_EQ(ctn_tensor_read(outs[1], bytes.data() + 4, 80), CTN_OK);
  for (ctn_tensor *t : {xt, lt, st, rt, outs[0], outs[1]}) ctn_tensor_release(t);
  return bytes;
}

struct Loaded {
  ctn_graph *g = nullptr;
  ctn_saved_graph *s = nullptr;
  ~Loaded() {
    ctn_saved_graph_release(s);
    ctn_graph_release(g);
  }
};

std::string saved_cnn(Ctx &c, const std::string &dir) {
  Cnn a(c.ctx);
  for (int64_t s = 1; s <= 3; ++s) train_step(a.p, a, s);
  std::string path = dir + "/cnn.ctn";
  ctn_node outs[2] = {a.loss, a.logits};
  const char *names[2] = {"loss", "logits"};
  EXPECT_EQ(ctn_graph_save(a.g, a.p, 2, outs, names, "{\"task\":\"test\"}", path.c_str()), CTN_OK) << ctn_last_error();
  return path;
}

// Rewrites the graph file's "chutney.graph" metadata through `edit` (a byte-level edit would
// mostly break the safetensors layer, which has its own tests).
void edit_graph(const std::string &path, const std::string &out, void (*edit)(std::string &)) {
  ctn_checkpoint *ck = nullptr;
  ASSERT_EQ(ctn_checkpoint_load(path.c_str(), &ck), CTN_OK);
  uint32_t n = 0;
  ASSERT_EQ(ctn_checkpoint_count(ck, &n), CTN_OK);
  std::vector<const char *> names(n);
  std::vector<ctn_tensor *> ts(n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(ctn_checkpoint_name(ck, i, &names[i]), CTN_OK);
    ASSERT_EQ(ctn_checkpoint_get(ck, names[i], &ts[i]), CTN_OK);
  }
  const char *graph = nullptr, *ver = nullptr;
  ASSERT_EQ(ctn_checkpoint_metadata_get(ck, "chutney.graph", &graph), CTN_OK);
  ASSERT_EQ(ctn_checkpoint_metadata_get(ck, "chutney.format_version", &ver), CTN_OK);
  std::string quoted;  // the graph JSON as a JSON string (it holds no control characters)
  for (const char *q = graph; *q; ++q) quoted += (*q == '"' || *q == '\\') ? std::string("\\") + *q : std::string(1, *q);
  std::string text = std::string("{\"chutney.format\":\"graph\",\"chutney.format_version\":\"") + ver + "\"," +
                     "\"chutney.graph\":\"" + quoted + "\"}";
  edit(text);
  std::vector<const ctn_tensor *> cts(ts.begin(), ts.end());
  EXPECT_EQ(ctn_checkpoint_save(out.c_str(), n, names.data(), cts.data(), text.c_str()), CTN_OK) << ctn_last_error();
  for (ctn_tensor *t : ts) ctn_tensor_release(t);
  ctn_checkpoint_release(ck);
}

void replace_first(std::string &s, const std::string &from, const std::string &to) {
  size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
}

}  // namespace

TEST(GraphFile, TrainedCnnReloadsAndTrainsOnBitForBit) {
  Ctx c;
  std::string dir = scratch_dir("ctn_graph_file");
  Cnn a(c.ctx);
  for (int64_t s = 1; s <= 3; ++s) train_step(a.p, a, s);
  std::string path = dir + "/cnn.ctn";
  ctn_node outs[2] = {a.loss, a.logits};
  CTN_ASSERT_OK(ctn_graph_save(a.g, a.p, 2, outs, nullptr, nullptr, path.c_str()));
  Loaded l;
  CTN_ASSERT_OK(ctn_graph_load(c.ctx, path.c_str(), &l.g, &l.s));
  uint32_t na = 0, nb = 0;
  CTN_ASSERT_OK(ctn_graph_node_count(a.g, &na));
  CTN_ASSERT_OK(ctn_graph_node_count(l.g, &nb));
  EXPECT_EQ(na, nb);
  ctn_plan *lp = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(l.g, 2, outs, nullptr, &lp));  // the original ids hold
  for (int64_t s = 4; s <= 7; ++s) {
    std::vector<char> want = train_step(a.p, a, s), got = train_step(lp, a, s);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size())) << "step " << s;
  }
  ctn_plan_release(lp);
}

TEST(GraphFile, ListsInputsOutputsVariablesAndMetadata) {
  Ctx c;
  std::string path = saved_cnn(c, scratch_dir("ctn_graph_file"));
  Loaded l;
  CTN_ASSERT_OK(ctn_graph_load(c.ctx, path.c_str(), &l.g, &l.s));
  uint32_t n = 0;
  const char *name = nullptr;
  ctn_node node = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_saved_graph_count(l.s, CTN_SAVED_INPUTS, &n));
  EXPECT_EQ(n, 4u);  // x, labels, step, lr
  CTN_ASSERT_OK(ctn_saved_graph_entry(l.s, CTN_SAVED_INPUTS, 0, &name, &node));
  EXPECT_STREQ(name, "x");
  EXPECT_EQ(node, 0u);
  CTN_ASSERT_OK(ctn_saved_graph_count(l.s, CTN_SAVED_OUTPUTS, &n));
  ASSERT_EQ(n, 2u);
  CTN_ASSERT_OK(ctn_saved_graph_entry(l.s, CTN_SAVED_OUTPUTS, 1, &name, &node));
  EXPECT_STREQ(name, "logits");
  CTN_ASSERT_OK(ctn_saved_graph_count(l.s, CTN_SAVED_VARIABLES, &n));
  EXPECT_GE(n, 8u);  // conv, bn (4), linear (2) + momentum
  EXPECT_EQ(ctn_saved_graph_entry(l.s, CTN_SAVED_OUTPUTS, 2, &name, &node), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_saved_graph_count(l.s, 9, &n), CTN_ERR_INVALID_ARGUMENT);
  const char *v = nullptr;
  CTN_ASSERT_OK(ctn_saved_graph_metadata_get(l.s, "task", &v));
  EXPECT_STREQ(v, "test");
  CTN_ASSERT_OK(ctn_saved_graph_metadata_get(l.s, "chutney.graph", &v));
  EXPECT_EQ(v, nullptr);
  // The file is also a checkpoint of the variables under their own names.
  ctn_checkpoint *ck = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(path.c_str(), &ck));
  ctn_dtype dt{};
  uint32_t nd = 0;
  EXPECT_EQ(ctn_checkpoint_info(ck, "fc1.weight", &dt, &nd, nullptr) == CTN_OK ||
                ctn_checkpoint_info(ck, "linear1.weight", &dt, &nd, nullptr) == CTN_OK ||
                ctn_checkpoint_info(ck, "linear0.weight", &dt, &nd, nullptr) == CTN_OK,
            true);
  ctn_checkpoint_release(ck);
}

TEST(GraphFile, SaveRefusesBadArgumentsAndLeavesNoFile) {
  Ctx c;
  std::string dir = scratch_dir("ctn_graph_file");
  Cnn a(c.ctx);
  std::string path = dir + "/x.ctn";
  ctn_node outs[2] = {a.loss, a.logits}, bad = 1u << 30;
  const char *dup[2] = {"y", "y"};
  EXPECT_EQ(ctn_graph_save(a.g, nullptr, 2, outs, dup, nullptr, path.c_str()), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("repeats"), std::string::npos);
  EXPECT_EQ(ctn_graph_save(a.g, nullptr, 1, &bad, nullptr, nullptr, path.c_str()), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_graph_save(a.g, nullptr, 1, outs, nullptr, "{\"chutney.x\":\"1\"}", path.c_str()),
            CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_graph_save(a.g, nullptr, 1, outs, nullptr, "[1]", path.c_str()), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(access(path.c_str(), F_OK), -1);
  ctn_graph *eg = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, CTN_GRAPH_EAGER, &eg));
  EXPECT_EQ(ctn_graph_save(eg, nullptr, 0, nullptr, nullptr, nullptr, path.c_str()), CTN_ERR_STATE);
  ctn_graph_release(eg);
  // Without a plan the initial values are saved: the file loads and matches a fresh model.
  CTN_ASSERT_OK(ctn_graph_save(a.g, nullptr, 2, outs, nullptr, nullptr, path.c_str()));
  Loaded l;
  CTN_ASSERT_OK(ctn_graph_load(c.ctx, path.c_str(), &l.g, &l.s));
  ctn_plan *lp = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(l.g, 2, outs, nullptr, &lp));
  std::vector<char> want = train_step(a.p, a, 1), got = train_step(lp, a, 1);
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size()));
  ctn_plan_release(lp);
}

TEST(GraphFile, DamagedAndForeignFilesAreRefusedWithTheirCause) {
  Ctx c;
  std::string dir = scratch_dir("ctn_graph_file");
  std::string path = saved_cnn(c, dir);
  struct Case {
    const char *what;
    void (*edit)(std::string &);
    ctn_status want;
    const char *says;
  };
  const Case cases[] = {
      {"unknown op", [](std::string &s) { replace_first(s, "\\\"op\\\":\\\"conv2d\\\"", "\\\"op\\\":\\\"my_lib_conv\\\""); },
       CTN_ERR_UNSUPPORTED, "my_lib_conv"},
      {"newer version", [](std::string &s) { replace_first(s, "\"chutney.format_version\":\"1\"", "\"chutney.format_version\":\"2\""); },
       CTN_ERR_UNSUPPORTED, "newer"},
      {"no magic", [](std::string &s) { replace_first(s, "\"chutney.format\":\"graph\"", "\"chutney.formax\":\"graph\""); },
       CTN_ERR_CORRUPT, "not a chutney graph file"},
      {"forward input", [](std::string &s) { replace_first(s, "\\\"in\\\":[", "\\\"in\\\":[99999,"); },
       CTN_ERR_CORRUPT, "does not precede"},
      {"bad kind", [](std::string &s) { replace_first(s, "\\\"kind\\\":\\\"input\\\"", "\\\"kind\\\":\\\"wat\\\""); },
       CTN_ERR_CORRUPT, "unknown kind"},
      {"wrong shape", [](std::string &s) { replace_first(s, "\\\"shape\\\":[4,1,6,6]", "\\\"shape\\\":[4,1,6,7]"); },
       CTN_ERR_CORRUPT, "node"},
      {"bad json", [](std::string &s) { replace_first(s, "{\\\"nodes\\\"", "{\\\"nodes\\\"]"); }, CTN_ERR_CORRUPT, "JSON"},
      {"too many attrs", [](std::string &s) { replace_first(s, "\\\"ai\\\":[", "\\\"ai\\\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"); },
       CTN_ERR_CORRUPT, "at most"},
  };
  for (const Case &k : cases) {
    std::string bad = dir + "/bad.ctn";
    edit_graph(path, bad, k.edit);
    Loaded l;
    EXPECT_EQ(ctn_graph_load(c.ctx, bad.c_str(), &l.g, &l.s), k.want) << k.what << ": " << ctn_last_error();
    std::string msg = ctn_last_error();
    EXPECT_NE(msg.find(k.says), std::string::npos) << k.what << ": " << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << k.what << ": " << msg;
    EXPECT_EQ(l.g, nullptr);
    EXPECT_EQ(l.s, nullptr);
  }
  // Every prefix of the file is refused (the safetensors layer sees the truncation).
  std::FILE *f = std::fopen(path.c_str(), "rb");
  ASSERT_TRUE(f);
  std::vector<char> bytes(1 << 20);
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  std::fclose(f);
  for (size_t cut : {size_t{0}, size_t{7}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    std::string t = dir + "/cut.ctn";
    std::FILE *o = std::fopen(t.c_str(), "wb");
    std::fwrite(bytes.data(), 1, cut, o);
    std::fclose(o);
    Loaded l;
    EXPECT_EQ(ctn_graph_load(c.ctx, t.c_str(), &l.g, &l.s), CTN_ERR_CORRUPT) << cut << ": " << ctn_last_error();
  }
}
