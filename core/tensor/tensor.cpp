#include "tensor/tensor.h"

#include "tensor/pool.h"

#include "util/status.h"

#include <cstdlib>
#include <cstring>

namespace ctn {

size_t checked_buffer_bytes(uint64_t bytes, const char *what) {
  if (bytes > kMaxBufferBytes)
    fail(CTN_ERR_OUT_OF_MEMORY,
         "%s needs %llu bytes, more than one buffer can hold in this %d-bit build (at most %llu "
         "bytes)",
         what, static_cast<unsigned long long>(bytes), static_cast<int>(8 * sizeof(void *)),
         static_cast<unsigned long long>(kMaxBufferBytes));
  return static_cast<size_t>(bytes);
}

size_t checked_tensor_bytes(int32_t dtype, const Shape &shape) {
  uint64_t bytes = dtype_size(dtype);
  bool overflow = false;
  for (uint32_t i = 0; i < shape.ndim; ++i) {
    if (shape.d[i] == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(shape.d[i]), &bytes);
  }
  if (!overflow && bytes <= kMaxBufferBytes) return static_cast<size_t>(bytes);  // no message to format
  std::string what = format("a %s tensor of shape %s", dtype_name(dtype), shape_str(shape).c_str());
  if (overflow)
    fail(CTN_ERR_OUT_OF_MEMORY, "%s needs more than 2^64 bytes", what.c_str());
  return checked_buffer_bytes(bytes, what.c_str());
}

Storage::Storage(size_t nbytes) : bytes(nbytes) {
  size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  data = std::aligned_alloc(64, rounded);
  if (!data) fail(CTN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of host memory", nbytes);
  std::memset(data, 0, rounded);
}

Storage::Storage(BufferPool *from, size_t nbytes) : data(from->take(nbytes)), bytes(nbytes), pool(from) {}

Storage::~Storage() {
  if (pool) pool->give(data, bytes);
  else if (!borrowed) std::free(data);
  else if (release) release(release_ctx);
}

Tensor Tensor::empty(int32_t dtype, const Shape &shape, BufferPool *pool) {
  if (!dtype_valid(dtype)) fail(CTN_ERR_DTYPE, "unknown dtype %d", dtype);
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  contiguous_strides(shape, t.strides);
  const size_t bytes = checked_tensor_bytes(dtype, shape);
  if (pool && BufferPool::class_bytes(bytes))
    t.storage = std::allocate_shared<Storage>(PoolAllocator<Storage>(pool), pool, bytes);
  else t.storage = std::make_shared<Storage>(bytes);
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t st = 1;
  for (int i = static_cast<int>(shape.ndim) - 1; i >= 0; --i) {
    if (shape.d[i] != 1 && strides[i] != st) return false;
    if (__builtin_mul_overflow(st, shape.d[i], &st)) st = INT64_MAX;  // as contiguous_strides
  }
  return true;
}

namespace {
// Walks every element of `t` in row-major order, calling f(byte pointer).
template <class F>
void for_each_element(const Tensor &t, F &&f) {
  const size_t es = dtype_size(t.dtype);
  const int64_t n = t.numel();
  if (n == 0) return;
  int64_t idx[CTN_MAX_DIMS] = {};
  char *base = static_cast<char *>(t.storage->data);
  int64_t off = t.offset;
  for (int64_t k = 0; k < n; ++k) {
    f(base + off * static_cast<int64_t>(es));
    for (int d = static_cast<int>(t.shape.ndim) - 1; d >= 0; --d) {
      if (++idx[d] < t.shape.d[d]) {
        off += t.strides[d];
        break;
      }
      off -= t.strides[d] * (t.shape.d[d] - 1);
      idx[d] = 0;
    }
  }
}
}  // namespace

void Tensor::read(void *dst) const {
  if (nbytes() == 0) return;  // dst may be NULL for an empty tensor
  if (is_contiguous()) {
    std::memcpy(dst, data(), nbytes());
    return;
  }
  const size_t es = dtype_size(dtype);
  char *out = static_cast<char *>(dst);
  for_each_element(*this, [&](const char *p) {
    std::memcpy(out, p, es);
    out += es;
  });
}

void Tensor::write(const void *src) {
  if (nbytes() == 0) return;
  if (is_contiguous()) {
    std::memcpy(data(), src, nbytes());
    return;
  }
  const size_t es = dtype_size(dtype);
  const char *in = static_cast<const char *>(src);
  for_each_element(*this, [&](char *p) {
    std::memcpy(p, in, es);
    in += es;
  });
}

Tensor Tensor::contiguous() const {
  Tensor out = empty(dtype, shape);
  read(out.storage->data);
  return out;
}

int64_t normalize_slice(int64_t size, int64_t *start, int64_t *stop, int64_t step) {
  int64_t s = *start, e = *stop;
  if (s < 0) s += size;
  if (e < 0) e += size;
  if (s < 0) s = 0;
  if (s > size) s = size;
  if (e < s) e = s;
  if (e > size) e = size;
  *start = s;
  *stop = e;
  // Without overflow for any step > 0 (e - s + step - 1 overflows for a step near 2^63).
  return e == s ? 0 : (e - s - 1) / step + 1;
}

Tensor Tensor::slice(int32_t axis, int64_t start, int64_t stop, int64_t step) const {
  int32_t ax = normalize_axis("slice", axis, shape.ndim);
  if (step <= 0) fail(CTN_ERR_INVALID_ARGUMENT, "slice: step must be > 0, got %lld", static_cast<long long>(step));
  Tensor v = *this;
  int64_t len = normalize_slice(shape.d[ax], &start, &stop, step);
  v.offset += start * strides[ax];
  v.shape.d[ax] = len;
  // A step past the axis takes one element at most: its stride then never matters, and the
  // product could overflow.
  v.strides[ax] = len > 1 ? strides[ax] * step : strides[ax];
  return v;
}

Tensor Tensor::permute(const int32_t *perm) const {
  if (!perm && shape.ndim) fail(CTN_ERR_INVALID_ARGUMENT, "permute: perm is NULL");
  bool seen[CTN_MAX_DIMS] = {};
  Tensor v = *this;
  for (uint32_t i = 0; i < shape.ndim; ++i) {
    int32_t p = perm[i];
    if (p < 0 || static_cast<uint32_t>(p) >= shape.ndim || seen[p])
      fail(CTN_ERR_INVALID_ARGUMENT, "permute: perm is not a permutation of %u axes", shape.ndim);
    seen[p] = true;
    v.shape.d[i] = shape.d[p];
    v.strides[i] = strides[p];
  }
  return v;
}

Shape resolve_reshape(const char *op, const Shape &from, uint32_t ndim, const int64_t *dims) {
  if (ndim > CTN_MAX_DIMS) fail(CTN_ERR_SHAPE, "%s: %u dims requested, at most %d", op, ndim, CTN_MAX_DIMS);
  if (ndim && !dims) fail(CTN_ERR_INVALID_ARGUMENT, "%s: shape is NULL", op);
  Shape s;
  s.ndim = ndim;
  int infer = -1;
  int64_t known = 1;
  bool zero = false, overflow = false;  // the product of huge dims must not overflow
  for (uint32_t i = 0; i < ndim; ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) fail(CTN_ERR_SHAPE, "%s: more than one -1 in the target shape", op);
      infer = static_cast<int>(i);
    } else if (dims[i] < 0) {
      fail(CTN_ERR_SHAPE, "%s: negative dimension %lld", op, static_cast<long long>(dims[i]));
    } else if (dims[i] == 0) {
      zero = true;
    } else if (!overflow && __builtin_mul_overflow(known, dims[i], &known)) {
      overflow = true;
    }
    s.d[i] = dims[i];
  }
  if (zero) known = 0;
  int64_t n = from.numel();
  if (overflow && !zero)
    fail(CTN_ERR_SHAPE, "%s: cannot reshape %s into %s: the target has more elements than an int64 counts", op,
         shape_str(from).c_str(), shape_str(s).c_str());
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      fail(CTN_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) with a -1 into a multiple of %lld", op,
           shape_str(from).c_str(), static_cast<long long>(n), static_cast<long long>(known));
    s.d[infer] = n / known;
  }
  if (s.numel() != n)
    fail(CTN_ERR_SHAPE, "%s: cannot reshape %s into %s: element counts differ", op, shape_str(from).c_str(),
         shape_str(s).c_str());
  return s;
}

Tensor Tensor::reshape(const Shape &target, bool *copied) const {
  // A view is possible when every run of merged/split source dims is itself contiguous. The
  // simple sufficient test used here: the source is contiguous.
  if (is_contiguous()) {
    Tensor v = *this;
    v.shape = target;
    contiguous_strides(target, v.strides);
    if (copied) *copied = false;
    return v;
  }
  Tensor c = contiguous();
  c.shape = target;
  contiguous_strides(target, c.strides);
  if (copied) *copied = true;
  return c;
}

}  // namespace ctn
