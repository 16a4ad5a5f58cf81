// One context, several threads (chutney.h: "a ctn_context may be used from several threads").
// Each thread builds, compiles and runs its own training plan (conv, batch norm, pooling, GEMMs
// big enough for the pool, cross-entropy, gradients, SGD assignments) or does the same work on
// an eager graph (whose kernels come from the context's shared cache), and every result is
// compared bit for bit with the same work done one thread after another on the same context.
// Setups: the CPU backend with each GEMM (own, openblas), pool sizes 1 and 3 and both pool
// modes (shared, per_caller), OpenCL and Vulkan (every step asserted on the device). tools/test.d/30-tsan.sh runs this file under
// ThreadSanitizer against the core and the CPU backend.
#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kRuns = 3;      // plan runs (training steps) per thread
constexpr int kRounds = 2;    // concurrent rounds, each compared with the sequential result

#define OK(expr)                                                                      \
  do {                                                                                \
    ctn_status s_ = (expr);                                                           \
    if (s_ != CTN_OK) throw std::runtime_error(std::string(#expr) + ": " + ctn_last_error()); \
  } while (0)

struct Config {
  const char *name;
  const char *backend;
  const char *gemm;  // CPU only
  int threads;       // CPU only
  const char *pool = nullptr;  // CPU only: "per_caller" (default: shared)
};

// Deterministic pseudo-random data, different per seed.
std::vector<float> noise(size_t n, uint32_t seed, float scale) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto &x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / 16777216.0f - 0.5f);
  }
  return v;
}

struct TensorHolder {
  std::vector<ctn_tensor *> ts;
  ~TensorHolder() {
    for (auto *t : ts) ctn_tensor_release(t);
  }
  ctn_tensor *f32(std::vector<int64_t> shape, const std::vector<float> &data) {
    ctn_tensor *t = nullptr;
    OK(ctn_tensor_create(CTN_F32, static_cast<uint32_t>(shape.size()), shape.data(), data.data(), &t));
    ts.push_back(t);
    return t;
  }
  ctn_tensor *i32(std::vector<int64_t> shape, const std::vector<int32_t> &data) {
    ctn_tensor *t = nullptr;
    OK(ctn_tensor_create(CTN_I32, static_cast<uint32_t>(shape.size()), shape.data(), data.data(), &t));
    ts.push_back(t);
    return t;
  }
};

// Releases a handle at the end of the scope.
template <class T, void (*Release)(T *)>
struct Owned {
  T *p;
  ~Owned() { Release(p); }
};
using GraphOwner = Owned<ctn_graph, ctn_graph_release>;
using PlanOwner = Owned<ctn_plan, ctn_plan_release>;

std::vector<float> read(const ctn_tensor *t) {
  int64_t n = 0;
  OK(ctn_tensor_numel(t, &n));
  std::vector<float> v(static_cast<size_t>(n));
  OK(ctn_tensor_read(t, v.data(), v.size() * sizeof(float)));
  return v;
}

// `th` takes `t`; its values are appended to `out`.
void append_owned(TensorHolder &th, ctn_tensor *t, std::vector<float> &out) {
  th.ts.push_back(t);
  const std::vector<float> v = read(t);
  out.insert(out.end(), v.begin(), v.end());
}

// The model: x [8,3,16,16] -> conv 3x3 (16) -> batch norm -> relu -> 2x2 max-pool -> [8,1024]
// -> @ w2 [1024,64] + b2 -> tanh -> @ w3 [64,10] -> cross-entropy. The conv has enough work to
// split over the pool, the first GEMM is above the own GEMM's threading threshold, and the
// elementwise ops have >= 32768 elements.
struct Model {
  ctn_node x, labels, vars[6], loss, grads[6];
  void build(ctn_graph *g, TensorHolder &th, uint32_t seed, bool eager) {
    const int64_t xs[4] = {8, 3, 16, 16}, ls[1] = {8};
    ctn_tensor *xv = th.f32({8, 3, 16, 16}, noise(8 * 3 * 16 * 16, seed, 2.0f));
    std::vector<int32_t> lab(8);
    for (int i = 0; i < 8; ++i) lab[static_cast<size_t>(i)] = static_cast<int32_t>((seed + 3u * static_cast<uint32_t>(i)) % 10);
    ctn_tensor *lv = th.i32({8}, lab);
    if (eager) {
      OK(ctn_constant(g, xv, &x));
      OK(ctn_constant(g, lv, &labels));
    } else {
      OK(ctn_input(g, "x", CTN_F32, 4, xs, &x));
      OK(ctn_input(g, "labels", CTN_I32, 1, ls, &labels));
    }
    const std::vector<std::vector<int64_t>> shapes = {{16, 3, 3, 3}, {16}, {16}, {1024, 64}, {64}, {64, 10}};
    const float scales[6] = {0.6f, 0.2f, 0.2f, 0.1f, 0.2f, 0.5f};
    const char *names[6] = {"w1", "gamma", "beta", "w2", "b2", "w3"};
    for (size_t i = 0; i < 6; ++i) {
      size_t n = 1;
      for (int64_t d : shapes[i]) n *= static_cast<size_t>(d);
      std::vector<float> init = noise(n, seed * 7u + static_cast<uint32_t>(i) + 1u, scales[i]);
      if (i == 1)
        for (auto &v : init) v += 1.0f;  // gamma around 1
      OK(ctn_variable(g, names[i], th.f32(shapes[i], init), &vars[i]));
    }
    ctn_node c, bn, r, p, flat, h, hb, t, logits;
    OK(ctn_conv2d(g, x, vars[0], 1, 1, 1, 1, 1, 1, 1, &c));
    OK(ctn_batch_norm(g, c, vars[1], vars[2], 1e-5, &bn));
    OK(ctn_relu(g, bn, &r));
    OK(ctn_max_pool2d(g, r, 2, 2, 2, 2, 0, 0, &p));
    const int64_t fs[2] = {8, 1024};
    OK(ctn_reshape(g, p, 2, fs, &flat));
    OK(ctn_matmul(g, flat, vars[3], 0, 0, &h));
    OK(ctn_add(g, h, vars[4], &hb));
    OK(ctn_tanh(g, hb, &t));
    OK(ctn_matmul(g, t, vars[5], 0, 0, &logits));
    OK(ctn_cross_entropy(g, logits, labels, &loss));
    OK(ctn_grad(g, loss, 6, vars, grads));
    if (eager) return;
    ctn_node lr;
    OK(ctn_scalar(g, CTN_F32, 0.05, &lr));
    for (size_t i = 0; i < 6; ++i) {
      ctn_node step, nv, upd;
      OK(ctn_mul(g, grads[i], lr, &step));
      OK(ctn_sub(g, vars[i], step, &nv));
      OK(ctn_assign(g, vars[i], nv, &upd));
    }
    feeds[0] = xv;
    feeds[1] = lv;
  }
  const ctn_tensor *feeds[2] = {nullptr, nullptr};
};

// One thread's work on a compiled plan: kRuns training steps; returns the losses followed by
// every variable's final value.
std::vector<float> plan_work(ctn_context *ctx, const Config &su, uint32_t seed) {
  TensorHolder th;
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  GraphOwner gg{g};
  Model m;
  m.build(g, th, seed, false);
  ctn_compile_options co{};
  co.struct_size = sizeof co;
  co.backends = su.backend;
  ctn_plan *p = nullptr;
  OK(ctn_plan_compile(g, 1, &m.loss, &co, &p));
  PlanOwner pp{p};
  // Placement: every step on the backend under test (no silent fallback).
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  OK(ctn_plan_stats_get(p, &st));
  uint32_t on = 0;
  OK(ctn_plan_backend_steps(p, su.backend, nullptr, &on));
  if (on != st.n_steps)
    throw std::runtime_error(std::string(su.backend) + " runs " + std::to_string(on) + " of " +
                             std::to_string(st.n_steps) + " steps");
  ctn_tensor *lo = nullptr;
  OK(ctn_plan_output_create(p, 0, &lo));
  th.ts.push_back(lo);
  std::vector<float> out;
  const ctn_node fn[2] = {m.x, m.labels};
  for (int r = 0; r < kRuns; ++r) {
    OK(ctn_plan_run(p, 2, fn, m.feeds, 1, &lo));
    out.push_back(read(lo)[0]);
  }
  for (ctn_node v : m.vars) {
    ctn_tensor *t = nullptr;
    OK(ctn_plan_variable_read(p, v, &t));
    append_owned(th, t, out);
  }
  return out;
}

// The same model on an eager graph: forward and gradients computed node by node.
std::vector<float> eager_work(ctn_context *ctx, const Config &su, uint32_t seed) {
  TensorHolder th;
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, CTN_GRAPH_EAGER, &g));
  GraphOwner gg{g};
  Model m;
  m.build(g, th, seed, true);
  const char *where = nullptr;
  OK(ctn_graph_node_backend(g, m.loss, &where));
  if (std::strcmp(where, su.backend) != 0)
    throw std::runtime_error(std::string("eager loss ran on ") + where + ", not " + su.backend);
  std::vector<float> out;
  for (ctn_node n : {m.loss, m.grads[0], m.grads[1], m.grads[2], m.grads[3], m.grads[4], m.grads[5]}) {
    ctn_tensor *t = nullptr;
    OK(ctn_graph_value(g, n, &t));
    append_owned(th, t, out);
  }
  return out;
}

using Work = std::vector<float> (*)(ctn_context *, const Config &, uint32_t);

class Concurrency : public ::testing::TestWithParam<Config> {
 protected:
  ctn_context *ctx = nullptr;
  void SetUp() override {
    const Config &su = GetParam();
    ctn_context_options o{};
    o.struct_size = sizeof o;
    o.backends = su.backend;
    o.num_threads = su.threads;
    ctn_status s = ctn_context_create(&o, &ctx);
    if (s == CTN_ERR_UNAVAILABLE) GTEST_SKIP() << su.backend << " is not available here: " << ctn_last_error();
    ASSERT_EQ(s, CTN_OK) << ctn_last_error();
    if (su.gemm) {
      s = ctn_context_set_option(ctx, "cpu", "gemm", su.gemm);
      if (s == CTN_ERR_UNAVAILABLE) GTEST_SKIP() << "GEMM " << su.gemm << ": " << ctn_last_error();
      ASSERT_EQ(s, CTN_OK) << ctn_last_error();
      if (su.pool) {
        ASSERT_EQ(ctn_context_set_option(ctx, "cpu", "pool", su.pool), CTN_OK) << ctn_last_error();
      }
    } else {
      // Device backends: take every op (the placement policies may leave small ops elsewhere).
      ASSERT_EQ(ctn_context_set_option(ctx, su.backend, "placement", "always"), CTN_OK) << ctn_last_error();
    }
  }
  void TearDown() override { ctn_context_release(ctx); }

  // Runs `work` for seeds 1..kThreads one after another, then kRounds times concurrently (one
  // thread per seed, released together), and compares bit for bit.
  void check(Work work) {
    const Config &su = GetParam();
    std::vector<std::vector<float>> expected(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      try {
        expected[static_cast<size_t>(t)] = work(ctx, su, static_cast<uint32_t>(t + 1));
      } catch (const std::exception &e) {
        FAIL() << "sequential run " << t << ": " << e.what();
      }
      for (float v : expected[static_cast<size_t>(t)]) ASSERT_TRUE(std::isfinite(v));
    }
    // Different seeds must give different results, or the comparison below proves little.
    ASSERT_NE(expected[0], expected[1]);
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::vector<float>> got(kThreads);
      std::vector<std::string> errors(kThreads);
      std::atomic<int> ready{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          ready.fetch_add(1);
          while (ready.load() < kThreads) std::this_thread::yield();
          try {
            got[static_cast<size_t>(t)] = work(ctx, su, static_cast<uint32_t>(t + 1));
          } catch (const std::exception &e) {
            errors[static_cast<size_t>(t)] = e.what();
          }
        });
      for (auto &th : threads) th.join();
      for (int t = 0; t < kThreads; ++t) {
        const auto i = static_cast<size_t>(t);
        ASSERT_EQ(errors[i], "") << "round " << round << ", thread " << t;
        ASSERT_EQ(got[i].size(), expected[i].size());
        size_t diff = 0;
        for (size_t k = 0; k < got[i].size(); ++k)
          diff += std::memcmp(&got[i][k], &expected[i][k], sizeof(float)) != 0;
        EXPECT_EQ(diff, 0u) << "round " << round << ", thread " << t << ": " << diff << " of "
                            << got[i].size() << " values differ from the sequential run";
      }
    }
  }
};

TEST_P(Concurrency, PlansMatchSequentialRuns) { check(plan_work); }
TEST_P(Concurrency, EagerGraphsMatchSequentialRuns) { check(eager_work); }

INSTANTIATE_TEST_SUITE_P(Backends, Concurrency,
                         ::testing::Values(Config{"cpu_own_1", "cpu", "own", 1}, Config{"cpu_own_3", "cpu", "own", 3},
                                           Config{"cpu_openblas_1", "cpu", "openblas", 1},
                                           Config{"cpu_openblas_3", "cpu", "openblas", 3},
                                           Config{"cpu_own_3_per_caller", "cpu", "own", 3, "per_caller"},
                                           Config{"cpu_openblas_2_per_caller", "cpu", "openblas", 2, "per_caller"},
                                           Config{"opencl", "opencl", nullptr, 0},
                                           Config{"vulkan", "vulkan", nullptr, 0}),
                         [](const ::testing::TestParamInfo<Config> &i) { return std::string(i.param.name); });

// ctn_context_set_num_threads while other threads run plans and eager ops: no crash, no error
// (results may legitimately differ between pool sizes, so only statuses are checked here; the
// sanitizer run checks the pool's hand-over).
TEST(ConcurrencyResize, ThreadCountChangesWhilePlansRun) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.backends = "cpu";
  o.num_threads = 2;
  ctn_context *ctx = nullptr;
  ASSERT_EQ(ctn_context_create(&o, &ctx), CTN_OK) << ctn_last_error();
  std::atomic<bool> done{false};
  std::vector<std::string> errors(3);  // two workers, then the resizer
  std::vector<std::thread> workers;
  const Config su{"cpu", "cpu", "own", 2};
  for (int t = 0; t < 2; ++t)
    workers.emplace_back([&, t] {
      try {
        for (int i = 0; i < 3; ++i) {
          auto v = t == 0 ? plan_work(ctx, su, 1) : eager_work(ctx, su, 2);
          for (float x : v)
            if (!std::isfinite(x)) throw std::runtime_error("non-finite result");
        }
      } catch (const std::exception &e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
    });
  std::thread resizer([&] {
    int n = 1;
    while (!done.load()) {
      if (ctn_context_set_num_threads(ctx, n) != CTN_OK) {
        errors[2] = ctn_last_error();
        break;
      }
      n = n % 4 + 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (auto &w : workers) w.join();
  done = true;
  resizer.join();
  for (auto &e : errors) EXPECT_EQ(e, "");
  ctn_context_release(ctx);
}

}  // namespace
