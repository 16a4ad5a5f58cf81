#include "tensor/shape.h"

#include "util/status.h"

#include <chutney/desc.h>

namespace ctn {

Shape Shape::from(uint32_t ndim, const int64_t *dims) {
  if (ndim > CTN_MAX_DIMS) fail(CTN_ERR_SHAPE, "%u dims requested, at most %d are supported", ndim, CTN_MAX_DIMS);
  if (ndim > 0 && !dims) fail(CTN_ERR_INVALID_ARGUMENT, "shape is NULL but ndim is %u", ndim);
  Shape s;
  s.ndim = ndim;
  for (uint32_t i = 0; i < ndim; ++i) {
    if (dims[i] < 0) fail(CTN_ERR_SHAPE, "dimension %u is negative (%lld)", i, static_cast<long long>(dims[i]));
    s.d[i] = dims[i];
  }
  // Element and byte counts are int64 everywhere (numel, strides, offsets, numel * dtype size):
  // a shape past that is an error here rather than a wrapped count later.
  if (!s.numel_fits())
    fail(CTN_ERR_SHAPE, "the shape %s has more elements than a tensor can hold (more than 2^60, whose "
         "bytes an int64 must count)", shape_str(s).c_str());
  return s;
}

bool Shape::numel_fits() const {
  // At most 2^60 elements: the bytes of the widest dtype (8) then fit an int64 too, so no
  // planner, backend or kernel computing numel * dtype size can overflow. Zero dims count as 1
  // here: an empty [0, 2^62, 4] has no elements, but its strides (products of trailing dims,
  // times the dtype size) must fit as well.
  constexpr int64_t kMax = int64_t(1) << 60;
  int64_t n = 1;
  for (uint32_t i = 0; i < ndim; ++i) {
    if (d[i] < 0) return false;
    if (d[i] == 0) continue;
    if (n > kMax / d[i]) return false;
    n *= d[i];
  }
  return true;
}

std::string shape_str(const Shape &s) {
  std::string out = "[";
  for (uint32_t i = 0; i < s.ndim; ++i) {
    if (i) out += ", ";
    out += std::to_string(s.d[i]);
  }
  return out + "]";
}

// desc.h's table (the plugins' copy of the same spelling): one list of sizes and names.
size_t dtype_size(int32_t dtype) { return ctn_desc_dtype_size(dtype); }

const char *dtype_name(int32_t dtype) { return ctn_desc_dtype_name(dtype); }

bool dtype_valid(int32_t dtype) { return dtype >= 0 && dtype < CTN_DTYPE_COUNT_V6; }
bool dtype_is_float(int32_t dtype) {
  return dtype == CTN_F32 || dtype == CTN_F64 || dtype == CTN_F16 || dtype == CTN_BF16;
}

bool float_element(int32_t dtype, const void *data, int64_t i, double *out) {
  switch (dtype) {
    case CTN_F32: *out = static_cast<const float *>(data)[i]; return true;
    case CTN_F64: *out = static_cast<const double *>(data)[i]; return true;
    case CTN_F16: *out = ctn_desc_f16_to_f32(static_cast<const uint16_t *>(data)[i]); return true;
    case CTN_BF16: *out = ctn_desc_bf16_to_f32(static_cast<const uint16_t *>(data)[i]); return true;
    default: return false;
  }
}

void contiguous_strides(const Shape &s, int64_t *strides) {
  // Saturating: only an empty shape (a zero dim) can have a product of the other dims past
  // int64 (non-empty shapes are refused earlier), and an empty tensor's strides never address
  // anything.
  int64_t st = 1;
  for (int i = static_cast<int>(s.ndim) - 1; i >= 0; --i) {
    strides[i] = st;
    if (__builtin_mul_overflow(st, s.d[i], &st)) st = INT64_MAX;
  }
}

bool broadcast_shapes(const Shape &a, const Shape &b, Shape *out) {
  Shape r;
  r.ndim = a.ndim > b.ndim ? a.ndim : b.ndim;
  for (uint32_t i = 0; i < r.ndim; ++i) {
    int64_t da = i < r.ndim - a.ndim ? 1 : a.d[i - (r.ndim - a.ndim)];
    int64_t db = i < r.ndim - b.ndim ? 1 : b.d[i - (r.ndim - b.ndim)];
    if (da == db || db == 1) r.d[i] = da;
    else if (da == 1) r.d[i] = db;
    else return false;
  }
  *out = r;
  return true;
}

int32_t normalize_axis(const char *op, int64_t axis, uint32_t ndim) {
  int64_t n = static_cast<int64_t>(ndim);
  if (axis < -n || axis >= n)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: axis %lld is out of range for a %u-d operand", op,
         static_cast<long long>(axis), ndim);
  return static_cast<int32_t>(axis < 0 ? axis + n : axis);
}

}  // namespace ctn
