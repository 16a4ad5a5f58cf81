// Vulkan backend figures, JSON out:
//  - per-run overhead of a plan segment recorded once into a command buffer ("record" = "on")
//    against one submission per node ("record" = "off"), on a chain of small elementwise ops;
//  - matmul GFLOP/s on the Vulkan device next to the CPU backend, same plans, f32.
// On lavapipe (Mesa's CPU driver) the numbers measure a correctness target, not a GPU.
//
//   vulkan_bench [--nodes N] [--reps R] [--sizes 256,512,1024] [--json FILE] [--help]
#include <chutney/chutney.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

#define CK(x) CTN_BENCH_CK("vulkan_bench", x)

// Seconds per plan run (median of `reps` timed runs after 3 warm-ups). feeds: the inputs.
double time_runs(ctn_plan *p, uint32_t nf, const ctn_node *fn, const ctn_tensor *const *fv, ctn_tensor *out, int reps) {
  ctn_tensor *outs[1] = {out};
  for (int i = 0; i < 3; ++i) CK(ctn_plan_run(p, nf, fn, fv, 1, outs));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    double t0 = bench_wall_now();
    CK(ctn_plan_run(p, nf, fn, fv, 1, outs));
    t.push_back(bench_wall_now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A chain of `n` elementwise ops on [size] f32 (add, mul, tanh, sub, relu, neg).
double chain_us(ctn_context *ctx, const char *record, int n, int64_t size, int reps) {
  CK(ctn_context_set_option(ctx, "vulkan", "record", record));
  ctn_graph *g;
  CK(ctn_graph_create(ctx, 0, &g));
  ctn_node x, y, h;
  CK(ctn_input(g, "x", CTN_F32, 1, &size, &x));
  CK(ctn_input(g, "y", CTN_F32, 1, &size, &y));
  h = bench_elementwise_chain("vulkan_bench", g, x, y, n);
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = "vulkan";
  ctn_plan *p;
  CK(ctn_plan_compile(g, 1, &h, &o, &p));
  std::vector<float> v(static_cast<size_t>(size), 0.5f);
  ctn_tensor *tx, *ty, *out;
  CK(ctn_tensor_create(CTN_F32, 1, &size, v.data(), &tx));
  CK(ctn_tensor_create(CTN_F32, 1, &size, v.data(), &ty));
  CK(ctn_plan_output_create(p, 0, &out));
  const ctn_node fn[2] = {x, y};
  const ctn_tensor *fv[2] = {tx, ty};
  double s = time_runs(p, 2, fn, fv, out, reps);
  ctn_tensor_release(tx);
  ctn_tensor_release(ty);
  ctn_tensor_release(out);
  ctn_plan_release(p);
  ctn_graph_release(g);
  CK(ctn_context_set_option(ctx, "vulkan", "record", "on"));
  return s * 1e6;
}

// GFLOP/s of C = A @ B (n x n, f32) on `backend`; A and B are variables (resident on the
// device), C is downloaded every run, as an application would.
double matmul_gflops(ctn_context *ctx, const char *backend, int64_t n, int reps) {
  ctn_graph *g;
  CK(ctn_graph_create(ctx, 0, &g));
  const int64_t shape[2] = {n, n};
  std::vector<float> v(static_cast<size_t>(n * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7) % 13) * 0.1f - 0.6f;
  ctn_tensor *t;
  CK(ctn_tensor_create(CTN_F32, 2, shape, v.data(), &t));
  ctn_node a, b, c;
  CK(ctn_variable(g, "a", t, &a));
  CK(ctn_variable(g, "b", t, &b));
  CK(ctn_matmul(g, a, b, 0, 0, &c));
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.backends = backend;
  ctn_plan *p;
  CK(ctn_plan_compile(g, 1, &c, &o, &p));
  uint32_t steps = 0;
  CK(ctn_plan_backend_steps(p, backend, "matmul", &steps));
  if (steps != 1) {
    std::fprintf(stderr, "vulkan_bench: matmul did not run on %s\n", backend);
    std::exit(1);
  }
  ctn_tensor *out;
  CK(ctn_plan_output_create(p, 0, &out));
  double s = time_runs(p, 0, nullptr, nullptr, out, reps);
  ctn_tensor_release(out);
  ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_graph_release(g);
  return 2.0 * static_cast<double>(n) * n * n / s * 1e-9;
}

}  // namespace

int main(int argc, char **argv) {
  int nodes = 64, reps = 20;
  std::string sizes = "256,512,1024", json;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--nodes") nodes = std::atoi(next().c_str());
    else if (a == "--reps") reps = std::atoi(next().c_str());
    else if (a == "--sizes") sizes = next();
    else if (a == "--json") json = next();
    else {
      std::printf("usage: vulkan_bench [--nodes N] [--reps R] [--sizes 256,512,1024] [--json FILE]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  ctn_context_options co{};
  co.struct_size = sizeof co;
  co.flags = CTN_CONTEXT_NO_AUTOLOAD;
  ctn_context *ctx;
  CK(ctn_context_create(&co, &ctx));
  CK(ctn_context_load_plugin(ctx, CTN_BENCH_CPU_PLUGIN));
  if (ctn_context_load_plugin(ctx, CTN_BENCH_VULKAN_PLUGIN) != CTN_OK) {
    std::fprintf(stderr, "vulkan_bench: %s\n", ctn_last_error());
    return 77;
  }
  CK(ctn_context_set_option(ctx, "vulkan", "placement", "always"));
  std::string device;
  uint32_t nb = 0;
  ctn_context_backend_count(ctx, &nb);
  for (uint32_t i = 0; i < nb; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    if (ctn_context_backend_info(ctx, i, &info) == CTN_OK && std::strcmp(info.name, "vulkan") == 0)
      device = info.description;
  }
  std::string out = "{\n  \"device\": \"";
  for (char ch : device) out += ch == '"' ? '\'' : ch;
  out += "\",\n";
  double rec = chain_us(ctx, "on", nodes, 256, reps), per = chain_us(ctx, "off", nodes, 256, reps);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  \"plan_overhead\": {\"nodes\": %d, \"size\": 256, \"recorded_us_per_run\": %.1f, "
                "\"per_node_submit_us_per_run\": %.1f, \"recorded_us_per_node\": %.2f, "
                "\"per_node_submit_us_per_node\": %.2f},\n  \"matmul_f32\": [",
                nodes, rec, per, rec / nodes, per / nodes);
  out += buf;
  bool first = true;
  for (size_t pos = 0; pos < sizes.size();) {
    size_t end = sizes.find(',', pos);
    if (end == std::string::npos) end = sizes.size();
    int64_t n = std::atoll(sizes.substr(pos, end - pos).c_str());
    pos = end + 1;
    int r = n >= 1024 ? std::max(3, reps / 4) : reps;
    double vk = matmul_gflops(ctx, "vulkan", n, r), cpu = matmul_gflops(ctx, "cpu", n, r);
    std::snprintf(buf, sizeof buf, "%s\n    {\"n\": %lld, \"vulkan_gflops\": %.2f, \"cpu_gflops\": %.2f}",
                  first ? "" : ",", static_cast<long long>(n), vk, cpu);
    out += buf;
    first = false;
  }
  out += "\n  ]\n}\n";
  std::fputs(out.c_str(), stdout);
  if (!json.empty()) {
    if (FILE *f = std::fopen(json.c_str(), "w")) {
      std::fputs(out.c_str(), f);
      std::fclose(f);
    }
  }
  ctn_context_release(ctx);
  return 0;
}
