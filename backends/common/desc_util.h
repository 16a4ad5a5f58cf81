// Small descriptor helpers shared by every backend plugin. Header-only and built against abi/
// alone, so plugins still never link libchutney (nor each other). Each backend imports the names
// it uses with using-declarations in its own namespace.
#pragma once

#include <chutney/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ctn_backend_util {

inline size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case CTN_F32: case CTN_I32: case CTN_U32: return 4;
    case CTN_F64: case CTN_I64: case CTN_U64: return 8;
    case CTN_U8: case CTN_BOOL: case CTN_I8: return 1;
    case CTN_F16: case CTN_BF16: case CTN_I16: case CTN_U16: return 2;
    default: return 0;
  }
}

inline const char *dtype_name(int32_t dtype) {
  static const char *const names[] = {"f32", "f64", "i32", "i64", "u8", "bool", "f16",
                                      "bf16", "i8", "i16", "u16", "u32", "u64"};
  return dtype >= 0 && dtype < CTN_DTYPE_COUNT_V6 ? names[dtype] : "?";
}

inline bool is_float(int32_t dtype) { return dtype == CTN_F32 || dtype == CTN_F64; }

// "[2, 3]", the format the core uses in its messages.
inline std::string shape_str(const ctn_tensor_desc &d) {
  std::string s = "[";
  for (uint32_t i = 0; i < d.ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(d.shape[i]);
  }
  return s + "]";
}

// 0 when any dim is 0, even where the other dims' product would overflow (the core refuses
// non-empty shapes past int64; saturating otherwise, never wrapping).
inline int64_t desc_numel(const ctn_tensor_desc &d) {
  int64_t n = 1;
  bool over = false;
  for (uint32_t i = 0; i < d.ndim; ++i) {
    if (d.shape[i] == 0) return 0;
    if (!over && __builtin_mul_overflow(n, d.shape[i], &n)) over = true;
  }
  return over ? INT64_MAX : n;
}

inline bool same_shape(const ctn_tensor_desc &a, const ctn_tensor_desc &b) {
  if (a.ndim != b.ndim) return false;
  for (uint32_t i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

// Element strides of contiguous `in` as seen from `out` under numpy broadcasting (0 on broadcast
// and size-1 axes); false when `in` does not broadcast to `out`.
inline bool broadcast_strides(const ctn_tensor_desc &in, const ctn_tensor_desc &out, int64_t *strides) {
  if (in.ndim > out.ndim) return false;
  const uint32_t lead = out.ndim - in.ndim;
  int64_t s = 1;
  for (int k = static_cast<int>(out.ndim) - 1; k >= 0; --k) {
    if (k < static_cast<int>(lead)) {
      strides[k] = 0;
      continue;
    }
    const int64_t dim = in.shape[k - lead];
    if (dim == out.shape[k]) strides[k] = dim == 1 ? 0 : s;
    else if (dim == 1) strides[k] = 0;
    else return false;
    s *= dim;
  }
  return true;
}

// Row-major element strides of a contiguous `d`.
inline void contiguous_strides(const ctn_tensor_desc &d, int64_t *str) {
  int64_t s = 1;
  for (int k = static_cast<int>(d.ndim) - 1; k >= 0; --k) {
    str[k] = s;
    if (__builtin_mul_overflow(s, d.shape[k], &s)) s = INT64_MAX;  // empty shapes only: never used
  }
}

// The row-major multi-index idx[0..nd) of flat element i in `shape`.
inline void unravel(int64_t i, int nd, const int64_t *shape, int64_t *idx) {
  for (int k = nd - 1; k >= 0; --k) {
    idx[k] = i % shape[k];
    i /= shape[k];
  }
}

// A strided walk with size-1 dims dropped and neighbours whose strides chain merged (at least
// one dim: a scalar walk is [1] with stride 0), so that copies loop over as few dims as possible.
struct DimWalk {
  int nd = 0;
  int64_t shape[CTN_MAX_DIMS] = {};
  int64_t str[CTN_MAX_DIMS] = {};
};

inline void coalesce(DimWalk &w, uint32_t ndim, const int64_t *shape, const int64_t *str) {
  int nd = 0;
  for (uint32_t k = 0; k < ndim; ++k) {
    if (shape[k] == 1) continue;
    int64_t chained = 0;  // overflow-checked: an empty walk can have huge other dims
    if (nd > 0 && !__builtin_mul_overflow(str[k], shape[k], &chained) && w.str[nd - 1] == chained) {
      if (__builtin_mul_overflow(w.shape[nd - 1], shape[k], &w.shape[nd - 1])) w.shape[nd - 1] = INT64_MAX;
      w.str[nd - 1] = str[k];
    } else {
      w.shape[nd] = shape[k];
      w.str[nd] = str[k];
      ++nd;
    }
  }
  if (nd == 0) {
    w.shape[0] = 1;
    w.str[0] = 0;
    nd = 1;
  }
  w.nd = nd;
}

}  // namespace ctn_backend_util
