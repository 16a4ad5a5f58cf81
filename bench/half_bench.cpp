// half_bench: matmul and an elementwise add in f32, bf16 and f16 through a compiled plan on the
// CPU backend (n x n @ n x n). The 16-bit matmul on each path of the option half_matmul:
// "convert" (the default: the f32 GEMM between conversions), "own" (bf16 on the own bf16 GEMM
// where the CPU has AVX512_BF16, else as "convert") and "onednn" (oneDNN's 16-bit matmul; where
// oneDNN has only reference code for it, the row repeats "convert"); the add is the native 16-bit
// kernel. Wall time, best of --reps after two warm-ups, the rows run in turn three times (best
// of all); JSON on stdout.
#include <chutney/chutney.h>
#include <chutney/desc.h>

#include "bench_util.h"

#include <algorithm>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

#define CK(x) CTN_BENCH_CK("half_bench", x)

// Best wall seconds of one run of `op` (matmul or add) on two n x n inputs of `dt`.
double time_op(ctn_context *ctx, ctn_dtype dt, bool matmul, int64_t n, int reps) {
  const int64_t shape[2] = {n, n};
  std::vector<uint16_t> h(static_cast<size_t>(n * n));
  std::vector<float> f(h.size());
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    h[i] = dt == CTN_F16 ? ctn_desc_f32_to_f16(f[i]) : ctn_desc_f32_to_bf16(f[i]);
  }
  const void *data = dt == CTN_F32 ? static_cast<const void *>(f.data()) : h.data();
  ctn_graph *g = nullptr;
  CK(ctn_graph_create(ctx, 0, &g));
  ctn_node a, b, y;
  CK(ctn_input(g, "a", dt, 2, shape, &a));
  CK(ctn_input(g, "b", dt, 2, shape, &b));
  if (matmul) CK(ctn_matmul(g, a, b, 0, 0, &y));
  else CK(ctn_add(g, a, b, &y));
  ctn_plan *p = nullptr;
  CK(ctn_plan_compile(g, 1, &y, nullptr, &p));
  ctn_tensor *at = nullptr, *bt = nullptr, *yt = nullptr;
  CK(ctn_tensor_create(dt, 2, shape, data, &at));
  CK(ctn_tensor_create(dt, 2, shape, data, &bt));
  CK(ctn_plan_output_create(p, 0, &yt));
  const ctn_node in[2] = {a, b};
  const ctn_tensor *feeds[2] = {at, bt};
  ctn_tensor *outs[1] = {yt};
  double best = 1e30;
  for (int r = 0; r < reps + 2; ++r) {
    const double t0 = bench_wall_now();
    CK(ctn_plan_run(p, 2, in, feeds, 1, outs));
    if (r >= 2) best = std::min(best, bench_wall_now() - t0);
  }
  ctn_tensor_release(at);
  ctn_tensor_release(bt);
  ctn_tensor_release(yt);
  ctn_plan_release(p);
  ctn_graph_release(g);
  return best;
}

}  // namespace

const char *const kUsage =
    "usage: half_bench [--n N] [--reps R] [--threads T]\n"
    "n x n matmul and add in f32, bf16, f16 on the CPU backend; best wall time of R;\n"
    "JSON on stdout. defaults: --n 512 --reps 10 --threads 1\n";

int main(int argc, char **argv) {
  int64_t n = 512;
  int reps = 10, threads = 1;
  if (int rc = bench_n_reps_threads("half_bench", kUsage, argc, argv, &n, &reps, &threads); rc >= 0) return rc;
  ctn_context *ctx = nullptr;
  CK(ctn_context_create(nullptr, &ctx));
  CK(ctn_context_set_num_threads(ctx, threads));
  std::printf("{\n  \"n\": %lld, \"threads\": %d, \"reps\": %d,\n  \"results\": [\n", static_cast<long long>(n),
              threads, reps);
  struct Row {
    const char *op;
    ctn_dtype dt;
    const char *path;  // half_matmul option
  };
  const Row rows[] = {{"matmul", CTN_F32, "auto"},     {"matmul", CTN_BF16, "own"},   {"matmul", CTN_BF16, "convert"},
                      {"matmul", CTN_BF16, "onednn"}, {"matmul", CTN_F16, "convert"}, {"matmul", CTN_F16, "onednn"},
                      {"add", CTN_F32, "auto"},       {"add", CTN_BF16, "auto"},      {"add", CTN_F16, "auto"}};
  const bool have_onednn = ctn_context_set_option(ctx, "cpu", "half_matmul", "onednn") == CTN_OK;
  double best[std::size(rows)];
  std::fill(std::begin(best), std::end(best), 1e30);
  for (int round = 0; round < 3; ++round)
    for (size_t k = 0; k < std::size(rows); ++k) {
      const Row &r = rows[k];
      if (!std::strcmp(r.path, "onednn") && !have_onednn) continue;
      CK(ctn_context_set_option(ctx, "cpu", "half_matmul", r.path));
      best[k] = std::min(best[k], time_op(ctx, r.dt, !std::strcmp(r.op, "matmul"), n, reps));
    }
  for (size_t k = 0; k < std::size(rows); ++k) {
    const Row &r = rows[k];
    const bool matmul = !std::strcmp(r.op, "matmul");
    if (!std::strcmp(r.path, "onednn") && !have_onednn) continue;
    const double s = best[k];
    const double flops = matmul ? 2.0 * n * n * n : static_cast<double>(n) * n;
    std::printf("    {\"op\": \"%s\", \"dtype\": \"%s\", \"path\": \"%s\", \"ms\": %.4f, \"gflops\": %.2f}%s\n",
                r.op, ctn_dtype_name(r.dt), r.dt == CTN_F32 ? "f32" : matmul ? r.path : "native", 1e3 * s, flops / s * 1e-9,
                k + 1 < std::size(rows) ? "," : "");
  }
  std::printf("  ]\n}\n");
  ctn_context_release(ctx);
  return 0;
}
