// What the translation units of the core C API (capi.cpp, capi_tensor.cpp, capi_graph.cpp,
// capi_plan.cpp) share: argument checks and the reading of enums that cross the ABI.
#pragma once

#include <chutney/chutney.h>

#include "capi/handles.h"
#include "util/status.h"
#include "util/wall.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace ctn::capi {

template <class T>
T *need(T *p, const char *fn, const char *what) {
  if (!p) fail(CTN_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
  return p;
}

// An enum that crosses the ABI is read as the integer it is: a caller's out-of-range value
// loaded as ctn_dtype would be undefined behaviour before any check could refuse it.
inline int32_t raw_dtype(const ctn_dtype &d) {
  static_assert(sizeof(ctn_dtype) == sizeof(int32_t), "ctn_dtype is an int");
  int32_t v;
  std::memcpy(&v, &d, sizeof v);
  return v;
}

inline ctn_tensor *wrap(Tensor t) { return new ctn_tensor(std::move(t)); }

// Copies `src` into the caller's versioned struct `out`: as much as out->struct_size covers (which
// must at least hold struct_size itself), keeping the caller's struct_size.
template <class T>
void copy_versioned(T *out, const T &src, const char *fn) {
  const uint32_t sz = out->struct_size;
  if (sz < sizeof(uint32_t)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: set out->struct_size", fn);
  std::memcpy(out, &src, std::min<size_t>(sz, sizeof(T)));
  out->struct_size = sz;
}

}  // namespace ctn::capi

#define NEED(p) ::ctn::capi::need((p), __func__, #p)
