// The C API's handle types that more than one translation unit of capi/ needs (the tensor
// handle, which io/ needs too, is in tensor/handle.h).
#pragma once

#include <atomic>

#include "tensor/handle.h"

// A cancel token (ctn_cancel_*, since 1.3).
struct ctn_cancel {
  std::atomic<int32_t> flag{0};
};
