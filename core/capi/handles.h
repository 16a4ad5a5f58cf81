// The C API's handle types that more than one translation unit of capi/ needs.
#pragma once

#include <atomic>

#include "tensor/tensor.h"
#include "util/status.h"

// A cancel token (ctn_cancel_*, since 1.3).
struct ctn_cancel {
  std::atomic<int32_t> flag{0};
};

struct ctn_tensor : ctn::Tensor {
  explicit ctn_tensor(ctn::Tensor t) : ctn::Tensor(std::move(t)) {}
};

namespace ctn {
// Tensors borrowed read-only (DLPack READ_ONLY) refuse every write through the C API.
inline void need_writable(const Tensor &t, const char *fn, const char *what) {
  if (t.storage && t.storage->read_only)
    fail(CTN_ERR_STATE, "%s: %s is read-only (imported from DLPack with the READ_ONLY flag)", fn, what);
}
}  // namespace ctn
