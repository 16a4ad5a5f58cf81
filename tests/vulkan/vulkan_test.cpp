// Vulkan backend tests through the public API: unavailable handling, tensors over
// maxStorageBufferRange, storage windows, the on-disk pipeline cache, MLP training end to end
// against the CPU backend, and a small CNN (conv, batch norm, pooling) trained entirely on Vulkan. With CHUTNEY_VULKAN_VALIDATION=1 (set by meson) every test also asserts
// that the validation layers reported no error.
#include "../unit/test_helpers.h"
#include <chutney/chutney.h>
#include <chutney/nn.h>
#include <chutney/ops.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

#define ASSERT_CTN(expr)                                                                       \
  do {                                                                                         \
    ctn_status s_ = (expr);                                                                    \
    ASSERT_EQ(s_, CTN_OK) << #expr << ": " << ctn_last_error();                                \
  } while (0)

struct Ctx {
  ctn_context *ctx = nullptr;
  ~Ctx() { ctn_context_release(ctx); }
};
struct Graph {
  ctn_graph *g = nullptr;
  ~Graph() { ctn_graph_release(g); }
};
struct Plan {
  ctn_plan *p = nullptr;
  ~Plan() { ctn_plan_release(p); }
};
struct Tensor {
  ctn_tensor *t = nullptr;
  ~Tensor() { ctn_tensor_release(t); }
};

// A context holding exactly the CPU and Vulkan plugins of this build. Returns the status of
// loading the Vulkan plugin.
ctn_status make_context(Ctx &c) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.flags = CTN_CONTEXT_NO_AUTOLOAD;
  o.num_threads = 2;
  if (ctn_context_create(&o, &c.ctx) != CTN_OK) return CTN_ERR_INTERNAL;
  if (ctn_context_load_plugin(c.ctx, CTN_TEST_CPU_PLUGIN) != CTN_OK) return CTN_ERR_INTERNAL;
  ctn_status s = ctn_context_load_plugin(c.ctx, CTN_TEST_VULKAN_PLUGIN);
  if (s == CTN_OK) ctn_context_set_option(c.ctx, "vulkan", "placement", "always");
  return s;
}

ctn_backend_info backend(ctn_context *ctx, const std::string &name) {
  uint32_t n = 0;
  ctn_context_backend_count(ctx, &n);
  for (uint32_t i = 0; i < n; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    if (ctn_context_backend_info(ctx, i, &info) == CTN_OK && info.name && name == info.name) return info;
  }
  return ctn_backend_info{};
}

bool validation_on() {
  const char *v = std::getenv("CHUTNEY_VULKAN_VALIDATION");
  return v && *v && std::string(v) != "0";
}

// Zero validation errors so far (a no-op without CHUTNEY_VULKAN_VALIDATION).
void expect_clean(ctn_context *ctx) {
  if (!validation_on()) return;
  // The layer really is on (the backend says so in its description).
  EXPECT_NE(std::string(backend(ctx, "vulkan").description).find("validation on"), std::string::npos);
  ctn_status s = ctn_context_set_option(ctx, "vulkan", "validation_check", "");
  EXPECT_EQ(s, CTN_OK) << ctn_last_error();
}

// Skips when this machine has no Vulkan device at all (the unavailable tests still run).
#define REQUIRE_VULKAN(c)                                                                      \
  do {                                                                                         \
    ctn_status s_ = make_context(c);                                                           \
    if (s_ == CTN_ERR_UNAVAILABLE) GTEST_SKIP() << "no Vulkan device: " << ctn_last_error(); \
    ASSERT_EQ(s_, CTN_OK) << ctn_last_error();                                                 \
  } while (0)

// y = a op b on `backend`, compiled and run once; returns y.
std::vector<float> run_binary(ctn_context *ctx, const char *backend, const char *op, const std::vector<int64_t> &sa,
                              const std::vector<float> &a, const std::vector<int64_t> &sb, const std::vector<float> &b,
                              uint32_t *steps_on_backend) {
  Graph g;
  EXPECT_EQ(ctn_graph_create(ctx, 0, &g.g), CTN_OK);
  ctn_node na, nb, y;
  ctn_input(g.g, "a", CTN_F32, static_cast<uint32_t>(sa.size()), sa.data(), &na);
  ctn_input(g.g, "b", CTN_F32, static_cast<uint32_t>(sb.size()), sb.data(), &nb);
  ctn_node ins[2] = {na, nb};
  EXPECT_EQ(ctn_op(g.g, op, 2, ins, nullptr, &y), CTN_OK) << ctn_last_error();
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backend;
  Plan p;
  EXPECT_EQ(ctn_plan_compile(g.g, 1, &y, &o, &p.p), CTN_OK) << ctn_last_error();
  if (!p.p) return {};
  ctn_plan_backend_steps(p.p, backend, op, steps_on_backend);
  Tensor ta, tb, ty;
  ctn_tensor_create(CTN_F32, static_cast<uint32_t>(sa.size()), sa.data(), a.data(), &ta.t);
  ctn_tensor_create(CTN_F32, static_cast<uint32_t>(sb.size()), sb.data(), b.data(), &tb.t);
  ctn_plan_output_create(p.p, 0, &ty.t);
  const ctn_tensor *feeds[2] = {ta.t, tb.t};
  ctn_tensor *outs[1] = {ty.t};
  EXPECT_EQ(ctn_plan_run(p.p, 2, ins, feeds, 1, outs), CTN_OK) << ctn_last_error();
  int64_t n = 0;
  ctn_tensor_numel(ty.t, &n);
  std::vector<float> r(static_cast<size_t>(n));
  ctn_tensor_read(ty.t, r.data(), r.size() * 4);
  return r;
}

// ---- unavailable -------------------------------------------------------------------------------

TEST(Unavailable, NoLoaderLeavesCpuWorking) {
  setenv("CHUTNEY_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  Ctx c;
  ctn_status s = make_context(c);
  unsetenv("CHUTNEY_VULKAN_LOADER");
  ASSERT_EQ(s, CTN_ERR_UNAVAILABLE) << ctn_last_error();
  EXPECT_NE(std::string(ctn_last_error()).find("unavailable: /nonexistent/libvulkan.so.1 not found"), std::string::npos)
      << ctn_last_error();
  ctn_backend_info vk = backend(c.ctx, "vulkan");
  ASSERT_NE(vk.name, nullptr);
  EXPECT_EQ(vk.available, 0u);
  EXPECT_NE(std::string(vk.description).find("not found"), std::string::npos) << vk.description;
  uint32_t steps = 0;
  std::vector<float> y = run_binary(c.ctx, "cpu", CTN_OP_ADD, {3}, {1, 2, 3}, {3}, {10, 20, 30}, &steps);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[2], 33.0f);
  EXPECT_EQ(steps, 1u);
}

// Run by meson with VK_ICD_FILENAMES (and VK_DRIVER_FILES) naming a missing file: the loader is
// there, no driver is.
TEST(Unavailable, NoDriverWhenExpected) {
  if (!std::getenv("CTN_VK_EXPECT_NO_DRIVER")) GTEST_SKIP() << "run by the vulkan-no-driver test";
  Ctx c;
  ctn_status s = make_context(c);
  ASSERT_EQ(s, CTN_ERR_UNAVAILABLE) << ctn_last_error();
  EXPECT_NE(std::string(ctn_last_error()).find("unavailable: vkCreateInstance failed"), std::string::npos)
      << ctn_last_error();
  EXPECT_EQ(backend(c.ctx, "vulkan").available, 0u);
  uint32_t steps = 0;
  std::vector<float> y = run_binary(c.ctx, "cpu", CTN_OP_MUL, {2}, {3, 4}, {2}, {5, 6}, &steps);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[1], 24.0f);
}

// ---- large tensors and storage windows ---------------------------------------------------------

TEST(Large, TensorOverMaxStorageRange) {
  Ctx c;
  REQUIRE_VULKAN(c);
  // 40 Mi floats = 160 MiB per operand: over lavapipe's 128 MiB maxStorageBufferRange.
  const int64_t n = int64_t(40) << 20;
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i % 1000003);
    b[static_cast<size_t>(i)] = static_cast<float>((i * 7) % 999983) * 0.5f;
  }
  uint32_t steps = 0;
  std::vector<float> y = run_binary(c.ctx, "vulkan", CTN_OP_ADD, {n}, a, {n}, b, &steps);
  ASSERT_EQ(y.size(), a.size());
  EXPECT_EQ(steps, 1u);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i)
    if (y[static_cast<size_t>(i)] != a[static_cast<size_t>(i)] + b[static_cast<size_t>(i)] && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": " << y[static_cast<size_t>(i)];
  EXPECT_EQ(bad, 0);
  expect_clean(c.ctx);
}

TEST(Large, SmallStorageWindows) {
  // The same code path on small tensors: 4 KiB descriptor windows.
  setenv("CHUTNEY_VULKAN_MAX_RANGE", "4096", 1);
  Ctx c;
  ctn_status s = make_context(c);
  unsetenv("CHUTNEY_VULKAN_MAX_RANGE");
  if (s == CTN_ERR_UNAVAILABLE) GTEST_SKIP() << ctn_last_error();
  ASSERT_EQ(s, CTN_OK) << ctn_last_error();
  const int64_t rows = 300, cols = 100;
  std::vector<float> a(static_cast<size_t>(rows * cols)), b(static_cast<size_t>(cols));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) - 50.0f;
  uint32_t steps = 0;
  std::vector<float> y = run_binary(c.ctx, "vulkan", CTN_OP_SUB, {rows, cols}, a, {cols}, b, &steps);
  ASSERT_EQ(y.size(), a.size());
  EXPECT_EQ(steps, 1u);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      size_t i = static_cast<size_t>(r * cols + k);
      ASSERT_EQ(y[i], a[i] - b[static_cast<size_t>(k)]) << r << "," << k;
    }
  expect_clean(c.ctx);
}

// ---- pipeline cache ----------------------------------------------------------------------------

std::string cache_file(const std::string &dir) {
  std::string found;
  if (FILE *p = popen(("ls " + dir + "/vulkan-*.bin 2>/dev/null").c_str(), "r")) {
    char line[1024];
    if (fgets(line, sizeof line, p)) {
      found = line;
      while (!found.empty() && found.back() == '\n') found.pop_back();
    }
    pclose(p);
  }
  return found;
}

TEST(PipelineCache, WrittenReloadedAndCorruptIgnored) {
  const std::string dir = scratch_dir("ctn-vk-cache");
  setenv("CHUTNEY_CACHE_DIR", dir.c_str(), 1);
  auto run_matmul = [](ctn_context *ctx) {
    uint32_t steps = 0;
    std::vector<float> a(6, 1.0f), b(6, 2.0f);
    std::vector<float> y = run_binary(ctx, "vulkan", CTN_OP_MATMUL, {2, 3}, a, {3, 2}, b, &steps);
    EXPECT_EQ(steps, 1u);
    ASSERT_EQ(y.size(), 4u);
    EXPECT_EQ(y[0], 6.0f);
  };
  {
    Ctx c;
    ctn_status s = make_context(c);
    if (s == CTN_ERR_UNAVAILABLE) {
      unsetenv("CHUTNEY_CACHE_DIR");
      GTEST_SKIP() << ctn_last_error();
    }
    ASSERT_EQ(s, CTN_OK) << ctn_last_error();
    EXPECT_NE(std::string(backend(c.ctx, "vulkan").description).find("pipeline cache none yet"), std::string::npos)
        << backend(c.ctx, "vulkan").description;
    run_matmul(c.ctx);
    expect_clean(c.ctx);
  }  // shutdown writes the cache
  std::string file = cache_file(dir);
  ASSERT_FALSE(file.empty()) << "no cache file in " << dir;
  {
    std::ifstream f(file, std::ios::binary);
    uint32_t hdr[4] = {};
    f.read(reinterpret_cast<char *>(hdr), sizeof hdr);
    EXPECT_GE(hdr[0], 32u);  // header length: 16 bytes + the UUID
    EXPECT_EQ(hdr[1], 1u);   // VK_PIPELINE_CACHE_HEADER_VERSION_ONE
  }
  {
    Ctx c;
    ASSERT_EQ(make_context(c), CTN_OK) << ctn_last_error();
    EXPECT_NE(std::string(backend(c.ctx, "vulkan").description).find("pipeline cache loaded"), std::string::npos)
        << backend(c.ctx, "vulkan").description;
    run_matmul(c.ctx);
  }
  {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f << "this is not a pipeline cache, but long enough to have a header";
  }
  {
    Ctx c;
    ASSERT_EQ(make_context(c), CTN_OK) << ctn_last_error();
    EXPECT_NE(std::string(backend(c.ctx, "vulkan").description).find("pipeline cache ignored"), std::string::npos)
        << backend(c.ctx, "vulkan").description;
    run_matmul(c.ctx);
    expect_clean(c.ctx);
  }
  unsetenv("CHUTNEY_CACHE_DIR");
  std::remove(file.c_str());
  rmdir(dir.c_str());
}

// ---- MLP training ------------------------------------------------------------------------------

struct Data {
  int64_t n = 512, d = 16, classes = 4;
  std::vector<float> x;
  std::vector<int32_t> y;
};

// A learnable synthetic problem: labels of a random linear teacher on Gaussian inputs.
Data make_data() {
  Data dt;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> teacher(static_cast<size_t>(dt.d * dt.classes));
  for (float &t : teacher) t = nd(rng);
  dt.x.resize(static_cast<size_t>(dt.n * dt.d));
  for (float &v : dt.x) v = nd(rng);
  for (int64_t i = 0; i < dt.n; ++i) {
    int best = 0;
    float bv = -1e30f;
    for (int c = 0; c < dt.classes; ++c) {
      float s = 0;
      for (int64_t k = 0; k < dt.d; ++k) s += dt.x[static_cast<size_t>(i * dt.d + k)] * teacher[static_cast<size_t>(k * dt.classes + c)];
      if (s > bv) bv = s, best = c;
    }
    dt.y.push_back(best);
  }
  return dt;
}

struct TrainResult {
  double first_loss = 0, last_loss = 0, accuracy = 0;
  uint32_t matmuls = 0, sgd_apply = 0, sgd_velocity = 0, steps = 0, on_backend = 0;
};

// Two-layer MLP (16 -> 32 -> 4), SGD with momentum through the optimizer ops, batch 64.
void train(ctn_context *ctx, const char *backend, const Data &dt, TrainResult *res) {
  const int64_t batch = 64, hidden = 32;
  Graph g;
  ASSERT_CTN(ctn_graph_create(ctx, 0, &g.g));
  std::mt19937 rng(3);
  auto uniform = [&](std::vector<int64_t> shape, float bound) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(-bound, bound);
    for (float &x : v) x = bound > 0 ? u(rng) : 0.0f;
    Tensor t;
    ctn_tensor_create(CTN_F32, static_cast<uint32_t>(shape.size()), shape.data(), v.data(), &t.t);
    ctn_tensor *r = t.t;
    t.t = nullptr;
    return r;
  };
  const std::vector<std::vector<int64_t>> shapes = {{dt.d, hidden}, {hidden}, {hidden, dt.classes}, {dt.classes}};
  const float bounds[4] = {std::sqrt(6.0f / 16), 0, std::sqrt(3.0f / 32), 0};
  ctn_node params[4], vel[4];
  for (int i = 0; i < 4; ++i) {
    Tensor w, v;
    w.t = uniform(shapes[static_cast<size_t>(i)], bounds[i]);
    v.t = uniform(shapes[static_cast<size_t>(i)], 0);
    std::string pn = "p" + std::to_string(i), vn = "v" + std::to_string(i);
    ASSERT_CTN(ctn_variable(g.g, pn.c_str(), w.t, &params[i]));
    ASSERT_CTN(ctn_variable(g.g, vn.c_str(), v.t, &vel[i]));
  }
  ctn_node x, labels, h, hb, hr, lo, logits, loss;
  const int64_t xs[2] = {batch, dt.d}, ls[1] = {batch};
  ASSERT_CTN(ctn_input(g.g, "x", CTN_F32, 2, xs, &x));
  ASSERT_CTN(ctn_input(g.g, "labels", CTN_I32, 1, ls, &labels));
  ASSERT_CTN(ctn_matmul(g.g, x, params[0], 0, 0, &h));
  ASSERT_CTN(ctn_add(g.g, h, params[1], &hb));
  ASSERT_CTN(ctn_relu(g.g, hb, &hr));
  ASSERT_CTN(ctn_matmul(g.g, hr, params[2], 0, 0, &lo));
  ASSERT_CTN(ctn_add(g.g, lo, params[3], &logits));
  ASSERT_CTN(ctn_cross_entropy(g.g, logits, labels, &loss));
  ctn_node grads[4];
  ASSERT_CTN(ctn_grad(g.g, loss, 4, params, grads));
  ctn_node lr;
  ASSERT_CTN(ctn_scalar(g.g, CTN_F32, 0.1, &lr));
  for (int i = 0; i < 4; ++i) {
    ctn_attrs at{};
    at.f[0] = 0.9;  // momentum
    at.nf = 2;
    ctn_node vin[3] = {vel[i], grads[i], params[i]}, vnew, wnew, done;
    ASSERT_CTN(ctn_op(g.g, CTN_OP_SGD_VELOCITY, 3, vin, &at, &vnew));
    ctn_attrs aa = at;
    aa.ni = 1;
    ctn_node win[4] = {params[i], vnew, grads[i], lr};
    ASSERT_CTN(ctn_op(g.g, CTN_OP_SGD_APPLY, 4, win, &aa, &wnew));
    ASSERT_CTN(ctn_assign(g.g, vel[i], vnew, &done));
    ASSERT_CTN(ctn_assign(g.g, params[i], wnew, &done));
  }
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backend;
  Plan p;
  ctn_node outs[2] = {loss, logits};
  ASSERT_CTN(ctn_plan_compile(g.g, 2, outs, &o, &p.p));
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  ASSERT_CTN(ctn_plan_stats_get(p.p, &st));
  uint32_t fused = 0;
  ctn_plan_backend_steps(p.p, backend, CTN_OP_MATMUL, &res->matmuls);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_MATMUL_BIAS_ACT, &fused);
  res->matmuls += fused;
  ctn_plan_backend_steps(p.p, backend, CTN_OP_SGD_APPLY, &res->sgd_apply);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_SGD_VELOCITY, &res->sgd_velocity);
  ctn_plan_backend_steps(p.p, backend, nullptr, &res->on_backend);
  res->steps = st.n_steps;
  Tensor tx, tl, tloss, tlogits;
  ASSERT_CTN(ctn_tensor_create(CTN_F32, 2, xs, nullptr, &tx.t));
  ASSERT_CTN(ctn_tensor_create(CTN_I32, 1, ls, nullptr, &tl.t));
  ASSERT_CTN(ctn_plan_output_create(p.p, 0, &tloss.t));
  ASSERT_CTN(ctn_plan_output_create(p.p, 1, &tlogits.t));
  const ctn_node feeds_n[2] = {x, labels};
  const ctn_tensor *feeds[2] = {tx.t, tl.t};
  ctn_tensor *outv[2] = {tloss.t, tlogits.t};
  const int epochs = 8;
  const int64_t nb = dt.n / batch;
  int64_t correct = 0;
  for (int e = 0; e < epochs; ++e) {
    double sum = 0;
    for (int64_t bi = 0; bi < nb; ++bi) {
      ASSERT_CTN(ctn_tensor_write(tx.t, dt.x.data() + bi * batch * dt.d, static_cast<size_t>(batch * dt.d) * 4));
      ASSERT_CTN(ctn_tensor_write(tl.t, dt.y.data() + bi * batch, static_cast<size_t>(batch) * 4));
      ASSERT_CTN(ctn_plan_run(p.p, 2, feeds_n, feeds, 2, outv));
      float l = 0;
      ctn_tensor_read(tloss.t, &l, 4);
      sum += l;
      if (e == epochs - 1) {
        // Accuracy of the last epoch, measured on the logits before each update.
        std::vector<float> lg(static_cast<size_t>(batch * dt.classes));
        ctn_tensor_read(tlogits.t, lg.data(), lg.size() * 4);
        for (int64_t r = 0; r < batch; ++r) {
          int best = 0;
          for (int c2 = 1; c2 < dt.classes; ++c2)
            if (lg[static_cast<size_t>(r * dt.classes + c2)] > lg[static_cast<size_t>(r * dt.classes + best)]) best = c2;
          correct += best == dt.y[static_cast<size_t>(bi * batch + r)];
        }
      }
    }
    if (e == 0) res->first_loss = sum / static_cast<double>(nb);
    res->last_loss = sum / static_cast<double>(nb);
  }
  res->accuracy = static_cast<double>(correct) / static_cast<double>(nb * batch);
}

TEST(Training, MlpOnVulkanMatchesCpu) {
  Ctx c;
  REQUIRE_VULKAN(c);
  Data dt = make_data();
  TrainResult cpu, vk;
  ASSERT_NO_FATAL_FAILURE(train(c.ctx, "cpu", dt, &cpu));
  ASSERT_NO_FATAL_FAILURE(train(c.ctx, "vulkan", dt, &vk));
  // Vulkan ran the whole training step: matmuls (forward and backward) and the updates.
  EXPECT_GE(vk.matmuls, 4u);
  EXPECT_EQ(vk.sgd_apply, 4u);
  EXPECT_EQ(vk.sgd_velocity, 4u);
  EXPECT_EQ(vk.on_backend, vk.steps) << "every step of the training plan must run on vulkan";
  EXPECT_LT(vk.last_loss, 0.5 * vk.first_loss) << "training did not converge on vulkan";
  EXPECT_GT(vk.accuracy, 0.85);
  EXPECT_NEAR(vk.last_loss, cpu.last_loss, 0.02 + 0.05 * cpu.last_loss);
  EXPECT_NEAR(vk.accuracy, cpu.accuracy, 0.02);
  std::printf("cpu: loss %.4f -> %.4f, accuracy %.3f; vulkan: loss %.4f -> %.4f, accuracy %.3f\n", cpu.first_loss,
              cpu.last_loss, cpu.accuracy, vk.first_loss, vk.last_loss, vk.accuracy);
  expect_clean(c.ctx);
}

// ---- neural-network ops: kernel-side errors and deterministic accumulation -------------------------

struct In {
  ctn_dtype dt;
  std::vector<int64_t> shape;
  std::vector<double> v;
};

ctn_tensor *make_tensor(const In &in) {
  size_t n = in.v.size();
  ctn_tensor *t = nullptr;
  if (in.dt == CTN_F32) {
    std::vector<float> d(in.v.begin(), in.v.end());
    ctn_tensor_create(in.dt, static_cast<uint32_t>(in.shape.size()), in.shape.data(), d.data(), &t);
  } else if (in.dt == CTN_F64) {
    ctn_tensor_create(in.dt, static_cast<uint32_t>(in.shape.size()), in.shape.data(), in.v.data(), &t);
  } else if (in.dt == CTN_I32) {
    std::vector<int32_t> d(n);
    for (size_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(in.v[i]);
    ctn_tensor_create(in.dt, static_cast<uint32_t>(in.shape.size()), in.shape.data(), d.data(), &t);
  } else {
    std::vector<int64_t> d(n);
    for (size_t i = 0; i < n; ++i) d[i] = static_cast<int64_t>(in.v[i]);
    ctn_tensor_create(in.dt, static_cast<uint32_t>(in.shape.size()), in.shape.data(), d.data(), &t);
  }
  return t;
}

// One op compiled for `backend` from inputs `ins` (their shapes), run once per feed set in
// `runs`: the status, error and output (f32, or f64 for an f64 first input) of each run.
struct OpRun {
  std::vector<ctn_status> status;
  std::vector<std::string> errors;
  std::vector<std::vector<double>> outs;
  uint32_t on_backend = 0;
};

void run_op(ctn_context *ctx, const char *backend, const char *op, const std::vector<In> &ins, const ctn_attrs *at,
            const std::vector<std::vector<In>> &runs, OpRun *r) {
  Graph g;
  ASSERT_CTN(ctn_graph_create(ctx, 0, &g.g));
  std::vector<ctn_node> nodes(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string name = "in" + std::to_string(i);
    ASSERT_CTN(ctn_input(g.g, name.c_str(), ins[i].dt, static_cast<uint32_t>(ins[i].shape.size()), ins[i].shape.data(),
                         &nodes[i]));
  }
  ctn_node y;
  ASSERT_CTN(ctn_op(g.g, op, static_cast<uint32_t>(ins.size()), nodes.data(), at, &y));
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backend;
  Plan p;
  ASSERT_CTN(ctn_plan_compile(g.g, 1, &y, &o, &p.p));
  ctn_plan_backend_steps(p.p, backend, op, &r->on_backend);
  Tensor ty;
  ASSERT_CTN(ctn_plan_output_create(p.p, 0, &ty.t));
  for (const std::vector<In> &feed : runs) {
    std::vector<Tensor> ts(feed.size());
    std::vector<const ctn_tensor *> fv;
    for (size_t i = 0; i < feed.size(); ++i) {
      ts[i].t = make_tensor(feed[i]);
      fv.push_back(ts[i].t);
    }
    ctn_tensor *outs[1] = {ty.t};
    ctn_status s = ctn_plan_run(p.p, static_cast<uint32_t>(nodes.size()), nodes.data(), fv.data(), 1, outs);
    std::vector<double> out;
    if (s == CTN_OK) {
      int64_t n = 0;
      ctn_tensor_numel(ty.t, &n);
      out.resize(static_cast<size_t>(n));
      if (ins[0].dt == CTN_F64) {
        s = ctn_tensor_read(ty.t, out.data(), out.size() * 8);
      } else {
        std::vector<float> f(out.size());
        s = ctn_tensor_read(ty.t, f.data(), f.size() * 4);
        out.assign(f.begin(), f.end());
      }
    }
    r->status.push_back(s);
    r->errors.push_back(s == CTN_OK ? "" : ctn_last_error());
    r->outs.push_back(out);
  }
}

TEST(NnOps, EmbeddingIdsOutOfRangeAreReportedByTheKernel) {
  Ctx c;
  REQUIRE_VULKAN(c);
  for (const char *record : {"on", "off"}) {
    ASSERT_CTN(ctn_context_set_option(c.ctx, "vulkan", "record", record));
    for (ctn_dtype idt : {CTN_I32, CTN_I64}) {
      for (bool grad : {false, true}) {
        SCOPED_TRACE(std::string(grad ? "embedding_grad" : "embedding") + (idt == CTN_I32 ? " i32" : " i64") +
                     " record=" + record);
        const In table{CTN_F32, {3, 2}, {1, 2, 3, 4, 5, 6}}, dy{CTN_F32, {5, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}};
        const In good{idt, {5}, {2, 0, 2, 1, 2}}, bad{idt, {5}, {0, 1, 3, -1, 7}};
        ctn_attrs at{};
        at.i[0] = 3;
        at.ni = 1;
        OpRun r;
        const char *op = grad ? CTN_OP_EMBEDDING_GRAD : CTN_OP_EMBEDDING;
        auto feed = [&](const In &ids) { return grad ? std::vector<In>{ids, dy} : std::vector<In>{table, ids}; };
        ASSERT_NO_FATAL_FAILURE(run_op(c.ctx, "vulkan", op, feed(good), grad ? &at : nullptr,
                                       {feed(good), feed(bad), feed(good)}, &r));
        EXPECT_EQ(r.on_backend, 1u);
        ASSERT_EQ(r.status.size(), 3u);
        EXPECT_EQ(r.status[0], CTN_OK) << r.errors[0];
        EXPECT_EQ(r.status[1], CTN_ERR_INVALID_ARGUMENT) << r.errors[1];
        EXPECT_NE(r.errors[1].find("vulkan " + std::string(op) + ": the id at position 2 is outside [0, 3)"),
                  std::string::npos)
            << r.errors[1];
        EXPECT_EQ(r.status[2], CTN_OK) << "the error flag is cleared once reported: " << r.errors[2];
        const std::vector<double> want = grad ? std::vector<double>{3, 4, 7, 8, 1 + 5 + 9, 2 + 6 + 10}
                                              : std::vector<double>{5, 6, 1, 2, 5, 6, 3, 4, 5, 6};
        EXPECT_EQ(r.outs[0], want);
        EXPECT_EQ(r.outs[2], want);
      }
    }
  }
  expect_clean(c.ctx);
}

// Gradients that accumulate (repeated ids, overlapping pooling windows, the convolution weight)
// are gathers in a fixed order: repeated runs are bitwise identical, and where the CPU backend
// adds in the same order (embedding_grad, max_pool2d_grad) the results are equal.
TEST(NnOps, AccumulatingGradientsAreDeterministic) {
  Ctx c;
  REQUIRE_VULKAN(c);
  std::mt19937 rng(5);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto randn = [&](size_t n) {
    std::vector<double> v(n);
    for (double &x : v) x = nd(rng);
    return v;
  };
  struct Case {
    const char *op;
    std::vector<In> ins;
    ctn_attrs at;
    bool exact_vs_cpu;
  };
  std::vector<Case> cases;
  {
    std::uniform_int_distribution<int> id(0, 4);
    In ids{CTN_I64, {2000}, {}};
    for (int i = 0; i < 2000; ++i) ids.v.push_back(id(rng));
    ctn_attrs at{};
    at.i[0] = 5;
    at.ni = 1;
    cases.push_back({CTN_OP_EMBEDDING_GRAD, {ids, {CTN_F32, {2000, 7}, randn(14000)}}, at, true});
  }
  {
    // 3x3 windows, stride 1, padding 1: every element is in up to 9 windows; ties from rounding.
    In x{CTN_F32, {2, 3, 9, 9}, randn(486)};
    for (double &v : x.v) v = std::round(v * 2) / 2;
    ctn_attrs at{};
    const int64_t a[6] = {3, 3, 1, 1, 1, 1};
    for (int k = 0; k < 6; ++k) at.i[k] = a[k];
    at.ni = 6;
    cases.push_back({CTN_OP_MAX_POOL2D_GRAD, {x, {CTN_F32, {2, 3, 9, 9}, randn(486)}, {CTN_F32, {2, 3, 9, 9}, randn(486)}},
                     at, true});
  }
  {
    ctn_attrs at{};
    const int64_t a[9] = {2, 1, 1, 2, 1, 2, 1, 3, 3};  // stride, pad, dilation, groups, KH, KW
    for (int k = 0; k < 9; ++k) at.i[k] = a[k];
    at.ni = 9;
    // x [4, 3, 11, 10], dy [4, 5, Ho, Wo]: Ho = (11 + 2 - 3) / 2 + 1 = 6, Wo = (10 + 4 - 5) / 1 + 1 = 10.
    cases.push_back({CTN_OP_CONV2D_GRAD_WEIGHT, {{CTN_F32, {4, 3, 11, 10}, randn(1320)}, {CTN_F32, {4, 5, 6, 10}, randn(1200)}},
                     at, false});
  }
  for (const Case &k : cases) {
    SCOPED_TRACE(k.op);
    OpRun vk, vk2, cpu;
    ASSERT_NO_FATAL_FAILURE(run_op(c.ctx, "vulkan", k.op, k.ins, &k.at, {k.ins, k.ins}, &vk));
    ASSERT_CTN(ctn_context_set_option(c.ctx, "vulkan", "record", "off"));
    ASSERT_NO_FATAL_FAILURE(run_op(c.ctx, "vulkan", k.op, k.ins, &k.at, {k.ins}, &vk2));
    ASSERT_CTN(ctn_context_set_option(c.ctx, "vulkan", "record", "on"));
    ASSERT_NO_FATAL_FAILURE(run_op(c.ctx, "cpu", k.op, k.ins, &k.at, {k.ins}, &cpu));
    EXPECT_EQ(vk.on_backend, 1u);
    ASSERT_EQ(vk.status, (std::vector<ctn_status>{CTN_OK, CTN_OK})) << vk.errors[0];
    ASSERT_EQ(vk2.status[0], CTN_OK) << vk2.errors[0];
    ASSERT_EQ(cpu.status[0], CTN_OK) << cpu.errors[0];
    EXPECT_EQ(vk.outs[0], vk.outs[1]) << "two runs differ";
    EXPECT_EQ(vk.outs[0], vk2.outs[0]) << "recorded and per-node runs differ";
    ASSERT_EQ(vk.outs[0].size(), cpu.outs[0].size());
    double worst = 0;
    for (size_t i = 0; i < cpu.outs[0].size(); ++i)
      worst = std::max(worst, std::fabs(vk.outs[0][i] - cpu.outs[0][i]));
    if (k.exact_vs_cpu)
      EXPECT_EQ(worst, 0.0);
    else
      EXPECT_LT(worst, 1e-4);
  }
  expect_clean(c.ctx);
}

// Matmul shapes spanning several blocks with ragged edges, transposes, broadcast batches, the
// fused bias + activation, f32 and f64: the kernel lavapipe selects (the subgroup one on CPU
// devices) and the tiled one (CHUTNEY_VULKAN_TILED_MATMUL=1) against the CPU backend.
TEST(Matmul, BothKernelsMatchCpu) {
  Ctx c;
  REQUIRE_VULKAN(c);
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  struct Mm {
    std::vector<int64_t> a, b;
    int ta, tb, act;  // act -1: plain matmul
  };
  const Mm mms[] = {{{70, 45}, {45, 37}, 0, 0, -1},      {{45, 70}, {45, 37}, 1, 0, -1},
                    {{70, 45}, {37, 45}, 0, 1, -1},      {{45, 70}, {37, 45}, 1, 1, -1},
                    {{3, 33, 20}, {20, 50}, 0, 0, -1},   {{2, 1, 17, 9}, {3, 9, 65}, 0, 0, -1},
                    {{129, 64}, {64, 1}, 0, 0, -1},      {{1, 300}, {300, 129}, 0, 0, -1},
                    {{40, 24}, {24, 33}, 0, 0, CTN_ACT_RELU}, {{40, 24}, {33, 24}, 0, 1, CTN_ACT_GELU}};
  for (ctn_dtype dt : {CTN_F32, CTN_F64}) {
    for (const Mm &m : mms) {
      SCOPED_TRACE(std::string(dt == CTN_F32 ? "f32 " : "f64 ") + std::to_string(m.a[m.a.size() - 2]) + "x" +
                   std::to_string(m.a.back()) + " ta " + std::to_string(m.ta) + " tb " + std::to_string(m.tb) +
                   " act " + std::to_string(m.act));
      auto fill = [&](const std::vector<int64_t> &shape) {
        In in{dt, shape, {}};
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        for (int64_t i = 0; i < n; ++i) in.v.push_back(u(rng));
        return in;
      };
      std::vector<In> ins = {fill(m.a), fill(m.b)};
      ctn_attrs at{};
      at.i[0] = m.ta;
      at.i[1] = m.tb;
      at.ni = 2;
      const char *op = CTN_OP_MATMUL;
      if (m.act >= 0) {
        op = CTN_OP_MATMUL_BIAS_ACT;
        at.i[2] = m.act;
        at.ni = 3;
        ins.push_back(fill({m.tb ? m.b[m.b.size() - 2] : m.b.back()}));
      }
      OpRun cpu, vk, tiled;
      ASSERT_NO_FATAL_FAILURE(run_op(c.ctx, "cpu", op, ins, &at, {ins}, &cpu));
      ASSERT_NO_FATAL_FAILURE(run_op(c.ctx, "vulkan", op, ins, &at, {ins}, &vk));
      setenv("CHUTNEY_VULKAN_TILED_MATMUL", "1", 1);
      run_op(c.ctx, "vulkan", op, ins, &at, {ins}, &tiled);
      unsetenv("CHUTNEY_VULKAN_TILED_MATMUL");
      EXPECT_EQ(vk.on_backend, 1u);
      EXPECT_EQ(tiled.on_backend, 1u);
      ASSERT_EQ(cpu.status[0], CTN_OK) << cpu.errors[0];
      ASSERT_EQ(vk.status[0], CTN_OK) << vk.errors[0];
      ASSERT_EQ(tiled.status[0], CTN_OK) << tiled.errors[0];
      ASSERT_EQ(vk.outs[0].size(), cpu.outs[0].size());
      ASSERT_EQ(tiled.outs[0].size(), cpu.outs[0].size());
      const double tol = dt == CTN_F32 ? 1e-4 : 1e-12;
      double worst = 0, worst_tiled = 0;
      for (size_t i = 0; i < cpu.outs[0].size(); ++i) {
        worst = std::max(worst, std::fabs(vk.outs[0][i] - cpu.outs[0][i]));
        worst_tiled = std::max(worst_tiled, std::fabs(tiled.outs[0][i] - cpu.outs[0][i]));
      }
      EXPECT_LT(worst, tol);
      EXPECT_LT(worst_tiled, tol);
    }
  }
  expect_clean(c.ctx);
}

// ---- CNN training on Vulkan -----------------------------------------------------------------------

// Images [n, 1, 12, 12] of noise plus a bright 4x4 square in one of four quadrants (the label).
struct Images {
  int64_t n = 256;
  std::vector<float> x;
  std::vector<int32_t> y;
};

Images make_images() {
  Images im;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  std::uniform_int_distribution<int> cls(0, 3), off(0, 2);
  im.x.resize(static_cast<size_t>(im.n * 144));
  for (float &v : im.x) v = nd(rng);
  for (int64_t i = 0; i < im.n; ++i) {
    int c = cls(rng);
    im.y.push_back(c);
    int r0 = (c / 2) * 6 + off(rng), c0 = (c % 2) * 6 + off(rng);
    for (int r = r0; r < r0 + 4; ++r)
      for (int q = c0; q < c0 + 4; ++q) im.x[static_cast<size_t>(i * 144 + r * 12 + q)] += 1.0f;
  }
  return im;
}

struct CnnResult {
  std::vector<double> losses;
  uint32_t conv = 0, conv_gw = 0, conv_gi = 0, bn = 0, pool = 0, pool_grad = 0, steps = 0, on_backend = 0;
};

// conv3x3(1->4) batch_norm relu maxpool2, conv3x3(4->8) relu avgpool2, fc 72-4; Adam; batch 32.
void train_cnn(ctn_context *ctx, const char *backend, const Images &im, int n_steps, CnnResult *res) {
  const int64_t batch = 32;
  Graph g;
  ASSERT_CTN(ctn_graph_create(ctx, 0, &g.g));
  ctn_model *m = nullptr;
  ASSERT_CTN(ctn_model_create(g.g, CTN_F32, 5, &m));
  std::unique_ptr<ctn_model, void (*)(ctn_model *)> mp(m, ctn_model_release);
  ctn_node x, labels, logits, loss;
  const int64_t xs[4] = {batch, 1, 12, 12}, ls[1] = {batch};
  ASSERT_CTN(ctn_input(g.g, "x", CTN_F32, 4, xs, &x));
  ASSERT_CTN(ctn_input(g.g, "labels", CTN_I32, 1, ls, &labels));
  const ctn_layer layers[] = {CTN_NN_CONV2D(4, 3, 1, 1), CTN_NN_BATCH_NORM(), CTN_NN_RELU(), CTN_NN_MAX_POOL2D(2),
                              CTN_NN_CONV2D(8, 3, 1, 1), CTN_NN_RELU(),       CTN_NN_AVG_POOL2D(2),
                              CTN_NN_FLATTEN(),          CTN_NN_LINEAR(4)};
  ASSERT_CTN(ctn_nn_sequential(m, x, static_cast<uint32_t>(sizeof layers / sizeof layers[0]), layers, &logits));
  ASSERT_CTN(ctn_cross_entropy(g.g, logits, labels, &loss));
  ctn_optimizer opt{};
  opt.struct_size = sizeof opt;
  opt.kind = CTN_OPTIM_ADAM;
  opt.lr = 0.01;
  ASSERT_CTN(ctn_nn_minimize(m, loss, &opt, nullptr));
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backend;
  Plan p;
  ASSERT_CTN(ctn_plan_compile(g.g, 1, &loss, &o, &p.p));
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  ASSERT_CTN(ctn_plan_stats_get(p.p, &st));
  res->steps = st.n_steps;
  ctn_plan_backend_steps(p.p, backend, nullptr, &res->on_backend);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_CONV2D, &res->conv);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_CONV2D_GRAD_WEIGHT, &res->conv_gw);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_CONV2D_GRAD_INPUT, &res->conv_gi);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_BATCH_NORM, &res->bn);
  uint32_t a = 0, b = 0;
  ctn_plan_backend_steps(p.p, backend, CTN_OP_MAX_POOL2D, &a);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_AVG_POOL2D, &b);
  res->pool = a + b;
  ctn_plan_backend_steps(p.p, backend, CTN_OP_MAX_POOL2D_GRAD, &a);
  ctn_plan_backend_steps(p.p, backend, CTN_OP_AVG_POOL2D_GRAD, &b);
  res->pool_grad = a + b;
  Tensor tx, tl, tloss;
  ASSERT_CTN(ctn_tensor_create(CTN_F32, 4, xs, nullptr, &tx.t));
  ASSERT_CTN(ctn_tensor_create(CTN_I32, 1, ls, nullptr, &tl.t));
  ASSERT_CTN(ctn_plan_output_create(p.p, 0, &tloss.t));
  const ctn_node feeds_n[2] = {x, labels};
  const ctn_tensor *feeds[2] = {tx.t, tl.t};
  ctn_tensor *outv[1] = {tloss.t};
  const int64_t nb = im.n / batch;
  for (int s = 0; s < n_steps; ++s) {
    const int64_t bi = s % nb;
    ASSERT_CTN(ctn_tensor_write(tx.t, im.x.data() + bi * batch * 144, static_cast<size_t>(batch * 144) * 4));
    ASSERT_CTN(ctn_tensor_write(tl.t, im.y.data() + bi * batch, static_cast<size_t>(batch) * 4));
    ASSERT_CTN(ctn_model_set_step(m, s + 1));
    ASSERT_CTN(ctn_model_run(m, p.p, 2, feeds_n, feeds, 1, outv));
    float l = 0;
    ASSERT_CTN(ctn_tensor_read(tloss.t, &l, 4));
    res->losses.push_back(l);
  }
}

double mean_of(const std::vector<double> &v, size_t a, size_t b) {
  double s = 0;
  for (size_t i = a; i < b; ++i) s += v[i];
  return s / static_cast<double>(b - a);
}

TEST(Training, CnnRunsEntirelyOnVulkan) {
  Ctx c;
  REQUIRE_VULKAN(c);
  Images im = make_images();
  const int n_steps = 40;
  CnnResult cpu, vk;
  ASSERT_NO_FATAL_FAILURE(train_cnn(c.ctx, "cpu", im, n_steps, &cpu));
  ASSERT_NO_FATAL_FAILURE(train_cnn(c.ctx, "vulkan", im, n_steps, &vk));
  // Per-node submission (record=off) runs the same kernels: the same losses, bit for bit.
  CnnResult vk_nodes;
  ASSERT_CTN(ctn_context_set_option(c.ctx, "vulkan", "record", "off"));
  ASSERT_NO_FATAL_FAILURE(train_cnn(c.ctx, "vulkan", im, 10, &vk_nodes));
  ASSERT_CTN(ctn_context_set_option(c.ctx, "vulkan", "record", "on"));
  for (int s = 0; s < 10; ++s)
    EXPECT_EQ(vk_nodes.losses[static_cast<size_t>(s)], vk.losses[static_cast<size_t>(s)]) << "step " << s;
  // Vulkan ran the convolutions, their gradients, batch norm and the pools: every plan step.
  EXPECT_EQ(vk.conv, 2u);
  EXPECT_EQ(vk.conv_gw, 2u);
  EXPECT_GE(vk.conv_gi, 1u);
  EXPECT_EQ(vk.bn, 1u);
  EXPECT_EQ(vk.pool, 2u);
  EXPECT_EQ(vk.pool_grad, 2u);
  EXPECT_EQ(vk.on_backend, vk.steps) << "every step of the CNN training plan must run on vulkan";
  const double first = mean_of(vk.losses, 0, 8), last = mean_of(vk.losses, n_steps - 8, n_steps);
  EXPECT_LT(last, 0.5 * first) << "the CNN loss did not decrease on vulkan";
  // Same model, data and initialisation: the CPU run follows nearly the same curve.
  for (int s = 0; s < n_steps; ++s)
    EXPECT_NEAR(vk.losses[static_cast<size_t>(s)], cpu.losses[static_cast<size_t>(s)],
                0.02 + 0.05 * cpu.losses[static_cast<size_t>(s)])
        << "step " << s;
  std::printf("cnn loss (first 8 / last 8 steps): cpu %.4f -> %.4f, vulkan %.4f -> %.4f\n", mean_of(cpu.losses, 0, 8),
              mean_of(cpu.losses, n_steps - 8, n_steps), first, last);
  expect_clean(c.ctx);
}

}  // namespace
