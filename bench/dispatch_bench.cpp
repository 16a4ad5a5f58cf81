// Dispatch overhead: a chain of N elementwise ops on tiny tensors, run as a compiled plan
// (µs per node) and eagerly (µs per op, recording the graph as it goes). The same op sequence
// is what bench/compare_dispatch.py runs in PyTorch eager mode in the same run.
//
//   dispatch_bench [--nodes N] [--size S] [--reps R] [--json FILE] [--help]
#include <chutney/chutney.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

#define CK(x) CTN_BENCH_CK("dispatch_bench", x)

double now_us() { return 1e6 * bench_wall_now(); }

void usage() {
  std::printf(
      "usage: dispatch_bench [--nodes N] [--size S] [--reps R] [--json FILE]\n"
      "Measures chutney's per-node dispatch cost: a compiled plan of N elementwise nodes on\n"
      "S-element f32 tensors (µs per node) and the same ops in eager mode (µs per op).\n"
      "Defaults: N=2000, S=16, R=200 plan runs / 20 eager passes. JSON goes to FILE or stdout.\n");
}

}  // namespace

int main(int argc, char **argv) {
  int nodes = 2000, reps = 200;
  int64_t size = 16;
  const char *json = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return bench_option_value("dispatch_bench", argc, argv, &i); };
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--nodes") nodes = std::atoi(next());
    else if (a == "--size") size = std::atoll(next());
    else if (a == "--reps") reps = std::atoi(next());
    else if (a == "--json") json = next();
    else {
      std::fprintf(stderr, "dispatch_bench: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  ctn_context *ctx;
  CK(ctn_context_create(nullptr, &ctx));
  std::vector<float> xd(static_cast<size_t>(size)), yd(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    xd[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i);
    yd[static_cast<size_t>(i)] = 0.5f + 0.001f * static_cast<float>(i);
  }
  ctn_tensor *xt, *yt;
  CK(ctn_tensor_create(CTN_F32, 1, &size, xd.data(), &xt));
  CK(ctn_tensor_create(CTN_F32, 1, &size, yd.data(), &yt));

  // Compiled plan.
  ctn_graph *g;
  CK(ctn_graph_create(ctx, 0, &g));
  ctn_node x, y;
  CK(ctn_input(g, "x", CTN_F32, 1, &size, &x));
  CK(ctn_input(g, "y", CTN_F32, 1, &size, &y));
  ctn_node out = bench_elementwise_chain("dispatch_bench", g, x, y, nodes);
  ctn_plan *p;
  CK(ctn_plan_compile(g, 1, &out, nullptr, &p));
  ctn_plan_stats st{};
  st.struct_size = sizeof st;
  CK(ctn_plan_stats_get(p, &st));
  ctn_tensor *ot;
  CK(ctn_plan_output_create(p, 0, &ot));
  ctn_node fn[2] = {x, y};
  const ctn_tensor *fv[2] = {xt, yt};
  for (int i = 0; i < 10; ++i) CK(ctn_plan_run(p, 2, fn, fv, 1, &ot));
  std::vector<double> plan_us;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_us();
    CK(ctn_plan_run(p, 2, fn, fv, 1, &ot));
    plan_us.push_back(now_us() - t0);
  }
  std::sort(plan_us.begin(), plan_us.end());
  double plan_med = plan_us[plan_us.size() / 2];
  float plan_result;
  {
    std::vector<float> o(static_cast<size_t>(size));
    CK(ctn_tensor_read(ot, o.data(), o.size() * 4));
    plan_result = o[static_cast<size_t>(size) - 1];
  }

  // Eager: a fresh eager graph per pass (the graph records every op, as autodiff needs).
  std::vector<double> eager_us;
  float eager_result = 0;
  const int eager_reps = std::max(3, reps / 10);
  for (int r = 0; r < eager_reps + 2; ++r) {
    ctn_graph *e;
    CK(ctn_graph_create(ctx, CTN_GRAPH_EAGER, &e));
    ctn_node ex, ey;
    CK(ctn_constant(e, xt, &ex));
    CK(ctn_constant(e, yt, &ey));
    double t0 = now_us();
    ctn_node eo = bench_elementwise_chain("dispatch_bench", e, ex, ey, nodes);
    double dt = now_us() - t0;
    if (r >= 2) eager_us.push_back(dt);  // first passes warm the kernel cache
    ctn_tensor *v;
    CK(ctn_graph_value(e, eo, &v));
    std::vector<float> o(static_cast<size_t>(size));
    CK(ctn_tensor_read(v, o.data(), o.size() * 4));
    eager_result = o[static_cast<size_t>(size) - 1];
    ctn_tensor_release(v);
    ctn_graph_release(e);
  }
  std::sort(eager_us.begin(), eager_us.end());
  double eager_med = eager_us[eager_us.size() / 2];

  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "{\n  \"benchmark\": \"dispatch\",\n  \"nodes\": %d,\n  \"tensor_elements\": %lld,\n"
                "  \"plan_steps\": %u,\n  \"plan_us_per_node\": %.4f,\n  \"plan_run_us_median\": %.1f,\n"
                "  \"eager_us_per_op\": %.4f,\n  \"eager_pass_us_median\": %.1f,\n"
                "  \"results_agree\": %s,\n  \"last_value\": %.9g\n}\n",
                nodes, static_cast<long long>(size), st.n_steps, plan_med / nodes, plan_med, eager_med / nodes,
                eager_med, plan_result == eager_result ? "true" : "false", static_cast<double>(plan_result));
  if (json) {
    FILE *f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "dispatch_bench: cannot write %s\n", json);
      return 1;
    }
    std::fputs(buf, f);
    std::fclose(f);
  }
  std::fputs(buf, stdout);
  ctn_tensor_release(ot);
  ctn_tensor_release(xt);
  ctn_tensor_release(yt);
  ctn_plan_release(p);
  ctn_graph_release(g);
  ctn_context_release(ctx);
  return plan_result == eager_result ? 0 : 1;
}
