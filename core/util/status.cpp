#include "util/status.h"

#include <cstdio>
#include <vector>

namespace ctn {

std::string vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  char small[256];
  int n = std::vsnprintf(small, sizeof small, fmt, ap);
  std::string out;
  if (n < 0) {
    out = fmt;
  } else if (static_cast<size_t>(n) < sizeof small) {
    out.assign(small, static_cast<size_t>(n));
  } else {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), fmt, ap2);
    out.resize(static_cast<size_t>(n));
  }
  va_end(ap2);
  return out;
}

std::string format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

void fail(ctn_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  throw Error(code, std::move(s));
}

namespace {
thread_local std::string t_last_error;
thread_local std::string t_plugin_error;

// The first use of a thread_local with a destructor registers it with glibc, which allocates and
// aborts the process ("failed to register TLS destructor: out of memory") when that fails. Touch
// the loading thread's strings when the library loads, while memory is plentiful, so that
// reporting an out-of-memory error later (under RLIMIT_AS: tests/unit/thread_limits_test.cpp)
// never is that first use.
[[maybe_unused]] const bool t_errors_registered = [] {
  t_last_error.reserve(256);
  t_plugin_error.reserve(64);
  return true;
}();
}  // namespace

void set_last_error(ctn_status code, const std::string &message) {
  t_last_error = std::string(status_name(code)) + ": " + message;
}
const char *last_error() { return t_last_error.c_str(); }
void set_plugin_error(const std::string &message) { t_plugin_error = message; }
std::string take_plugin_error() {
  std::string s;
  s.swap(t_plugin_error);
  return s;
}

const char *status_name(ctn_status s) {
  switch (s) {
    case CTN_OK: return "CTN_OK";
    case CTN_ERR_INVALID_ARGUMENT: return "CTN_ERR_INVALID_ARGUMENT";
    case CTN_ERR_SHAPE: return "CTN_ERR_SHAPE";
    case CTN_ERR_DTYPE: return "CTN_ERR_DTYPE";
    case CTN_ERR_OUT_OF_MEMORY: return "CTN_ERR_OUT_OF_MEMORY";
    case CTN_ERR_UNAVAILABLE: return "CTN_ERR_UNAVAILABLE";
    case CTN_ERR_UNSUPPORTED: return "CTN_ERR_UNSUPPORTED";
    case CTN_ERR_PLUGIN: return "CTN_ERR_PLUGIN";
    case CTN_ERR_IO: return "CTN_ERR_IO";
    case CTN_ERR_CORRUPT: return "CTN_ERR_CORRUPT";
    case CTN_ERR_STATE: return "CTN_ERR_STATE";
    case CTN_ERR_INTERNAL: return "CTN_ERR_INTERNAL";
    case CTN_ERR_CANCELLED: return "CTN_ERR_CANCELLED";
    case CTN_ERR_NUMERICS: return "CTN_ERR_NUMERICS";
    default: return "CTN_ERR_UNKNOWN";
  }
}

}  // namespace ctn
