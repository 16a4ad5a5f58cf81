// The C ABI's tensor handle: a ctn_tensor is a ctn::Tensor. Here, below capi/ and io/, because
// both hand tensors across the ABI (capi/handles.h has the handles only capi/ needs).
#pragma once

#include "tensor/tensor.h"
#include "util/status.h"

#include <utility>

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
