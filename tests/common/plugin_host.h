// A host table for tests that load a backend plugin straight through its ABI table, without
// libchutney (unit/cpu_plugin_test.cpp, cuda/cuda_plugin_test.cpp; bench/bench_plugin.h builds
// the benchmarks' on it): set_error keeps the formatted message in g_error (one per thread, as
// the core keeps its last error), log drops the plugin's messages; and contiguous tensor
// descriptors to hand the plugin's kernels.
#pragma once

#include <chutney/plugin.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

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

// A descriptor of a contiguous (row-major) tensor of `dtype` and `shape` at host address `data`.
inline ctn_tensor_desc contiguous_desc(int32_t dtype, const std::vector<int64_t> &shape,
                                       const void *data) {
  ctn_tensor_desc d{};
  d.data = const_cast<void *>(data);
  d.dtype = dtype;
  d.ndim = static_cast<uint32_t>(shape.size());
  int64_t s = 1;
  for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
    d.shape[k] = shape[k];
    d.strides[k] = s;
    s *= shape[k];
  }
  return d;
}

}  // namespace ctn_test_host
