// conv_bench: the three convolution kernels of a training step (conv2d, conv2d_grad_input,
// conv2d_grad_weight) for the built-in CNN's layer shapes, each compiled into its own plan and
// run on the preferred backend. Prints JSON: per op the median wall time and process CPU time
// per call and GFLOP/s (process CPU time stays meaningful on a loaded machine at --threads 1).
#include <chutney/chutney.h>

#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

#define CK(x) CTN_BENCH_CK("conv_bench", x)

struct Layer {
  const char *name;
  int64_t n, c, h, w, o, k, pad, groups = 1;
};

double cpu_now() { return bench_cpu_now(); }
double wall_now() { return bench_wall_now(); }

ctn_tensor *filled(int ndim, const int64_t *shape, unsigned seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  std::vector<float> v(static_cast<size_t>(n));
  for (auto &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
  ctn_tensor *t;
  CK(ctn_tensor_create(CTN_F32, static_cast<uint32_t>(ndim), shape, v.data(), &t));
  return t;
}

struct Result {
  double wall_ms, cpu_ms, gflops;
};

// Builds op(in0, in1) with `attrs`, compiles it and times `reps` runs after warm-ups.
Result time_op(ctn_context *ctx, const char *op, const int64_t *s0, const int64_t *s1, const ctn_attrs &a,
               double flops, int reps) {
  ctn_graph *g;
  CK(ctn_graph_create(ctx, 0, &g));
  ctn_node i0, i1, out;
  CK(ctn_input(g, "a", CTN_F32, 4, s0, &i0));
  CK(ctn_input(g, "b", CTN_F32, 4, s1, &i1));
  ctn_node ins[2] = {i0, i1};
  CK(ctn_op(g, op, 2, ins, &a, &out));
  ctn_plan *p;
  CK(ctn_plan_compile(g, 1, &out, nullptr, &p));
  ctn_tensor *t0 = filled(4, s0, 1), *t1 = filled(4, s1, 2), *ot;
  CK(ctn_plan_output_create(p, 0, &ot));
  const ctn_tensor *fv[2] = {t0, t1};
  for (int i = 0; i < 3; ++i) CK(ctn_plan_run(p, 2, ins, fv, 1, &ot));
  std::vector<double> walls, cpus;
  for (int r = 0; r < reps; ++r) {
    double w0 = wall_now(), c0 = cpu_now();
    CK(ctn_plan_run(p, 2, ins, fv, 1, &ot));
    walls.push_back(wall_now() - w0);
    cpus.push_back(cpu_now() - c0);
  }
  std::sort(walls.begin(), walls.end());
  std::sort(cpus.begin(), cpus.end());
  double w = walls[walls.size() / 2], c = cpus[cpus.size() / 2];
  ctn_tensor_release(ot);
  ctn_tensor_release(t0);
  ctn_tensor_release(t1);
  ctn_plan_release(p);
  ctn_graph_release(g);
  return {w * 1e3, c * 1e3, flops / w * 1e-9};
}

void usage() {
  std::printf(
      "usage: conv_bench [--backend NAME] [--threads N] [--batch N] [--pad P] [--reps N] [--json FILE]\n"
      "                  [--depthwise]\n"
      "Times conv2d, conv2d_grad_input and conv2d_grad_weight for the built-in CNN's layers\n"
      "(conv1: 1->32 on 28x28, conv2: 32->64 on 14x14, 5x5, padding 2; batch 64 by default)\n"
      "(--pad 0: the valid CNN, conv2 on 12x12) on the preferred backend (default cpu). Per op: median wall and process-CPU ms per call\n"
      "and GFLOP/s (2*N*O*Ho*Wo*C*KH*KW per call). Prints JSON, or writes it to FILE.\n"
      "--depthwise: conv2d alone for 3x3 depthwise layers (groups = channels, padding 1: 32 channels\n"
      "on 112x112, 128 on 56x56; MobileNet's), batch 1 by default.\n");
}

}  // namespace

int main(int argc, char **argv) {
  std::string backend = "cpu", json;
  int threads = 0, reps = 20;
  int64_t batch = -1, pad = 2;
  bool depthwise = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return bench_option_value("conv_bench", argc, argv, &i); };
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a == "--backend") {
      backend = next();
    } else if (a == "--threads") {
      threads = std::atoi(next());
    } else if (a == "--batch") {
      batch = std::atoll(next());
    } else if (a == "--pad") {
      pad = std::atoll(next());
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(next()));
    } else if (a == "--json") {
      json = next();
    } else if (a == "--depthwise") {
      depthwise = true;
    } else {
      std::fprintf(stderr, "conv_bench: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (batch < 0) batch = depthwise ? 1 : 64;
  if (threads > 0) {
    std::string t = std::to_string(threads);
    setenv("CHUTNEY_NUM_THREADS", t.c_str(), 1);
  }
  setenv("CHUTNEY_BACKEND", backend.c_str(), 1);
  ctn_context *ctx;
  CK(ctn_context_create(nullptr, &ctx));
  // pad 2 keeps 28 -> 28 and 14 -> 14 ("same"); pad 0 is the valid CNN: 28 -> 24, 12 -> 8.
  const int64_t side2 = pad >= 2 ? 14 : (28 + 2 * pad - 4) / 2;
  std::vector<Layer> layers = {{"conv1", batch, 1, 28, 28, 32, 5, pad}, {"conv2", batch, 32, side2, side2, 64, 5, pad}};
  if (depthwise)
    layers = {{"dw32_112", batch, 32, 112, 112, 32, 3, 1, 32}, {"dw128_56", batch, 128, 56, 56, 128, 3, 1, 128}};
  std::string out = "{\"bench\": \"conv\", \"backend\": \"" + backend + "\", \"threads\": " +
                    std::to_string(threads) + ", \"batch\": " + std::to_string(batch) + ", \"pad\": " + std::to_string(pad) + ", \"ops\": [";
  bool first = true;
  for (const Layer &l : layers) {
    const int64_t ho = l.h + 2 * l.pad - l.k + 1, wo = l.w + 2 * l.pad - l.k + 1;
    const int64_t xs[4] = {l.n, l.c, l.h, l.w}, ws[4] = {l.o, l.c / l.groups, l.k, l.k}, ys[4] = {l.n, l.o, ho, wo};
    const double flops = 2.0 * static_cast<double>(l.n * l.o * ho * wo * (l.c / l.groups) * l.k * l.k);
    ctn_attrs base{};
    const int64_t conv[7] = {1, 1, l.pad, l.pad, 1, 1, l.groups};
    for (int i = 0; i < 7; ++i) base.i[i] = conv[i];
    base.ni = 7;
    ctn_attrs gin = base, gw = base;
    gin.i[7] = l.h, gin.i[8] = l.w, gin.ni = 9;
    gw.i[7] = l.k, gw.i[8] = l.k, gw.ni = 9;
    struct Case {
      const char *op;
      const int64_t *s0, *s1;
      const ctn_attrs *a;
    } cases[] = {{"conv2d", xs, ws, &base}, {"conv2d_grad_input", ys, ws, &gin}, {"conv2d_grad_weight", xs, ys, &gw}};
    for (const Case &c : cases) {
      if (depthwise && c.a != &base) continue;  // the backward kernels are im2col + GEMM as before
      Result r = time_op(ctx, c.op, c.s0, c.s1, *c.a, flops, reps);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s\n  {\"layer\": \"%s\", \"op\": \"%s\", \"wall_ms\": %.3f, \"cpu_ms\": %.3f, \"gflops\": %.2f}",
                    first ? "" : ",", l.name, c.op, r.wall_ms, r.cpu_ms, r.gflops);
      out += buf;
      first = false;
      std::fprintf(stderr, "%-6s %-20s %9.3f ms wall %9.3f ms cpu %8.2f GFLOP/s\n", l.name, c.op, r.wall_ms,
                   r.cpu_ms, r.gflops);
    }
  }
  out += "\n]}\n";
  if (json.empty()) {
    std::fputs(out.c_str(), stdout);
  } else {
    std::FILE *f = std::fopen(json.c_str(), "w");
    if (!f || std::fputs(out.c_str(), f) < 0) {
      std::fprintf(stderr, "conv_bench: cannot write %s\n", json.c_str());
      return 1;
    }
    std::fclose(f);
  }
  ctn_context_release(ctx);
  return 0;
}
