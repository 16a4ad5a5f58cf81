// The try/catch wall of the C ABI: every exported function runs its body through wall(), so a
// ctn::Error becomes its status, bad_alloc an out-of-memory status and anything else an internal
// error, each with a thread-local message (ctn_last_error). Nothing escapes the ABI.
#pragma once

#include <chutney/types.h>

#include "util/status.h"

#include <new>
#include <string>

namespace ctn {

template <class F>
ctn_status wall(F &&f) noexcept {
  try {
    f();
    return CTN_OK;
  } catch (const Error &e) {
    set_last_error(e.code(), e.message());
    return e.code();
  } catch (const std::bad_alloc &) {
    set_last_error(CTN_ERR_OUT_OF_MEMORY, "out of memory");
    return CTN_ERR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    set_last_error(CTN_ERR_INTERNAL, std::string("internal error: ") + e.what());
    return CTN_ERR_INTERNAL;
  } catch (...) {
    set_last_error(CTN_ERR_INTERNAL, "internal error: unknown exception");
    return CTN_ERR_INTERNAL;
  }
}

}  // namespace ctn
