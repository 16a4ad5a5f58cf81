// GEMM benchmark: the CPU plugin's matmul kernel (OpenBLAS path and own GEMM) against a direct
// cblas_sgemm call on the same buffers. Prints one JSON object.
//
//   gemm_bench [--plugin PATH] [--json FILE] [--sizes 256,512,...] [--shapes MxNxK[ab],...]
//              [--threads 1,2] [--help]
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

// One product C[m, n] = op(A) op(B) with op = transpose where ta / tb (the matmul op's attrs).
struct Case {
  int m, n, k;
  bool ta, tb;
  std::string label;  // "512" for a square size, else "MxNxK" plus "nt"-style transposes
};

// "MxNxK" or "MxNxKab" where a, b are n (as stored) or t (transposed): 128x512x784, 512x784x128tn.
bool parse_shapes(const char *s, std::vector<Case> *out) {
  for (const char *p = s; *p;) {
    const char *end = std::strchr(p, ',');
    std::string item(p, end ? static_cast<size_t>(end - p) : std::strlen(p));
    Case c{};
    char ta = 'n', tb = 'n';
    int used = 0;
    if (std::sscanf(item.c_str(), "%dx%dx%d%n", &c.m, &c.n, &c.k, &used) != 3 || c.m <= 0 || c.n <= 0 || c.k <= 0)
      return false;
    if (item.size() == static_cast<size_t>(used) + 2) {
      ta = item[static_cast<size_t>(used)];
      tb = item[static_cast<size_t>(used) + 1];
    } else if (item.size() != static_cast<size_t>(used)) {
      return false;
    }
    if ((ta != 'n' && ta != 't') || (tb != 'n' && tb != 't')) return false;
    c.ta = ta == 't';
    c.tb = tb == 't';
    c.label = item;
    out->push_back(c);
    if (!end) break;
    p = end + 1;
  }
  return true;
}

bool isdigit_str(const std::string &s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

struct Row {
  std::string label;
  int threads;
  const char *impl;
  double gflops, ratio;
};

}  // namespace

int main(int argc, char **argv) {
  const char *plugin = std::getenv("CTN_CPU_PLUGIN");
  if (!plugin || !*plugin) plugin = CTN_CPU_PLUGIN_PATH;
  const char *json_path = nullptr;
  std::vector<int> sizes = {256, 512, 1024, 2048};
  std::vector<Case> shapes;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: gemm_bench [--plugin PATH] [--json FILE] [--sizes 256,512] [--shapes MxNxK[ab],...]\n"
          "                  [--threads 1,2]\n"
          "Times the CPU plugin's f32 matmul kernel (gemm=openblas and gemm=own) against a\n"
          "direct cblas_sgemm on the same buffers; square n x n x n (--sizes), or the products\n"
          "--shapes lists instead: C[M,N] = op(A) op(B) with K inner, a and b each n (as stored)\n"
          "or t (transposed), e.g. 128x512x784,512x784x128tn; median of several reps after two\n"
          "warm-ups. Prints JSON (or writes it to FILE). ratio = GFLOP/s divided by the direct\n"
          "cblas_sgemm GFLOP/s at the same shape and thread count.\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gemm_bench: %s needs a value (see --help)\n", a.c_str());
      return 2;
    }
    if (a == "--plugin") plugin = argv[++i];
    else if (a == "--json") json_path = argv[++i];
    else if (a == "--sizes") sizes = parse_list(argv[++i]);
    else if (a == "--shapes") {
      if (!parse_shapes(argv[++i], &shapes)) {
        std::fprintf(stderr, "gemm_bench: --shapes takes MxNxK or MxNxKab (a, b: n or t), comma-separated: %s\n",
                     argv[i]);
        return 2;
      }
    }
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

  const bool square = shapes.empty();
  if (square)
    for (int n : sizes) shapes.push_back({n, n, n, false, false, std::to_string(n)});
  std::vector<Row> rows;
  for (int th : threads) {
    if (desc->set_option(be, "num_threads", std::to_string(th).c_str()) != CTN_OK) {
      std::fprintf(stderr, "gemm_bench: %s\n", bench_plugin_error());
      return 1;
    }
    for (const Case &cs : shapes) {
      const int m = cs.m, n = cs.n, kk = cs.k;
      // Stored shapes: A is [K, M] when transposed, B is [N, K].
      const int ar = cs.ta ? kk : m, ac = cs.ta ? m : kk, br = cs.tb ? n : kk, bc = cs.tb ? kk : n;
      std::vector<float> a(static_cast<size_t>(ar) * ac), b(static_cast<size_t>(br) * bc),
          c(static_cast<size_t>(m) * n);
      for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729) % 997) * 1e-3f - 0.5f;
      auto desc2 = [](int r, int cc, void *data) {
        ctn_tensor_desc d{};
        d.dtype = CTN_F32;
        d.ndim = 2;
        d.shape[0] = r;
        d.shape[1] = cc;
        d.strides[0] = cc;
        d.strides[1] = 1;
        d.data = data;
        return d;
      };
      ctn_tensor_desc ins[2] = {desc2(ar, ac, a.data()), desc2(br, bc, b.data())};
      ctn_tensor_desc dc = desc2(m, n, c.data());
      ctn_attrs attrs{};
      attrs.ni = 2;
      attrs.i[0] = cs.ta;
      attrs.i[1] = cs.tb;
      ctn_op_signature sig{sizeof sig, 2, CTN_OP_MATMUL, ins, &dc, &attrs};
      ctn_kernel k{};
      if (desc->get_kernel(be, &sig, &k) != CTN_OK) {
        std::fprintf(stderr, "gemm_bench: get_kernel(%s): %s\n", cs.label.c_str(), bench_plugin_error());
        return 1;
      }
      ctn_kernel_args args{2, 1, ins, &dc, &attrs, nullptr, 0};
      const double flops = 2.0 * m * n * kk;
      openblas_set_num_threads(th);
      const double t_ref = median_seconds(
          [&] {
            cblas_sgemm(CblasRowMajor, cs.ta ? CblasTrans : CblasNoTrans, cs.tb ? CblasTrans : CblasNoTrans, m, n,
                        kk, 1.0f, a.data(), ac, b.data(), bc, 0.0f, c.data(), n);
          },
          flops);
      const double ref = flops / t_ref * 1e-9;
      rows.push_back({cs.label, th, "cblas_sgemm_direct", ref, 1.0});
      for (const char *mode : {"openblas", "own"}) {
        if (!std::strcmp(mode, "openblas") && !has_openblas) continue;
        desc->set_option(be, "gemm", mode);
        const double g = flops / median_seconds([&] { k.fn(k.state, &args); }, flops) * 1e-9;
        rows.push_back({cs.label, th, !std::strcmp(mode, "own") ? "plugin_own" : "plugin_openblas", g, g / ref});
      }
      if (k.release) k.release(k.state);
      std::fprintf(stderr, "%s threads=%d done\n", cs.label.c_str(), th);
    }
  }

  std::string out = std::string("{\n  \"benchmark\": \"") + (square ? "gemm_f32_square" : "gemm_f32_shapes") +
                    "\",\n  \"machine\": {";
  out += "\"cpu\": \"" + json_escape(cpu_model()) + "\", ";
  out += "\"hardware_threads\": " + std::to_string(std::thread::hardware_concurrency()) + ", ";
  out += "\"openblas\": \"" + json_escape(openblas_get_config()) + "\", ";
  out += "\"own_gemm_isa\": \"" + std::string(isa_fn ? isa_fn(be) : "?") + "\", ";
  out += "\"plugin\": \"" + json_escape(desc->describe(be)) + "\"},\n  \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "    {\"%s\": %s%s%s, \"threads\": %d, \"impl\": \"%s\", \"gflops\": %.2f, "
                  "\"ratio\": %.3f}%s\n",
                  isdigit_str(rows[i].label) ? "n" : "shape", isdigit_str(rows[i].label) ? "" : "\"",
                  rows[i].label.c_str(), isdigit_str(rows[i].label) ? "" : "\"", rows[i].threads, rows[i].impl,
                  rows[i].gflops, rows[i].ratio,
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
