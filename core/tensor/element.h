// One element of a contiguous tensor of any dtype as a number: for host code that reads values
// (constant folding at import, the data-dependent ops), not for kernels.
#pragma once

#include <chutney/desc.h>
#include <chutney/types.h>

#include "tensor/tensor.h"

#include <cstdint>

namespace ctn {

// Element k of contiguous `t`. A long double orders every dtype exactly where it has a 64-bit
// mantissa (x86, aarch64); on armhf it is a double, exact for integers up to 2^53.
inline long double element_value(const Tensor &t, int64_t k) {
  const char *p = t.data();
  switch (t.dtype) {
    case CTN_F32: return reinterpret_cast<const float *>(p)[k];
    case CTN_F64: return reinterpret_cast<const double *>(p)[k];
    case CTN_F16: return ctn_desc_f16_to_f32(reinterpret_cast<const uint16_t *>(p)[k]);
    case CTN_BF16: return ctn_desc_bf16_to_f32(reinterpret_cast<const uint16_t *>(p)[k]);
    case CTN_I64: return static_cast<long double>(reinterpret_cast<const int64_t *>(p)[k]);
    case CTN_U64: return static_cast<long double>(reinterpret_cast<const uint64_t *>(p)[k]);
    case CTN_I32: return reinterpret_cast<const int32_t *>(p)[k];
    case CTN_U32: return reinterpret_cast<const uint32_t *>(p)[k];
    case CTN_I16: return reinterpret_cast<const int16_t *>(p)[k];
    case CTN_U16: return reinterpret_cast<const uint16_t *>(p)[k];
    case CTN_I8: return reinterpret_cast<const int8_t *>(p)[k];
    default: return reinterpret_cast<const uint8_t *>(p)[k];  // u8, bool
  }
}

}  // namespace ctn
