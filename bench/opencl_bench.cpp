// OpenCL backend benchmarks, JSON on stdout. Modes:
//   opencl_bench gemm [n...]  the plugin's matmul kernel vs a direct CLBlastSgemm on the same
//                             device, queue and buffers (plugin loaded with dlopen, as the core does)
//   opencl_bench start        plugin load (ctn_context_create) to the first result of a small plan;
//                             run once with an empty CHUTNEY_CACHE_DIR (cold) and again (warm)
//   opencl_bench policy       re-measures the "auto" placement policy and prints its table
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <chutney/backend.h>
#include <chutney/chutney.h>
#include <clblast_c.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_plugin.h"

#ifndef CTN_OPENCL_PLUGIN_PATH
#define CTN_OPENCL_PLUGIN_PATH "ctn-opencl.so"
#endif

namespace {

using Clock = std::chrono::steady_clock;
double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

const ctn_backend_desc *load(const ctn_host_api *host) {
  return bench_load_backend("opencl_bench", CTN_OPENCL_PLUGIN_PATH, host);
}

int bench_gemm(int argc, char **argv) {
  const ctn_host_api host = bench_host();
  const ctn_backend_desc *d = load(&host);
  if (!d) return 1;
  ctn_backend_config cfg{sizeof cfg, 1};
  void *st = nullptr;
  if (d->init(&host, &cfg, &st) != CTN_OK) {
    std::printf("{\"bench\": \"opencl_gemm\", \"skipped\": \"%s\"}\n", bench_plugin_error());
    return 0;
  }
  d->set_option(st, "placement", "always");
  auto queue_fn = reinterpret_cast<cl_command_queue (*)(void *)>(d->get_proc_address(st, "ctn_opencl_queue"));
  cl_command_queue q = queue_fn(st);
  std::vector<int64_t> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {128, 256, 512, 1024};
  std::printf("{\"bench\": \"opencl_gemm\", \"device\": \"%s\", \"results\": [", d->describe(st));
  for (size_t si = 0; si < sizes.size(); ++si) {
    const int64_t n = sizes[si];
    void *a = nullptr, *b = nullptr, *c = nullptr;
    const uint64_t bytes = static_cast<uint64_t>(n * n) * 4;
    d->buffer_alloc(st, bytes, &a);
    d->buffer_alloc(st, bytes, &b);
    d->buffer_alloc(st, bytes, &c);
    std::vector<float> hv(static_cast<size_t>(n * n), 0.5f);
    d->upload(st, a, 0, hv.data(), bytes);
    d->upload(st, b, 0, hv.data(), bytes);
    ctn_tensor_desc in[2] = {}, out{};
    for (ctn_tensor_desc *t : {&in[0], &in[1], &out}) {
      t->dtype = CTN_F32;
      t->ndim = 2;
      t->shape[0] = t->shape[1] = n;
      t->strides[0] = n;
      t->strides[1] = 1;
    }
    ctn_attrs at{};
    at.ni = 2;
    ctn_op_signature sig{sizeof sig, 2, "matmul", in, &out, &at};
    ctn_kernel k{};
    if (d->get_kernel(st, &sig, &k) != CTN_OK) {
      std::fprintf(stderr, "get_kernel: %s\n", bench_plugin_error());
      return 1;
    }
    in[0].data = a;
    in[1].data = b;
    out.data = c;
    ctn_kernel_args args{2, 1, in, &out, &at, nullptr, 0};
    const int reps = n >= 1024 ? 3 : n >= 512 ? 5 : 20;
    auto time_it = [&](auto &&call) {
      call();
      d->synchronize(st);
      std::vector<double> t;
      for (int r = 0; r < 3; ++r) {
        auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) call();
        d->synchronize(st);
        t.push_back(ms(t0, Clock::now()) / reps);
      }
      std::sort(t.begin(), t.end());
      return t[0];
    };
    double plugin = time_it([&] { k.fn(k.state, &args); });
    double direct = time_it([&] {
      CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f,
                   static_cast<cl_mem>(a), 0, n, static_cast<cl_mem>(b), 0, n, 0.0f,
                   static_cast<cl_mem>(c), 0, n, &q, nullptr);
    });
    double gflop = 2.0 * n * n * n / 1e9;
    std::printf("%s{\"n\": %lld, \"plugin_ms\": %.3f, \"clblast_ms\": %.3f, \"plugin_gflops\": %.2f, "
                "\"clblast_gflops\": %.2f, \"ratio\": %.3f}",
                si ? ", " : "", static_cast<long long>(n), plugin, direct, gflop / (plugin / 1e3),
                gflop / (direct / 1e3), direct / plugin);
    if (k.release) k.release(k.state);
    d->buffer_free(st, a);
    d->buffer_free(st, b);
    d->buffer_free(st, c);
  }
  std::printf("]}\n");
  d->shutdown(st);
  return 0;
}

#define CHECK(x)                                                                   \
  do {                                                                             \
    if ((x) != CTN_OK) {                                                           \
      std::fprintf(stderr, "%s: %s\n", #x, ctn_last_error());                      \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

int bench_start() {
  auto t0 = Clock::now();
  ctn_context *ctx = nullptr;
  CHECK(ctn_context_create(nullptr, &ctx));
  auto t1 = Clock::now();
  if (ctn_context_set_backends(ctx, "opencl") != CTN_OK) {
    std::printf("{\"bench\": \"opencl_start\", \"skipped\": \"%s\"}\n", ctn_last_error());
    return 0;
  }
  CHECK(ctn_context_set_option(ctx, "opencl", "placement", "always"));
  ctn_graph *g = nullptr;
  CHECK(ctn_graph_create(ctx, 0, &g));
  int64_t s[2] = {64, 64};
  ctn_node a, b, c, y;
  CHECK(ctn_input(g, "a", CTN_F32, 2, s, &a));
  CHECK(ctn_matmul(g, a, a, 0, 0, &b));
  CHECK(ctn_relu(g, b, &c));
  CHECK(ctn_add(g, c, a, &y));
  ctn_plan *p = nullptr;
  CHECK(ctn_plan_compile(g, 1, &y, nullptr, &p));
  std::vector<float> v(64 * 64, 0.25f);
  ctn_tensor *at = nullptr, *yt = nullptr;
  CHECK(ctn_tensor_create(CTN_F32, 2, s, v.data(), &at));
  CHECK(ctn_plan_output_create(p, 0, &yt));
  const ctn_tensor *f[] = {at};
  CHECK(ctn_plan_run(p, 1, &a, f, 1, &yt));
  auto t2 = Clock::now();
  uint32_t n = 0;
  ctn_backend_info info{};
  info.struct_size = sizeof info;
  for (ctn_context_backend_count(ctx, &n); n-- > 0;) {
    ctn_context_backend_info(ctx, n, &info);
    if (!std::strcmp(info.name, "opencl")) break;
  }
  std::printf("{\"bench\": \"opencl_start\", \"context_ms\": %.1f, \"first_result_ms\": %.1f, "
              "\"total_ms\": %.1f, \"backend\": \"%s\"}\n",
              ms(t0, t1), ms(t1, t2), ms(t0, t2), info.description);
  ctn_tensor_release(at);
  ctn_tensor_release(yt);
  ctn_plan_release(p);
  ctn_graph_release(g);
  ctn_context_release(ctx);
  return 0;
}

int bench_policy() {
  const ctn_host_api host = bench_host();
  const ctn_backend_desc *d = load(&host);
  ctn_backend_config cfg{sizeof cfg, 1};
  void *st = nullptr;
  if (!d || d->init(&host, &cfg, &st) != CTN_OK) {
    std::printf("{\"bench\": \"opencl_policy\", \"skipped\": \"%s\"}\n", bench_plugin_error());
    return 0;
  }
  auto t0 = Clock::now();
  if (d->set_option(st, "policy", "remeasure") != CTN_OK) std::fprintf(stderr, "%s\n", bench_plugin_error());
  double took = ms(t0, Clock::now());
  auto report = reinterpret_cast<const char *(*)(void *)>(d->get_proc_address(st, "ctn_opencl_policy_report"));
  std::printf("{\"bench\": \"opencl_policy\", \"measure_ms\": %.0f, \"policy\": %s}\n", took, report(st));
  d->shutdown(st);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "gemm";
  if (mode == "gemm") return bench_gemm(argc, argv);
  if (mode == "start") return bench_start();
  if (mode == "policy") return bench_policy();
  std::fprintf(stderr, "usage: %s gemm [n...] | start | policy\n", argv[0]);
  return 2;
}
