// pool_bench: max_pool2d / avg_pool2d for the pooling layers of common CNNs (ResNet, ShuffleNet
// and SqueezeNet stems, Inception-style 3x3/1, 2x2/2, global 7x7), each compiled into its own
// plan and run on the CPU backend at 1 and 2 threads. Prints JSON: per case the best and the
// median wall time per run (plan dispatch and the output's copy out included) after warm-ups,
// at 1 thread the best process CPU time per run (meaningful on a loaded machine too), the best
// time of the same plan without the pooling (copy_out_ms) and the kernel's share (kernel_ms_*:
// the difference of the two bests).
// bench/ort_pool.py times onnxruntime on the same cases (docs/BENCHMARKS.md, "Pooling (issue 25)").
#include <chutney/chutney.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace {

#define CK(x) CTN_BENCH_CK("pool_bench", x)

struct Case {
  const char *name;
  bool max;
  int64_t n, c, h, w;
  int32_t k, s, p, include_pad;
};

// The same list as bench/ort_pool.py.
const Case kCases[] = {
    {"resnet_stem_max3x3s2p1", true, 1, 64, 112, 112, 3, 2, 1, 0},
    {"shufflenet_stem_max3x3s2p1", true, 1, 24, 112, 112, 3, 2, 1, 0},
    {"squeezenet_max3x3s2", true, 1, 96, 109, 109, 3, 2, 0, 0},
    {"max2x2s2", true, 1, 64, 112, 112, 2, 2, 0, 0},
    {"max3x3s1p1", true, 1, 64, 56, 56, 3, 1, 1, 0},
    {"avg3x3s1p1_excl", false, 1, 64, 56, 56, 3, 1, 1, 0},
    {"avg3x3s2p1_incl", false, 1, 64, 112, 112, 3, 2, 1, 1},
    {"avg2x2s2", false, 1, 64, 56, 56, 2, 2, 0, 0},
    {"global_avg7x7", false, 1, 512, 7, 7, 7, 1, 0, 0},
    {"batch8_max3x3s2p1", true, 8, 64, 56, 56, 3, 2, 1, 0},
    // k 0: mean over axes 2, 3 with keepdims, what the ONNX importer makes of GlobalAveragePool
    {"global_avg7x7_mean", false, 1, 512, 7, 7, 0, 1, 0, 0},
};

double cpu_now() { return bench_cpu_now(); }
double wall_now() { return bench_wall_now(); }

struct Times {
  double best, median, cpu;  // ms per run: wall best and median, process CPU time best
};

// Runs of a plan computing build(g, x) from a variable x of `shape`: x stays in the backend's
// memory, so a run is the kernel plus the output's copy out (a fed input would add its copy in,
// 3.2 MB for the ResNet stem).
template <class Build>
Times time_plan(ctn_context *ctx, const int64_t shape[4], int reps, Build build) {
  ctn_graph *g = nullptr;
  CK(ctn_graph_create(ctx, 0, &g));
  std::vector<float> x(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]));
  uint32_t seed = 12345;
  for (auto &v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
  ctn_tensor *xt = nullptr, *yt = nullptr;
  CK(ctn_tensor_create(CTN_F32, 4, shape, x.data(), &xt));
  ctn_node in = CTN_NODE_NONE;
  CK(ctn_variable(g, "x", xt, &in));
  const ctn_node out = build(g, in);
  ctn_plan *p = nullptr;
  CK(ctn_plan_compile(g, 1, &out, nullptr, &p));
  CK(ctn_plan_output_create(p, 0, &yt));
  ctn_tensor *outs[] = {yt};
  std::vector<double> t;
  double cpu = 1e30;
  for (int r = 0; r < reps + 3; ++r) {
    const double t0 = wall_now(), c0 = cpu_now();
    CK(ctn_plan_run(p, 0, nullptr, nullptr, 1, outs));
    const double c1 = cpu_now();
    if (r >= 3) t.push_back(1e3 * (wall_now() - t0)), cpu = std::min(cpu, 1e3 * (c1 - c0));
  }
  std::sort(t.begin(), t.end());
  ctn_tensor_release(xt);
  ctn_tensor_release(yt);
  ctn_plan_release(p);
  ctn_graph_release(g);
  return {t.front(), t[t.size() / 2], cpu};
}

Times time_case(ctn_context *ctx, const Case &c, int reps) {
  const int64_t shape[4] = {c.n, c.c, c.h, c.w};
  return time_plan(ctx, shape, reps, [&c](ctn_graph *g, ctn_node x) {
    ctn_node y = CTN_NODE_NONE;
    const int32_t axes[2] = {2, 3};
    if (c.k == 0)
      CK(ctn_mean(g, x, 2, axes, 1, &y));
    else if (c.max)
      CK(ctn_max_pool2d(g, x, c.k, c.k, c.s, c.s, c.p, c.p, &y));
    else
      CK(ctn_avg_pool2d(g, x, c.k, c.k, c.s, c.s, c.p, c.p, c.include_pad, &y));
    return y;
  });
}

// The same plan without the kernel: the output's shape as a variable, copied out.
Times time_copy_out(ctn_context *ctx, const Case &c, int reps) {
  const int64_t k = c.k ? c.k : c.h;  // the mean: one output per plane
  const int64_t shape[4] = {c.n, c.c, (c.h + 2 * c.p - k) / c.s + 1, (c.w + 2 * c.p - k) / c.s + 1};
  return time_plan(ctx, shape, reps, [](ctn_graph *, ctn_node x) { return x; });
}

}  // namespace

int main(int argc, char **argv) {
  int reps = 50;
  const char *only = nullptr;
  const char *usage =
      "usage: pool_bench [--reps R] [--case NAME]\n"
      "f32 max/avg pooling on the CPU backend at 1 and 2 threads: best and median ms per\n"
      "plan run over R runs (after 3 warm-ups); JSON on stdout. default --reps 50.\n";
  auto set = [&](const std::string &o, const char *v) {
    if (o == "--reps") reps = std::atoi(v);
    else if (o == "--case") only = v;
    else return false;
    return true;
  };
  if (int rc = bench_options("pool_bench", usage, argc, argv, set); rc >= 0) return rc;
  if (reps < 1) {
    std::fprintf(stderr, "pool_bench: --reps must be >= 1\n");
    return 2;
  }
  ctn_context *ctx = nullptr;
  ctn_context_options opt{};
  opt.struct_size = sizeof opt;
  opt.backends = "cpu";
  opt.num_threads = 2;
  CK(ctn_context_create(&opt, &ctx));
  std::printf("{\n  \"reps\": %d,\n  \"cases\": [\n", reps);
  bool first = true;
  for (const Case &c : kCases) {
    if (only && std::strcmp(only, c.name)) continue;
    Times tm[2];
    for (int t = 0; t < 2; ++t) {
      CK(ctn_context_set_num_threads(ctx, t + 1));
      tm[t] = time_case(ctx, c, reps);
    }
    const Times copy = time_copy_out(ctx, c, reps);
    std::printf("%s    {\"name\": \"%s\", \"op\": \"%s\", \"shape\": [%lld, %lld, %lld, %lld], \"k\": %d, \"s\": %d, "
                "\"p\": %d, \"count_include_pad\": %d, \"ms_1t\": %.4f, \"ms_1t_median\": %.4f, \"cpu_ms_1t\": %.4f, "
                "\"ms_2t\": %.4f, \"ms_2t_median\": %.4f, \"copy_out_ms\": %.4f, \"kernel_ms_1t\": %.4f, "
                "\"kernel_ms_2t\": %.4f}",
                first ? "" : ",\n", c.name, c.k == 0 ? "mean" : c.max ? "max_pool2d" : "avg_pool2d", static_cast<long long>(c.n),
                static_cast<long long>(c.c), static_cast<long long>(c.h), static_cast<long long>(c.w), c.k, c.s, c.p,
                c.include_pad, tm[0].best, tm[0].median, tm[0].cpu, tm[1].best, tm[1].median, copy.best,
                tm[0].best - copy.best, tm[1].best - copy.best);
    first = false;
  }
  std::printf("\n  ]\n}\n");
  ctn_context_release(ctx);
  return 0;
}
