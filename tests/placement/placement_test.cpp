// "Never slower than the CPU": the automatic placement policy of a device backend (CTN_TEST_DEVICE
// = opencl on PoCL or vulkan on lavapipe in CI, both the CPU behind a GPU API, so the CPU backend
// must win). With the default placement "auto" a CNN training plan compiled for "<device>,cpu"
// keeps every step on the CPU; placement "always" still runs it on the device, with the CPU's
// losses. The policy is measured at first use, cached per device (a second context reads it
// back), remeasured on request, overridable by environment, and visible in the plugin report
// that `chutney plugins --explain` prints. Placement is asserted with ctn_plan_backend_steps.
#include "../unit/test_helpers.h"
#include <chutney/chutney.h>
#include <chutney/nn.h>
#include <chutney/ops.h>
#include <gtest/gtest.h>

#include <dirent.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../common/ok.h"

namespace {

std::string device() {
  const char *d = std::getenv("CTN_TEST_DEVICE");
  return d && *d ? d : "vulkan";
}

std::string upper(std::string s) {
  for (char &c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A fresh cache directory for this process: the policy must be measured here, not read from an
// earlier run.
const std::string &cache_dir() {
  static std::string dir = [] {
    std::string s = scratch_dir("chutney-placement");
    setenv("CHUTNEY_CACHE_DIR", s.c_str(), 1);
    return s;
  }();
  return dir;
}

struct Ctx {
  ctn_context *ctx = nullptr;
  std::string skip;
  Ctx() {
    cache_dir();
    if (ctn_context_create(nullptr, &ctx) != CTN_OK) {
      skip = ctn_last_error();
      return;
    }
    uint32_t n = 0;
    ctn_context_backend_count(ctx, &n);
    skip = device() + " backend not found";
    for (uint32_t i = 0; i < n; ++i) {
      ctn_backend_info info{};
      info.struct_size = sizeof info;
      if (ctn_context_backend_info(ctx, i, &info) == CTN_OK && device() == info.name)
        skip = info.available ? "" : device() + " unavailable: " + info.description;
    }
  }
  ~Ctx() { ctn_context_release(ctx); }
  // The report's lines about this device's placement policy.
  std::string placement_report() const {
    const char *text = nullptr;
    if (ctn_context_plugin_report(ctx, &text) != CTN_OK || !text) return "";
    std::string all = text, key = "placement   " + device() + ": ", out;
    size_t at = all.find(key);
    if (at == std::string::npos) return "";
    size_t end = all.find("\nplacement", at + 1);
    return all.substr(at, end == std::string::npos ? std::string::npos : end - at);
  }
};

#define REQUIRE_DEVICE(c) \
  if (!(c).skip.empty()) GTEST_SKIP() << (c).skip

struct Trained {
  std::vector<float> losses;
  uint32_t steps = 0, on_device = 0, on_cpu = 0, conv = 0, conv_gw = 0, bn = 0, pool = 0;
};

// conv3x3(1->4) batch_norm relu maxpool2, conv3x3(4->8) relu avgpool2, fc 72-4, cross-entropy;
// SGD; batch 16 of 12x12 images; `n_steps` training steps of the plan compiled for `backends`.
void train_cnn(ctn_context *ctx, const char *backends, int n_steps, Trained *r) {
  const int64_t batch = 16;
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  std::unique_ptr<ctn_graph, void (*)(ctn_graph *)> gp(g, ctn_graph_release);
  ctn_model *m = nullptr;
  OK(ctn_model_create(g, CTN_F32, 3, &m));
  std::unique_ptr<ctn_model, void (*)(ctn_model *)> mp(m, ctn_model_release);
  ctn_node x, labels, logits, loss;
  const int64_t xs[4] = {batch, 1, 12, 12}, ls[1] = {batch};
  OK(ctn_input(g, "x", CTN_F32, 4, xs, &x));
  OK(ctn_input(g, "labels", CTN_I32, 1, ls, &labels));
  const ctn_layer layers[] = {CTN_NN_CONV2D(4, 3, 1, 1), CTN_NN_BATCH_NORM(), CTN_NN_RELU(),
                              CTN_NN_MAX_POOL2D(2),      CTN_NN_CONV2D(8, 3, 1, 1),
                              CTN_NN_RELU(),             CTN_NN_AVG_POOL2D(2),
                              CTN_NN_FLATTEN(),          CTN_NN_LINEAR(4)};
  OK(ctn_nn_sequential(m, x, static_cast<uint32_t>(sizeof layers / sizeof layers[0]), layers, &logits));
  OK(ctn_cross_entropy(g, logits, labels, &loss));
  ctn_optimizer opt{};
  opt.struct_size = sizeof opt;
  opt.kind = CTN_OPTIM_SGD;
  opt.lr = 0.05;
  OK(ctn_nn_minimize(m, loss, &opt, nullptr));
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backends;
  ctn_plan *p = nullptr;
  OK(ctn_plan_compile(g, 1, &loss, &o, &p));
  std::unique_ptr<ctn_plan, void (*)(ctn_plan *)> pp(p, ctn_plan_release);
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  OK(ctn_plan_stats_get(p, &st));
  r->steps = st.n_steps;
  const std::string dev = device();
  OK(ctn_plan_backend_steps(p, dev.c_str(), nullptr, &r->on_device));
  OK(ctn_plan_backend_steps(p, "cpu", nullptr, &r->on_cpu));
  OK(ctn_plan_backend_steps(p, dev.c_str(), CTN_OP_CONV2D, &r->conv));
  OK(ctn_plan_backend_steps(p, dev.c_str(), CTN_OP_CONV2D_GRAD_WEIGHT, &r->conv_gw));
  OK(ctn_plan_backend_steps(p, dev.c_str(), CTN_OP_BATCH_NORM, &r->bn));
  OK(ctn_plan_backend_steps(p, dev.c_str(), CTN_OP_MAX_POOL2D, &r->pool));
  if (std::getenv("CTN_TEST_VERBOSE")) {
    const char *text = nullptr;
    if (ctn_plan_describe(p, &text) == CTN_OK) std::printf("%s\n", text);
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> xv(static_cast<size_t>(batch * 144));
  std::vector<int32_t> lv(static_cast<size_t>(batch));
  for (float &v : xv) v = nd(rng);
  for (size_t i = 0; i < lv.size(); ++i) lv[i] = static_cast<int32_t>(i % 4);
  ctn_tensor *tx = nullptr, *tl = nullptr, *tloss = nullptr;
  OK(ctn_tensor_create(CTN_F32, 4, xs, xv.data(), &tx));
  OK(ctn_tensor_create(CTN_I32, 1, ls, lv.data(), &tl));
  OK(ctn_plan_output_create(p, 0, &tloss));
  const ctn_node feeds_n[2] = {x, labels};
  const ctn_tensor *feeds[2] = {tx, tl};
  for (int s = 0; s < n_steps; ++s) {
    OK(ctn_model_set_step(m, s + 1));
    OK(ctn_model_run(m, p, 2, feeds_n, feeds, 1, &tloss));
    float l = 0;
    OK(ctn_tensor_read(tloss, &l, sizeof l));
    r->losses.push_back(l);
  }
  for (ctn_tensor *t : {tx, tl, tloss}) ctn_tensor_release(t);
}

bool has_policy_file(const std::string &dir, const std::string &dev) {
  DIR *d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent *e = readdir(d))
    found = found || std::string(e->d_name).rfind(dev + "-policy-", 0) == 0;
  closedir(d);
  return found;
}

void expect_clean(ctn_context *ctx) {
  if (device() == "vulkan" && std::getenv("CHUTNEY_VULKAN_VALIDATION")) {
    EXPECT_EQ(ctn_context_set_option(ctx, "vulkan", "validation_check", ""), CTN_OK) << ctn_last_error();
  }
}

TEST(AutoPlacement, KeepsTheCnnOnTheCpuAndForcingRunsItOnTheDevice) {
  Ctx c;
  REQUIRE_DEVICE(c);
  const std::string dev = device(), both = dev + ",cpu";
  // Nothing measured before the device is offered an op.
  EXPECT_NE(c.placement_report().find(": auto, not measured yet"), std::string::npos) << c.placement_report();
  EXPECT_FALSE(has_policy_file(cache_dir(), dev));

  Trained cpu, automatic, forced;
  ASSERT_NO_FATAL_FAILURE(train_cnn(c.ctx, "cpu", 3, &cpu));
  ASSERT_NO_FATAL_FAILURE(train_cnn(c.ctx, both.c_str(), 3, &automatic));
  // "auto": the device (a CPU behind a GPU API) lost every measurement that matters for this
  // network, so every step stayed on the CPU backend, with exactly the CPU's losses.
  EXPECT_EQ(automatic.on_device, 0u);
  EXPECT_EQ(automatic.on_cpu, automatic.steps);
  EXPECT_EQ(automatic.losses, cpu.losses);
  // Measured at that first use, cached, and explained.
  const std::string rep = c.placement_report();
  EXPECT_NE(rep.find(": auto, measured now in "), std::string::npos) << rep;
  for (const char *cls : {"\n              gemm: ", "\n              elementwise: ", "\n              reduce: "})
    EXPECT_NE(rep.find(cls), std::string::npos) << cls << " missing from: " << rep;
  EXPECT_NE(rep.find("device "), std::string::npos) << rep;
  EXPECT_TRUE(has_policy_file(cache_dir(), dev));

  // Compiled for the device alone, a small elementwise op is refused with the policy's reason.
  {
    ctn_graph *g = nullptr;
    OK(ctn_graph_create(c.ctx, 0, &g));
    const int64_t s = 16;
    ctn_node a, y;
    OK(ctn_input(g, "a", CTN_F32, 1, &s, &a));
    OK(ctn_relu(g, a, &y));
    ctn_compile_options o{};
    o.struct_size = sizeof o;
    o.backends = dev.c_str();
    ctn_plan *p = nullptr;
    EXPECT_EQ(ctn_plan_compile(g, 1, &y, &o, &p), CTN_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(ctn_last_error()).find("placement policy: cpu faster for elementwise"),
              std::string::npos)
        << ctn_last_error();
    ctn_plan_release(p);
    ctn_graph_release(g);
  }

  // "always": the same plan runs on the device, and learns the same way.
  OK(ctn_context_set_option(c.ctx, dev.c_str(), "placement", "always"));
  ASSERT_NO_FATAL_FAILURE(train_cnn(c.ctx, both.c_str(), 3, &forced));
  EXPECT_EQ(forced.conv, 2u);
  EXPECT_EQ(forced.conv_gw, 2u);
  EXPECT_EQ(forced.bn, 1u);
  EXPECT_EQ(forced.pool, 1u);
  EXPECT_GT(forced.on_device, forced.steps / 2) << "most of the plan should run on " << dev;
  ASSERT_EQ(forced.losses.size(), cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i)
    EXPECT_NEAR(forced.losses[i], cpu.losses[i], 1e-3 + 1e-3 * std::fabs(cpu.losses[i])) << "step " << i;
  EXPECT_NE(c.placement_report().find(": always ("), std::string::npos) << c.placement_report();
  expect_clean(c.ctx);
}

// Fits w in x @ w = t by gradient descent for `steps` runs of a plan compiled for `backends`;
// the losses, and how many matmul steps ran on the device.
std::vector<float> fit_linear(ctn_context *ctx, const char *backends, int steps, uint32_t *dev_matmuls,
                              uint32_t *dev_transfers = nullptr) {
  std::vector<float> losses;
  const int64_t xs[2] = {64, 32}, ws[2] = {32, 16}, ts[2] = {64, 16};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> xd(64 * 32), td(64 * 16);
  for (float &v : xd) v = nd(rng);
  for (float &v : td) v = nd(rng);
  ctn_graph *g = nullptr;
  EXPECT_EQ(ctn_graph_create(ctx, 0, &g), CTN_OK);
  ctn_tensor *w0 = nullptr, *xv = nullptr, *tv = nullptr, *lv = nullptr;
  ctn_tensor_create(CTN_F32, 2, ws, nullptr, &w0);
  ctn_tensor_create(CTN_F32, 2, xs, xd.data(), &xv);
  ctn_tensor_create(CTN_F32, 2, ts, td.data(), &tv);
  ctn_node x, t, w, y, d, sq, loss, dw, lr, step, w1, upd;
  ctn_input(g, "x", CTN_F32, 2, xs, &x);
  ctn_input(g, "t", CTN_F32, 2, ts, &t);
  ctn_variable(g, "w", w0, &w);
  ctn_matmul(g, x, w, 0, 0, &y);
  ctn_sub(g, y, t, &d);
  ctn_mul(g, d, d, &sq);
  ctn_mean(g, sq, 0, nullptr, 0, &loss);
  ctn_grad(g, loss, 1, &w, &dw);
  ctn_scalar(g, CTN_F32, 0.05, &lr);
  ctn_mul(g, dw, lr, &step);
  ctn_sub(g, w, step, &w1);
  EXPECT_EQ(ctn_assign(g, w, w1, &upd), CTN_OK) << ctn_last_error();
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backends;
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, 1, &loss, &o, &p), CTN_OK) << ctn_last_error();
  if (p) {
    ctn_plan_backend_steps(p, device().c_str(), CTN_OP_MATMUL, dev_matmuls);
    if (dev_transfers) ctn_plan_backend_steps(p, device().c_str(), "transfer", dev_transfers);
    ctn_plan_output_create(p, 0, &lv);
    const ctn_node fn[2] = {x, t};
    const ctn_tensor *fv[2] = {xv, tv};
    for (int i = 0; i < steps; ++i) {
      EXPECT_EQ(ctn_plan_run(p, 2, fn, fv, 1, &lv), CTN_OK) << ctn_last_error();
      float l = 0;
      ctn_tensor_read(lv, &l, sizeof l);
      losses.push_back(l);
    }
  }
  for (ctn_tensor *tt : {w0, xv, tv, lv}) ctn_tensor_release(tt);
  ctn_plan_release(p);
  ctn_graph_release(g);
  return losses;
}

// A table where the device takes GEMMs but nothing else (as a board GPU might decide): the
// matmuls run on the device, the elementwise update on the CPU, and the weight, which lives on
// the device with its first consumer, receives its new value by a transfer (the device declines
// the copy). Training gives the CPU's losses.
TEST(AutoPlacement, DeviceForGemmOnlyTrainsLikeTheCpu) {
  const std::string dev = device();
  std::string table;
  {
    Ctx c;
    REQUIRE_DEVICE(c);
    OK(ctn_context_set_option(c.ctx, dev.c_str(), "policy", "prepare"));
    DIR *d = opendir(cache_dir().c_str());
    ASSERT_NE(d, nullptr);
    while (dirent *e = readdir(d))
      if (std::string(e->d_name).rfind(dev + "-policy-", 0) == 0) table = cache_dir() + "/" + e->d_name;
    closedir(d);
    ASSERT_FALSE(table.empty());
  }
  {
    std::FILE *f = std::fopen(table.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "chutney-placement-policy 2\ngemm 0 set by the test\nelementwise %lld set by the test\n"
                    "reduce %lld set by the test\n", static_cast<long long>(INT64_MAX),
                 static_cast<long long>(INT64_MAX));
    std::fclose(f);
  }
  Ctx c;
  REQUIRE_DEVICE(c);
  OK(ctn_context_set_option(c.ctx, dev.c_str(), "policy", "prepare"));
  EXPECT_NE(c.placement_report().find("gemm: device from 0"), std::string::npos) << c.placement_report();
  uint32_t dev_mm = 0, cpu_mm = 0, into_dev = 0;
  std::vector<float> mixed = fit_linear(c.ctx, (dev + ",cpu").c_str(), 5, &dev_mm, &into_dev);
  // x and w come to the device for the matmul, and the new w goes back into its storage there.
  EXPECT_GE(into_dev, 2u);
  std::vector<float> cpu = fit_linear(c.ctx, "cpu", 5, &cpu_mm);
  EXPECT_GE(dev_mm, 1u) << "the forward matmul should run on " << dev;
  ASSERT_EQ(mixed.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(mixed[i], cpu[i], 1e-4 * std::fabs(cpu[i])) << "step " << i;
  EXPECT_LT(cpu.back(), cpu.front());
  std::remove(table.c_str());  // the next test measures afresh
  expect_clean(c.ctx);
}

TEST(AutoPlacement, CachedPerDeviceRemeasuredOnRequestOverridable) {
  const std::string dev = device();
  {
    Ctx c;
    REQUIRE_DEVICE(c);
    // "prepare" (what `chutney plugins --explain` asks for): from the cache when there is one.
    OK(ctn_context_set_option(c.ctx, dev.c_str(), "policy", "prepare"));
    const bool cached_before = c.placement_report().find(": auto, measured earlier (cached in " + cache_dir()) !=
                               std::string::npos;
    if (!cached_before) {  // run alone: this call measured and wrote it
      EXPECT_NE(c.placement_report().find(": auto, measured now in "), std::string::npos) << c.placement_report();
    }
    OK(ctn_context_set_option(c.ctx, dev.c_str(), "policy", "remeasure"));
    EXPECT_NE(c.placement_report().find(": auto, measured now in "), std::string::npos) << c.placement_report();
    EXPECT_EQ(ctn_context_set_option(c.ctx, dev.c_str(), "policy", "sometimes"), CTN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ctn_context_set_option(c.ctx, dev.c_str(), "placement", "never"), CTN_ERR_INVALID_ARGUMENT);
    expect_clean(c.ctx);
  }
  {
    Ctx c;  // another context: the table written above is read back, not measured again
    REQUIRE_DEVICE(c);
    OK(ctn_context_set_option(c.ctx, dev.c_str(), "policy", "prepare"));
    EXPECT_NE(c.placement_report().find(": auto, measured earlier (cached in " + cache_dir() + "/" + dev + "-policy-"),
              std::string::npos)
        << c.placement_report();
  }
  const std::string env = "CHUTNEY_" + upper(dev) + "_PLACEMENT";
  setenv(env.c_str(), "always", 1);
  {
    Ctx c;
    unsetenv(env.c_str());
    REQUIRE_DEVICE(c);
    EXPECT_NE(c.placement_report().find(": always (" + env), std::string::npos) << c.placement_report();
    Trained r;
    ASSERT_NO_FATAL_FAILURE(train_cnn(c.ctx, (dev + ",cpu").c_str(), 1, &r));
    EXPECT_EQ(r.conv, 2u) << "with " << env << "=always the convolutions run on " << dev;
  }
}

}  // namespace
