// Helpers shared by the C benchmarks: a status check that prints ctn_last_error() and exits,
// and the two clocks they read (process CPU time stays meaningful on a loaded machine).
#ifndef CTN_BENCH_UTIL_H
#define CTN_BENCH_UTIL_H

#include <chutney/chutney.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

// CTN_BENCH_CK("pool_bench", ctn_call(...)): on failure, "pool_bench: ctn_call(...): error" and exit 1.
#define CTN_BENCH_CK(prog, x)                                              \
  do {                                                                     \
    if ((x) != CTN_OK) {                                                   \
      std::fprintf(stderr, "%s: %s: %s\n", prog, #x, ctn_last_error());    \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

inline double bench_cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline double bench_wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#endif
