// unary_bench: f32 exp, log, tanh and sigmoid through a compiled plan on the preferred backend
// (the CPU's vectorised kernels, backends/cpu/vmath.h) next to a plain loop over glibc's float
// function on the same array (what the CPU kernel ran before), interleaved, best of --reps.
// Process CPU time per element, so that a loaded machine still gives a fair A/B at --threads 1.
// Prints JSON.
#include <chutney/chutney.h>

#include "bench_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

#define CK(x) CTN_BENCH_CK("unary_bench", x)

double cpu_now() { return bench_cpu_now(); }
float sigmoid_ref(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

struct Op {
  const char *name;
  ctn_status (*build)(ctn_graph *, ctn_node, ctn_node *);
  float (*ref)(float);
  float lo, hi;  // input range
};

float exp_ref(float x) { return std::exp(x); }
float log_ref(float x) { return std::log(x); }
float tanh_ref(float x) { return std::tanh(x); }

}  // namespace

const char *const kUsage =
    "usage: unary_bench [--n ELEMENTS] [--reps R] [--threads T]\n"
    "f32 exp/log/tanh/sigmoid: the backend's kernel vs a loop over glibc's float function,\n"
    "ns of process CPU time per element (best of R, interleaved); JSON on stdout.\n"
    "defaults: --n 1048576 --reps 20 --threads 1\n";

int main(int argc, char **argv) {
  int64_t n = 1 << 20;
  int reps = 20, threads = 1;
  if (int rc = bench_n_reps_threads("unary_bench", kUsage, argc, argv, &n, &reps, &threads); rc >= 0) return rc;
  ctn_context *ctx = nullptr;
  CK(ctn_context_create(nullptr, &ctx));
  CK(ctn_context_set_num_threads(ctx, threads));
  const Op ops[] = {{"exp", ctn_exp, exp_ref, -10, 10},
                    {"log", ctn_log, log_ref, 1e-3f, 100},
                    {"tanh", ctn_tanh, tanh_ref, -5, 5},
                    {"sigmoid", ctn_sigmoid, sigmoid_ref, -10, 10}};
  std::printf("{\n  \"n\": %lld, \"threads\": %d, \"reps\": %d,\n  \"ops\": [\n", static_cast<long long>(n), threads,
              reps);
  for (size_t k = 0; k < std::size(ops); ++k) {
    const Op &op = ops[k];
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[static_cast<size_t>(i)] = op.lo + (op.hi - op.lo) * static_cast<float>(i) / static_cast<float>(n);
    ctn_graph *g = nullptr;
    CK(ctn_graph_create(ctx, 0, &g));
    ctn_node in = CTN_NODE_NONE, out = CTN_NODE_NONE;
    CK(ctn_input(g, "x", CTN_F32, 1, &n, &in));
    CK(op.build(g, in, &out));
    ctn_plan *p = nullptr;
    CK(ctn_plan_compile(g, 1, &out, nullptr, &p));
    ctn_tensor *xt = nullptr, *yt = nullptr;
    CK(ctn_tensor_create(CTN_F32, 1, &n, x.data(), &xt));
    CK(ctn_plan_output_create(p, 0, &yt));
    const ctn_tensor *feeds[] = {xt};
    ctn_tensor *outs[] = {yt};
    double best_plan = 1e30, best_libm = 1e30;
    volatile float sink = 0;
    for (int r = 0; r < reps + 2; ++r) {
      double t0 = cpu_now();
      CK(ctn_plan_run(p, 1, &in, feeds, 1, outs));
      double t1 = cpu_now();
      for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = op.ref(x[static_cast<size_t>(i)]);
      double t2 = cpu_now();
      sink = sink + y[static_cast<size_t>(n / 2)];
      if (r >= 2) {  // two warm-ups
        best_plan = std::min(best_plan, t1 - t0);
        best_libm = std::min(best_libm, t2 - t1);
      }
    }
    const double ns_plan = 1e9 * best_plan / static_cast<double>(n), ns_libm = 1e9 * best_libm / static_cast<double>(n);
    std::printf("    {\"op\": \"%s\", \"plan_ns_per_elem\": %.3f, \"libm_loop_ns_per_elem\": %.3f, \"speedup\": %.2f}%s\n",
                op.name, ns_plan, ns_libm, ns_libm / ns_plan, k + 1 < std::size(ops) ? "," : "");
    ctn_tensor_release(xt);
    ctn_tensor_release(yt);
    ctn_plan_release(p);
    ctn_graph_release(g);
  }
  std::printf("  ]\n}\n");
  ctn_context_release(ctx);
  return 0;
}
