// Several callers on one context: C threads, each running its own compiled plan, against one
// CPU backend whose pool either lends its one crew of workers to one caller at a time (the
// others run their parts on their own thread: option pool=shared, the default) or gives each
// concurrent caller a crew of its own (pool=per_caller). Reports plan runs per second, all
// callers together, for every (mode, callers) pair; the modes alternate within each repetition
// so that both see the same machine load.
//
//   concurrency_bench [--callers 1,2,4] [--pool N] [--runs R] [--reps K] [--model mlp|cnn]
//                     [--gemm own|openblas] [--json FILE]
#include <chutney/chutney.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace {

#define CK(x) CTN_BENCH_CK("concurrency_bench", x)

std::vector<float> fill(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
  return v;
}

ctn_tensor *tensor(std::vector<int64_t> shape, uint32_t seed) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  ctn_tensor *t = nullptr;
  CK(ctn_tensor_create(CTN_F32, static_cast<uint32_t>(shape.size()), shape.data(), fill(n, seed).data(), &t));
  return t;
}

// One caller's plan: inference of an MLP (batch 64, 784-512-512-10) or a training step of a
// small CNN (batch 32, conv 3x3 16 + relu + pool, fc 3136-128-10, SGD).
struct Caller {
  ctn_graph *g = nullptr;
  ctn_plan *p = nullptr;
  ctn_node in[2];
  ctn_tensor *feeds[2] = {nullptr, nullptr};
  std::vector<ctn_tensor *> owned;
  ctn_tensor *out = nullptr;
  uint32_t n_feeds = 1;

  void build(ctn_context *ctx, const std::string &model, uint32_t seed) {
    CK(ctn_graph_create(ctx, 0, &g));
    auto var = [&](std::vector<int64_t> s, const char *name) {
      ctn_tensor *t = tensor(s, seed++);
      owned.push_back(t);
      ctn_node v;
      CK(ctn_variable(g, name, t, &v));
      return v;
    };
    ctn_node loss;
    if (model == "mlp") {
      const int64_t xs[2] = {64, 784};
      CK(ctn_input(g, "x", CTN_F32, 2, xs, &in[0]));
      ctn_node h = in[0];
      const int64_t dims[4] = {784, 512, 512, 10};
      for (int l = 0; l < 3; ++l) {
        ctn_node m, r;
        CK(ctn_matmul(g, h, var({dims[l], dims[l + 1]}, "w"), 0, 0, &m));
        CK(ctn_add(g, m, var({dims[l + 1]}, "b"), &r));
        if (l < 2) CK(ctn_relu(g, r, &h));
        else h = r;
      }
      loss = h;
      feeds[0] = tensor({64, 784}, seed);
    } else {
      const int64_t xs[4] = {32, 1, 28, 28}, ls[1] = {32};
      CK(ctn_input(g, "x", CTN_F32, 4, xs, &in[0]));
      CK(ctn_input(g, "labels", CTN_I32, 1, ls, &in[1]));
      ctn_node w[4] = {var({16, 1, 3, 3}, "c"), var({3136, 128}, "w1"), var({128, 10}, "w2"), var({128}, "b1")};
      ctn_node c, r, pool, flat, h, hb, hr, logits, grads[4], lr;
      CK(ctn_conv2d(g, in[0], w[0], 1, 1, 1, 1, 1, 1, 1, &c));
      CK(ctn_relu(g, c, &r));
      CK(ctn_max_pool2d(g, r, 2, 2, 2, 2, 0, 0, &pool));
      const int64_t fs[2] = {32, 3136};
      CK(ctn_reshape(g, pool, 2, fs, &flat));
      CK(ctn_matmul(g, flat, w[1], 0, 0, &h));
      CK(ctn_add(g, h, w[3], &hb));
      CK(ctn_relu(g, hb, &hr));
      CK(ctn_matmul(g, hr, w[2], 0, 0, &logits));
      CK(ctn_cross_entropy(g, logits, in[1], &loss));
      CK(ctn_grad(g, loss, 4, w, grads));
      CK(ctn_scalar(g, CTN_F32, 0.01, &lr));
      for (int i = 0; i < 4; ++i) {
        ctn_node s, nv, u;
        CK(ctn_mul(g, grads[i], lr, &s));
        CK(ctn_sub(g, w[i], s, &nv));
        CK(ctn_assign(g, w[i], nv, &u));
      }
      feeds[0] = tensor({32, 1, 28, 28}, seed);
      std::vector<int32_t> lab(32);
      for (int i = 0; i < 32; ++i) lab[static_cast<size_t>(i)] = i % 10;
      CK(ctn_tensor_create(CTN_I32, 1, ls, lab.data(), &feeds[1]));
      n_feeds = 2;
    }
    CK(ctn_plan_compile(g, 1, &loss, nullptr, &p));
    CK(ctn_plan_output_create(p, 0, &out));
  }
  void run() { CK(ctn_plan_run(p, n_feeds, in, feeds, 1, &out)); }
  ~Caller() {
    ctn_tensor_release(out);
    for (auto *t : feeds) ctn_tensor_release(t);
    for (auto *t : owned) ctn_tensor_release(t);
    ctn_plan_release(p);
    ctn_graph_release(g);
  }
};

// Runs per second of `callers` threads doing `runs` runs each, released together.
double measure(std::vector<Caller> &cs, int callers, int runs) {
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  std::chrono::steady_clock::time_point t0;
  std::atomic<bool> go{false};
  for (int c = 0; c < callers; ++c)
    ts.emplace_back([&, c] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      for (int r = 0; r < runs; ++r) cs[static_cast<size_t>(c)].run();
    });
  while (ready.load() < callers) std::this_thread::yield();
  t0 = std::chrono::steady_clock::now();
  go = true;
  for (auto &t : ts) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return callers * runs / s;
}

std::vector<int> parse_list(const char *s) {
  std::vector<int> v;
  for (const char *p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<int> callers = {1, 2, 4};
  int pool = 0, runs = 20, reps = 5;
  std::string model = "mlp", gemm, json;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char *name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
    if (arg("--callers")) callers = parse_list(argv[++i]);
    else if (arg("--pool")) pool = std::atoi(argv[++i]);
    else if (arg("--runs")) runs = std::atoi(argv[++i]);
    else if (arg("--reps")) reps = std::atoi(argv[++i]);
    else if (arg("--model")) model = argv[++i];
    else if (arg("--gemm")) gemm = argv[++i];
    else if (arg("--json")) json = argv[++i];
    else {
      std::printf(
          "usage: concurrency_bench [--callers 1,2,4] [--pool N] [--runs R] [--reps K] [--model mlp|cnn]\n"
          "                         [--gemm own|openblas] [--json FILE]\n"
          "C caller threads on one context, each running its own plan R times, CPU pool of N (default:\n"
          "the context's default) in mode shared and per_caller, alternating, K repetitions; prints\n"
          "the median runs/s of all callers together per (mode, callers).\n");
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.backends = "cpu";
  o.num_threads = pool;
  ctn_context *ctx = nullptr;
  CK(ctn_context_create(&o, &ctx));
  if (!gemm.empty()) CK(ctn_context_set_option(ctx, "cpu", "gemm", gemm.c_str()));
  int max_callers = *std::max_element(callers.begin(), callers.end());
  std::string out = "[\n";
  {
    std::vector<Caller> cs(static_cast<size_t>(max_callers));
    for (int c = 0; c < max_callers; ++c) cs[static_cast<size_t>(c)].build(ctx, model, static_cast<uint32_t>(c * 10 + 1));
    const char *modes[2] = {"shared", "per_caller"};
    bool first = true;
    for (int n : callers) {
      std::vector<double> rate[2];
      for (int r = 0; r < reps; ++r)
        for (int m = 0; m < 2; ++m) {
          CK(ctn_context_set_option(ctx, "cpu", "pool", modes[m]));
          measure(cs, n, 2);  // warm-up: per_caller starts its crews here
          rate[m].push_back(measure(cs, n, runs));
        }
      for (int m = 0; m < 2; ++m) {
        std::sort(rate[m].begin(), rate[m].end());
        const double med = rate[m][rate[m].size() / 2];
        std::printf("%-4s pool=%-3d callers=%d %-10s %9.1f runs/s (min %.1f, max %.1f)\n", model.c_str(), pool, n,
                    modes[m], med, rate[m].front(), rate[m].back());
        char line[256];
        std::snprintf(line, sizeof line,
                      "%s  {\"model\": \"%s\", \"pool\": %d, \"callers\": %d, \"mode\": \"%s\", \"runs_per_s\": %.2f}",
                      first ? "" : ",\n", model.c_str(), pool, n, modes[m], med);
        out += line;
        first = false;
      }
    }
  }
  out += "\n]\n";
  if (!json.empty()) {
    if (std::FILE *f = std::fopen(json.c_str(), "w")) {
      std::fputs(out.c_str(), f);
      std::fclose(f);
    }
  }
  ctn_context_release(ctx);
  return 0;
}
