// fp32_peak: the machine's measured fp32 peak, the ceiling the kernels' GFLOP/s are read
// against (docs/BENCHMARKS.md). Each thread runs a register-only loop of independent fused
// multiply-adds (16 accumulators, no memory traffic) for --seconds; GFLOP/s = 2 x lanes x FMAs
// per second, summed over the threads. One row per ISA the CPU has (AVX-512, AVX2+FMA on x86_64)
// and per thread count 1..--threads. Prints JSON. Where the CPU has AVX512_BF16, one more row,
// "avx512_bf16": the same loop of VDPBF16PS (each adds two bf16 products into each f32 lane, so
// it counts 2 x 2 x 16 FLOPs), the ceiling of a bf16 GEMM built on it (backends/cpu/gemm_bf16.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr long kIters = 1 << 20;  // FMA rounds per timing check (x16 accumulators)

#if defined(__x86_64__)
// Returns the FMA lane-operations done (lanes x FMAs; a VDPBF16PS counts 32, two products per
// f32 lane); `sink` keeps the results alive. kBf16: VDPBF16PS (the CPU must have AVX512_BF16),
// else VFMADD; the f32 loop uses no AVX512_BF16 instruction.
template <bool kBf16>
__attribute__((target("avx512f,avx512bf16"))) double run_avx512_loop(double seconds, float *sink) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(1.0f + 1e-7f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  __m512bh ah{}, bh{};
  if constexpr (kBf16) ah = _mm512_cvtne2ps_pbh(a, a), bh = _mm512_cvtne2ps_pbh(b, b);
  double ops = 0;
  const double end = now() + seconds;
  do {
    for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        if constexpr (kBf16) acc[i] = _mm512_dpbf16_ps(acc[i], ah, bh);
        else acc[i] = _mm512_fmadd_ps(acc[i], a, b);
      }
    }
    ops += 16.0 * (kBf16 ? 32.0 : 16.0) * static_cast<double>(kIters);
  } while (now() < end);
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  float v[16];
  _mm512_storeu_ps(v, s);
  *sink = v[0];
  return ops;
}
double run_avx512(double seconds, float *sink) { return run_avx512_loop<false>(seconds, sink); }
double run_avx512_bf16(double seconds, float *sink) { return run_avx512_loop<true>(seconds, sink); }

__attribute__((target("avx2,fma"))) double run_avx2(double seconds, float *sink) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(1.0f + 1e-7f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  double ops = 0;
  const double end = now() + seconds;
  do {
    for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    ops += 12.0 * 8.0 * static_cast<double>(kIters);
  } while (now() < end);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float v[8];
  _mm256_storeu_ps(v, s);
  *sink = v[0];
  return ops;
}
#endif

struct Isa {
  const char *name;
  double (*fn)(double, float *);
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// GFLOP/s over the wall time, and per second of CPU time (the threads' CPU seconds summed):
// what a core does while it runs, the figure that holds on a shared machine, where the wall
// time includes other processes' turns.
struct Rate {
  double wall, cpu;
};

Rate measure(const Isa &isa, int threads, double seconds) {
  std::vector<double> ops(threads), cpu(threads);
  std::vector<float> sink(threads);
  std::vector<std::thread> pool;
  const double t0 = now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const double c0 = thread_cpu_seconds();
      ops[t] = isa.fn(seconds, &sink[t]);
      cpu[t] = thread_cpu_seconds() - c0;
    });
  for (auto &th : pool) th.join();
  const double wall = now() - t0;
  double total = 0, cpu_total = 0;
  for (int t = 0; t < threads; ++t) total += ops[t], cpu_total += cpu[t];
  return {2.0 * total / wall * 1e-9, 2.0 * total / cpu_total * 1e-9};
}

}  // namespace

int main(int argc, char **argv) {
  int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      max_threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::printf(
          "usage: fp32_peak [--threads N] [--seconds S]\n"
          "The machine's fp32 peak: a register-only FMA loop per thread (no memory traffic), for\n"
          "each vector ISA the CPU has and 1..N threads (default: the cores), S seconds each\n"
          "(default 1). Prints JSON; GFLOP/s counts a fused multiply-add as 2 FLOPs.\n");
      return std::strcmp(argv[i], "--help") && std::strcmp(argv[i], "-h") ? 2 : 0;
    }
  }
  if (max_threads < 1 || seconds <= 0) {
    std::fprintf(stderr, "fp32_peak: --threads must be >= 1 and --seconds > 0\n");
    return 2;
  }
  std::vector<Isa> isas;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) isas.push_back({"avx512", run_avx512});
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    isas.push_back({"avx512_bf16", run_avx512_bf16});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isas.push_back({"avx2", run_avx2});
#endif
  std::printf("{\"bench\": \"fp32_peak\", \"rows\": [");
  bool first = true;
  for (const Isa &isa : isas)
    for (int t = 1; t <= max_threads; ++t) {
      const Rate g = measure(isa, t, seconds);
      std::printf("%s\n  {\"isa\": \"%s\", \"threads\": %d, \"gflops\": %.1f, \"gflops_per_cpu_s\": %.1f}",
                  first ? "" : ",", isa.name, t, g.wall, g.cpu);
      first = false;
    }
  std::printf("\n]}\n");
  if (isas.empty()) std::fprintf(stderr, "fp32_peak: no vector FMA ISA measured on this CPU\n");
  return 0;
}
