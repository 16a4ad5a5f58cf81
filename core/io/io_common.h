// Shared by the io/ translation units: argument checks and the propagation of failures of public
// C API calls made from inside the core.
#pragma once

#include <chutney/chutney.h>

#include "util/status.h"
#include "util/wall.h"

#include <cstring>
#include <functional>
#include <new>
#include <string>

namespace ctn::io {

using ::ctn::wall;  // util/wall.h: the one try/catch wall of the C ABI

// Turns a failed public-API status back into an Error, prefixing `context` and dropping the
// "CTN_ERR_X: " prefix that set_last_error added (the wall adds it again).
inline void check(ctn_status s, const std::string &context) {
  if (s == CTN_OK) return;
  std::string msg = ctn_last_error();
  std::string prefix = std::string(status_name(s)) + ": ";
  if (msg.compare(0, prefix.size(), prefix) == 0) msg.erase(0, prefix.size());
  throw Error(s, context.empty() ? msg : context + ": " + msg);
}

template <class T>
T *need(T *p, const char *fn, const char *what) {
  if (p == nullptr) fail(CTN_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
  return p;
}

// Writes `path` atomically (io/safetensors.cpp): a temporary file in its directory receives the
// content from `body(fd, temporary_path)`, is fsynced and renamed over `path`, and the directory
// fsynced; a failure removes the temporary file and leaves `path` as it was. `fn` names the
// public function in messages.
void atomic_write(const char *fn, const char *path, const std::function<void(int fd, const std::string &tmp)> &body);

// write(2) of all n bytes, retrying short writes and EINTR (CTN_ERR_IO naming `path`).
void write_all(int fd, const char *p, size_t n, const std::string &path);

}  // namespace ctn::io

// Needs `const char *ctn_io_fn = __func__;` in the exported function (inside the wall's lambda
// __func__ would say "operator()").
#define CTN_IO_NEED(p) ::ctn::io::need((p), ctn_io_fn, #p)
