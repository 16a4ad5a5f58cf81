// GEMM benchmark: the CPU plugin's matmul kernel (OpenBLAS path and own GEMM) against a direct
// cblas_sgemm call on the same buffers. Prints one JSON object.
//
//   gemm_bench [--plugin PATH] [--json FILE] [--sizes 256,512,...] [--threads 1,2] [--help]
//
// The plugin path defaults to $CTN_CPU_PLUGIN, else the build-tree path compiled in.
#include <chutney/backend.h>
#include <chutney/ops.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_plugin.h"

#ifndef CTN_CPU_PLUGIN_PATH
#define CTN_CPU_PLUGIN_PATH "ctn-cpu.so"
#endif

namespace {

std::vector<int> parse_list(const char *s) {
  std::vector<int> v;
  for (const char *p = s; *p;) {
    v.push_back(std::atoi(p));
    const char *c = std::strchr(p, ',');
    if (!c) break;
    p = c + 1;
  }
  return v;
}

std::string json_escape(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

std::string cpu_model() {
  std::FILE *f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "unknown";
  char line[512];
  std::string m = "unknown";
  while (std::fgets(line, sizeof line, f))
    if (!std::strncmp(line, "model name", 10)) {
      const char *c = std::strchr(line, ':');
      if (c) m = c + 2;
      while (!m.empty() && m.back() == '\n') m.pop_back();
      break;
    }
  std::fclose(f);
  return m;
}

template <class F>
double median_seconds(F &&f, double flops) {
  f();  // warm-up: page faults, packing buffers, thread start
  f();
  int reps = static_cast<int>(std::clamp(1.5e10 / flops, 3.0, 50.0));
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row {
  int n, threads;
  const char *impl;
  double gflops, ratio;
};

}  // namespace

int main(int argc, char **argv) {
  const char *plugin = std::getenv("CTN_CPU_PLUGIN");
  if (!plugin || !*plugin) plugin = CTN_CPU_PLUGIN_PATH;
  const char *json_path = nullptr;
  std::vector<int> sizes = {256, 512, 1024, 2048};
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: gemm_bench [--plugin PATH] [--json FILE] [--sizes 256,512] [--threads 1,2]\n"
          "Times the CPU plugin's f32 matmul kernel (gemm=openblas and gemm=own) against a\n"
          "direct cblas_sgemm on the same buffers; square n x n x n; median of several reps\n"
          "after two warm-ups. Prints JSON (or writes it to FILE). ratio = GFLOP/s divided by\n"
          "the direct cblas_sgemm GFLOP/s at the same n and thread count.\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gemm_bench: %s needs a value (see --help)\n", a.c_str());
      return 2;
    }
    if (a == "--plugin") plugin = argv[++i];
    else if (a == "--json") json_path = argv[++i];
    else if (a == "--sizes") sizes = parse_list(argv[++i]);
    else if (a == "--threads") threads = parse_list(argv[++i]);
    else {
      std::fprintf(stderr, "gemm_bench: unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }

  const ctn_host_api host = bench_host();
  const ctn_backend_desc *desc = bench_load_backend("gemm_bench", plugin, &host);
  if (!desc) return 1;
  ctn_backend_config cfg{sizeof cfg, threads.empty() ? 1 : threads[0]};
  void *be = nullptr;
  if (desc->init(&host, &cfg, &be) != CTN_OK) {
    std::fprintf(stderr, "gemm_bench: init failed: %s\n", bench_plugin_error());
    return 1;
  }
  auto isa_fn = reinterpret_cast<const char *(*)(void *)>(desc->get_proc_address(be, "ctn_cpu_gemm_isa"));
  bool has_openblas = desc->set_option(be, "gemm", "openblas") == CTN_OK;

  std::vector<Row> rows;
  for (int th : threads) {
    if (desc->set_option(be, "num_threads", std::to_string(th).c_str()) != CTN_OK) {
      std::fprintf(stderr, "gemm_bench: %s\n", bench_plugin_error());
      return 1;
    }
    for (int n : sizes) {
      std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
        b[i] = static_cast<float>((i * 104729) % 997) * 1e-3f - 0.5f;
      }
      ctn_tensor_desc da{}, dc{};
      da.dtype = CTN_F32;
      da.ndim = 2;
      da.shape[0] = da.shape[1] = n;
      da.strides[0] = n;
      da.strides[1] = 1;
      ctn_tensor_desc db = da;
      dc = da;
      ctn_attrs attrs{};
      attrs.ni = 2;
      ctn_op_signature sig{sizeof sig, 2, CTN_OP_MATMUL, nullptr, &dc, &attrs};
      ctn_tensor_desc ins[2] = {da, db};
      sig.inputs = ins;
      ctn_kernel k{};
      if (desc->get_kernel(be, &sig, &k) != CTN_OK) {
        std::fprintf(stderr, "gemm_bench: get_kernel: %s\n", bench_plugin_error());
        return 1;
      }
      ins[0].data = a.data();
      ins[1].data = b.data();
      dc.data = c.data();
      ctn_kernel_args args{2, 1, ins, &dc, &attrs, nullptr, 0};
      double flops = 2.0 * n * n * n;

      openblas_set_num_threads(th);
      double t_ref = median_seconds(
          [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                        b.data(), n, 0.0f, c.data(), n);
          },
          flops);
      double ref = flops / t_ref * 1e-9;
      rows.push_back({n, th, "cblas_sgemm_direct", ref, 1.0});
      for (const char *mode : {"openblas", "own"}) {
        if (!std::strcmp(mode, "openblas") && !has_openblas) continue;
        desc->set_option(be, "gemm", mode);
        double t = median_seconds([&] { k.fn(k.state, &args); }, flops);
        double g = flops / t * 1e-9;
        rows.push_back({n, th, !std::strcmp(mode, "own") ? "plugin_own" : "plugin_openblas", g,
                        g / ref});
      }
      if (k.release) k.release(k.state);
      std::fprintf(stderr, "n=%d threads=%d done\n", n, th);
    }
  }

  std::string out = "{\n  \"benchmark\": \"gemm_f32_square\",\n  \"machine\": {";
  out += "\"cpu\": \"" + json_escape(cpu_model()) + "\", ";
  out += "\"hardware_threads\": " + std::to_string(std::thread::hardware_concurrency()) + ", ";
  out += "\"openblas\": \"" + json_escape(openblas_get_config()) + "\", ";
  out += "\"own_gemm_isa\": \"" + std::string(isa_fn ? isa_fn(be) : "?") + "\", ";
  out += "\"plugin\": \"" + json_escape(desc->describe(be)) + "\"},\n  \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "    {\"n\": %d, \"threads\": %d, \"impl\": \"%s\", \"gflops\": %.2f, "
                  "\"ratio\": %.3f}%s\n",
                  rows[i].n, rows[i].threads, rows[i].impl, rows[i].gflops, rows[i].ratio,
                  i + 1 < rows.size() ? "," : "");
    out += buf;
  }
  out += "  ]\n}\n";
  desc->shutdown(be);
  if (json_path) {
    std::FILE *f = std::fopen(json_path, "w");
    if (!f || std::fputs(out.c_str(), f) < 0) {
      std::fprintf(stderr, "gemm_bench: cannot write %s\n", json_path);
      return 1;
    }
    std::fclose(f);
  } else {
    std::fputs(out.c_str(), stdout);
  }
  return 0;
}
