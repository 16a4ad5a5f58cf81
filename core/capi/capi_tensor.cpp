// The C ABI of tensors (ctn_tensor_*): see capi.cpp for the conventions.
#include <chutney/chutney.h>

#include "capi/capi_common.h"
#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>

using namespace ctn;
using namespace ctn::capi;

extern "C" {

/* ---- tensors ---- */
CTN_API ctn_status ctn_tensor_create(ctn_dtype dtype, uint32_t ndim, const int64_t *shape, const void *data,
                                     ctn_tensor **out) {
  return wall([&] {
    NEED(out);
    const int32_t dt = raw_dtype(dtype);
    if (!dtype_valid(dt)) fail(CTN_ERR_DTYPE, "ctn_tensor_create: unknown dtype %d", dt);
    Tensor t = Tensor::empty(dt, Shape::from(ndim, shape));
    if (data) std::memcpy(t.data(), data, t.nbytes());
    *out = wrap(std::move(t));
  });
}

CTN_API void ctn_tensor_release(ctn_tensor *t) { delete t; }

CTN_API ctn_status ctn_tensor_dtype(const ctn_tensor *t, ctn_dtype *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = static_cast<ctn_dtype>(t->dtype);
  });
}

CTN_API ctn_status ctn_tensor_shape(const ctn_tensor *t, uint32_t *out_ndim, int64_t *out_shape) {
  return wall([&] {
    NEED(t);
    NEED(out_ndim);
    *out_ndim = t->shape.ndim;
    if (out_shape)
      for (uint32_t k = 0; k < t->shape.ndim; ++k) out_shape[k] = t->shape[k];
  });
}

CTN_API ctn_status ctn_tensor_strides(const ctn_tensor *t, int64_t *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    for (uint32_t k = 0; k < t->shape.ndim; ++k) out[k] = t->strides[k];
  });
}

CTN_API ctn_status ctn_tensor_numel(const ctn_tensor *t, int64_t *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = t->numel();
  });
}

CTN_API ctn_status ctn_tensor_is_contiguous(const ctn_tensor *t, int32_t *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = t->is_contiguous();
  });
}

CTN_API ctn_status ctn_tensor_read(const ctn_tensor *t, void *dst, size_t bytes) {
  return wall([&] {
    NEED(t);
    if (bytes && !dst) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_read: dst is NULL");
    if (bytes != t->nbytes())
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_read: the tensor %s%s has %zu bytes, %zu given", dtype_name(t->dtype),
           shape_str(t->shape).c_str(), t->nbytes(), bytes);
    t->read(dst);
  });
}

CTN_API ctn_status ctn_tensor_write(ctn_tensor *t, const void *src, size_t bytes) {
  return wall([&] {
    NEED(t);
    if (bytes && !src) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_write: src is NULL");
    if (bytes != t->nbytes())
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_write: the tensor %s%s has %zu bytes, %zu given", dtype_name(t->dtype),
           shape_str(t->shape).c_str(), t->nbytes(), bytes);
    need_writable(*t, "ctn_tensor_write", "the tensor");
    t->write(src);
  });
}

CTN_API ctn_status ctn_tensor_data(ctn_tensor *t, void **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    if (!t->is_contiguous()) fail(CTN_ERR_STATE, "ctn_tensor_data: the tensor is a non-contiguous view");
    *out = t->data();
  });
}

CTN_API ctn_status ctn_tensor_slice(const ctn_tensor *t, int32_t axis, int64_t start, int64_t stop, int64_t step,
                                    ctn_tensor **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = wrap(t->slice(axis, start, stop, step));
  });
}

CTN_API ctn_status ctn_tensor_permute(const ctn_tensor *t, const int32_t *perm, ctn_tensor **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = wrap(t->permute(perm));
  });
}

CTN_API ctn_status ctn_tensor_reshape(const ctn_tensor *t, uint32_t ndim, const int64_t *shape, ctn_tensor **out,
                                      int32_t *out_copied) {
  return wall([&] {
    NEED(t);
    NEED(out);
    bool copied = false;
    Tensor r = t->reshape(resolve_reshape("ctn_tensor_reshape", t->shape, ndim, shape), &copied);
    *out = wrap(std::move(r));
    if (out_copied) *out_copied = copied;
  });
}

CTN_API ctn_status ctn_tensor_contiguous(const ctn_tensor *t, ctn_tensor **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = wrap(t->contiguous());
  });
}

}  // extern "C"
