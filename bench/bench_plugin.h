// For the benchmarks that load one backend plugin straight through its ABI table, without the
// core (gemm_bench, opencl_bench, cuda_gemm_bench): a minimal host and the dlopen + query step.
#ifndef CTN_BENCH_PLUGIN_H
#define CTN_BENCH_PLUGIN_H

#include <chutney/backend.h>

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>

// The text of the last error the plugin reported through the host's set_error ("" before any).
inline char *bench_plugin_error() {
  static char text[4096];
  return text;
}

inline ctn_status bench_host_set_error(ctn_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(bench_plugin_error(), 4096, fmt, ap);
  va_end(ap);
  return code;
}

// Warnings and errors go to stderr as "[plugin] message"; stdout stays the benchmark's JSON.
inline void bench_host_log(ctn_log_level level, const char *plugin, const char *message) {
  if (level >= CTN_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", plugin, message);
}

// A host table for this ABI version with the two callbacks above.
inline ctn_host_api bench_host() {
  ctn_host_api host{};
  host.struct_size = sizeof host;
  host.abi_major = CTN_ABI_MAJOR;
  host.abi_minor = CTN_ABI_MINOR;
  host.set_error = bench_host_set_error;
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
