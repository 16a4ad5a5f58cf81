// Shapes, dtypes and broadcasting. Fixed-size so that eager dispatch never allocates for them.
#pragma once

#include <chutney/types.h>

#include <cstdint>
#include <string>

namespace ctn {

struct Shape {
  uint32_t ndim = 0;
  int64_t d[CTN_MAX_DIMS] = {};

  // A zero dim makes the count 0 even where the other dims' product would overflow (shapes are
  // validated to fit otherwise; an overflowing one saturates instead of wrapping).
  int64_t numel() const {
    int64_t n = 1;
    bool over = false;
    for (uint32_t i = 0; i < ndim; ++i) {
      if (d[i] == 0) return 0;
      if (!over && __builtin_mul_overflow(n, d[i], &n)) over = true;
    }
    return over ? INT64_MAX : n;
  }
  int64_t operator[](uint32_t i) const { return d[i]; }
  int64_t &operator[](uint32_t i) { return d[i]; }
  bool operator==(const Shape &o) const {
    if (ndim != o.ndim) return false;
    for (uint32_t i = 0; i < ndim; ++i)
      if (d[i] != o.d[i]) return false;
    return true;
  }
  bool operator!=(const Shape &o) const { return !(*this == o); }

  static Shape from(uint32_t ndim, const int64_t *dims);  // validates (throws ctn::Error)
  // False past 2^60 elements (a shape no tensor can have: its bytes would overflow an int64).
  bool numel_fits() const;
};

// "[2, 3]"; "[]" for a scalar.
std::string shape_str(const Shape &s);

size_t dtype_size(int32_t dtype);
const char *dtype_name(int32_t dtype);
bool dtype_valid(int32_t dtype);
// f32, f64 and (since 1.5) the 16-bit floats f16 and bf16: the dtypes float ops take.
bool dtype_is_float(int32_t dtype);
// Element i of a float tensor's data as a double (exact); false for any other dtype.
bool float_element(int32_t dtype, const void *data, int64_t i, double *out);

// Row-major contiguous strides (elements).
void contiguous_strides(const Shape &s, int64_t *strides);

// numpy broadcast of a and b; false when incompatible.
bool broadcast_shapes(const Shape &a, const Shape &b, Shape *out);

// Normalises axis (negative counts from the end); throws CTN_ERR_INVALID_ARGUMENT naming `op`.
int32_t normalize_axis(const char *op, int64_t axis, uint32_t ndim);

}  // namespace ctn
