// For the benchmarks that load one backend plugin straight through its ABI table, without the
// core (gemm_bench, opencl_bench, cuda_gemm_bench): the host table of the tests that do the same
// (tests/common/plugin_host.h) and the dlopen + query step.
#ifndef CTN_BENCH_PLUGIN_H
#define CTN_BENCH_PLUGIN_H

#include <chutney/backend.h>

#include <dlfcn.h>

#include <cstdio>

#include "../tests/common/plugin_host.h"

// The text of the last error the plugin reported through the host's set_error ("" before any).
inline const char *bench_plugin_error() { return ctn_test_host::g_error.c_str(); }

// Warnings and errors go to stderr as "[plugin] message"; stdout stays the benchmark's JSON.
inline void bench_host_log(ctn_log_level level, const char *plugin, const char *message) {
  if (level >= CTN_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", plugin, message);
}

// The tests' direct-load host table, with the log above.
inline ctn_host_api bench_host() {
  ctn_host_api host = ctn_test_host::make_host();
  host.log = bench_host_log;
  return host;
}

// dlopens the plugin at `path` and returns its backend descriptor, queried with `host` (which must
// outlive the plugin). On failure: nullptr, and "<prog>: <why>" on stderr.
inline const ctn_backend_desc *bench_load_backend(const char *prog, const char *path, const ctn_host_api *host) {
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    std::fprintf(stderr, "%s: cannot load %s: %s\n", prog, path, dlerror());
    return nullptr;
  }
  auto query = reinterpret_cast<ctn_plugin_query_fn>(dlsym(so, CTN_PLUGIN_ENTRY_SYMBOL));
  const void *desc = query ? query(CTN_ABI_VERSION, host) : nullptr;
  if (!desc) std::fprintf(stderr, "%s: %s has no usable %s\n", prog, path, CTN_PLUGIN_ENTRY_SYMBOL);
  return static_cast<const ctn_backend_desc *>(desc);
}

#endif
