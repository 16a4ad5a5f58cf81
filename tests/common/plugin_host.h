// A host table for tests that load a backend plugin straight through its ABI table, without
// libchutney (unit/cpu_plugin_test.cpp, cuda/cuda_plugin_test.cpp; bench/bench_plugin.h builds
// the benchmarks' on it): set_error keeps the formatted message in g_error (one per thread, as
// the core keeps its last error), log drops the plugin's messages.
#pragma once

#include <chutney/plugin.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace ctn_test_host {

// The message of the last error the plugin recorded on this thread.
inline thread_local std::string g_error;

inline ctn_status host_set_error(ctn_status code, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_error = buf;
  return code;
}

inline void host_log(ctn_log_level, const char *, const char *) {}

// This ABI version's host table with the two callbacks above.
inline ctn_host_api make_host() {
  ctn_host_api h{};
  h.struct_size = sizeof h;
  h.abi_major = CTN_ABI_MAJOR;
  h.abi_minor = CTN_ABI_MINOR;
  h.set_error = host_set_error;
  h.log = host_log;
  return h;
}

}  // namespace ctn_test_host
