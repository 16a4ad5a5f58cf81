// Helpers shared by the C benchmarks: a status check that prints ctn_last_error() and exits,
// reading an option's value, the elementwise chain of the dispatch benchmarks, and the two clocks they read (process CPU time stays meaningful on a loaded machine).
#ifndef CTN_BENCH_UTIL_H
#define CTN_BENCH_UTIL_H

#include <chutney/chutney.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <ctime>

// CTN_BENCH_CK("pool_bench", ctn_call(...)): on failure, "pool_bench: ctn_call(...): error" and exit 1.
#define CTN_BENCH_CK(prog, x)                                              \
  do {                                                                     \
    if ((x) != CTN_OK) {                                                   \
      std::fprintf(stderr, "%s: %s: %s\n", prog, #x, ctn_last_error());    \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

// The value of the option at argv[*i] (the next argument; *i moves onto it). Without one:
// "<prog>: <option> needs a value (see --help)" and exit 2.
inline const char *bench_option_value(const char *prog, int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    std::fprintf(stderr, "%s: %s needs a value (see --help)\n", prog, argv[*i]);
    std::exit(2);
  }
  return argv[++*i];
}

// The options of the small benches: --help (prints `usage`), then each name of `names` ("--n",
// "--reps", ...) with a value, stored through set(name, value). Returns -1 to go on, else the exit
// status: 0 after --help, 2 after an unknown option (named on stderr).
template <class Set>
int bench_options(const char *prog, const char *usage, int argc, char **argv, Set &&set) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(usage, stdout);
      return 0;
    }
    const char *name = argv[i];
    const char *v = bench_option_value(prog, argc, argv, &i);
    if (!set(std::string(name), v)) {
      std::fprintf(stderr, "%s: unknown option %s (see --help)\n", prog, name);
      return 2;
    }
  }
  return -1;
}

// bench_options for the benches taking --n, --reps and --threads (each >= 1).
inline int bench_n_reps_threads(const char *prog, const char *usage, int argc, char **argv, int64_t *n, int *reps,
                                int *threads) {
  int rc = bench_options(prog, usage, argc, argv, [&](const std::string &o, const char *v) {
    if (o == "--n") *n = std::atoll(v);
    else if (o == "--reps") *reps = std::atoi(v);
    else if (o == "--threads") *threads = std::atoi(v);
    else return false;
    return true;
  });
  if (rc < 0 && (*n < 1 || *reps < 1 || *threads < 1)) {
    std::fprintf(stderr, "%s: --n, --reps and --threads must be >= 1\n", prog);
    rc = 2;
  }
  return rc;
}

// A chain of `n` elementwise nodes from x: it cycles through add, mul, tanh, sub, relu, neg with
// the second input y, so no pass can fold or simplify it away (dispatch_bench, vulkan_bench; kept
// in sync with compare_dispatch.py). Returns the last node.
inline ctn_node bench_elementwise_chain(const char *prog, ctn_graph *g, ctn_node x, ctn_node y, int n) {
  ctn_node h = x;
  for (int i = 0; i < n; ++i) {
    ctn_node o;
    switch (i % 6) {
      case 0: CTN_BENCH_CK(prog, ctn_add(g, h, y, &o)); break;
      case 1: CTN_BENCH_CK(prog, ctn_mul(g, h, y, &o)); break;
      case 2: CTN_BENCH_CK(prog, ctn_tanh(g, h, &o)); break;
      case 3: CTN_BENCH_CK(prog, ctn_sub(g, h, y, &o)); break;
      case 4: CTN_BENCH_CK(prog, ctn_relu(g, h, &o)); break;
      default: CTN_BENCH_CK(prog, ctn_neg(g, h, &o)); break;
    }
    h = o;
  }
  return h;
}

inline double bench_cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline double bench_wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#endif
