// DLPack 1.1 import and export (abi/chutney/dlpack.h). Imports borrow the producer's memory
// through a Storage whose release calls the DLPack deleter once, when the last view goes.
#include <chutney/dlpack.h>

#include "capi/handles.h"
#include "util/wall.h"

#include <cstddef>
#include <memory>

using namespace ctn;

// Layouts pinned for LP64 (the same asserts as tests/abi/c11_headers.c; DLPack's layout on
// 32-bit targets follows from the same C declarations).
constexpr bool kLp64 = sizeof(void *) == 8;
static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4);
static_assert(!kLp64 || (offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16 && offsetof(DLTensor, dtype) == 20));
static_assert(!kLp64 || (offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, strides) == 32 && offsetof(DLTensor, byte_offset) == 40));
static_assert(!kLp64 || sizeof(DLTensor) == 48);
static_assert(!kLp64 || (offsetof(DLManagedTensorVersioned, manager_ctx) == 8 && offsetof(DLManagedTensorVersioned, deleter) == 16));
static_assert(!kLp64 || (offsetof(DLManagedTensorVersioned, flags) == 24 && offsetof(DLManagedTensorVersioned, dl_tensor) == 32));
static_assert(!kLp64 || sizeof(DLManagedTensorVersioned) == 80);

namespace {

void call_deleter(void *ctx) {
  auto *m = static_cast<DLManagedTensorVersioned *>(ctx);
  if (m->deleter) m->deleter(m);
}

int32_t dtype_from_dl(DLDataType t) {
  if (t.code == kDLFloat && t.bits == 32) return CTN_F32;
  if (t.code == kDLFloat && t.bits == 64) return CTN_F64;
  if (t.code == kDLInt && t.bits == 32) return CTN_I32;
  if (t.code == kDLInt && t.bits == 64) return CTN_I64;
  if (t.code == kDLUInt && t.bits == 8) return CTN_U8;
  if (t.code == kDLBool && t.bits == 8) return CTN_BOOL;
  if (t.code == kDLFloat && t.bits == 16) return CTN_F16;
  if (t.code == kDLBfloat && t.bits == 16) return CTN_BF16;
  if (t.code == kDLInt && t.bits == 8) return CTN_I8;
  if (t.code == kDLInt && t.bits == 16) return CTN_I16;
  if (t.code == kDLUInt && t.bits == 16) return CTN_U16;
  if (t.code == kDLUInt && t.bits == 32) return CTN_U32;
  if (t.code == kDLUInt && t.bits == 64) return CTN_U64;
  return -1;
}

DLDataType dl_from_dtype(int32_t d) {
  switch (d) {
    case CTN_F32: return {kDLFloat, 32, 1};
    case CTN_F64: return {kDLFloat, 64, 1};
    case CTN_I32: return {kDLInt, 32, 1};
    case CTN_I64: return {kDLInt, 64, 1};
    case CTN_U8: return {kDLUInt, 8, 1};
    case CTN_F16: return {kDLFloat, 16, 1};
    case CTN_BF16: return {kDLBfloat, 16, 1};
    case CTN_I8: return {kDLInt, 8, 1};
    case CTN_I16: return {kDLInt, 16, 1};
    case CTN_U16: return {kDLUInt, 16, 1};
    case CTN_U32: return {kDLUInt, 32, 1};
    case CTN_U64: return {kDLUInt, 64, 1};
    default: return {kDLBool, 8, 1};
  }
}

Tensor import(DLManagedTensorVersioned *m) {
  const DLTensor &t = m->dl_tensor;
  if (m->version.major != 1)
    fail(CTN_ERR_UNSUPPORTED, "ctn_tensor_from_dlpack: DLPack major version %u (1 is supported)", m->version.major);
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost && t.device.device_type != kDLROCMHost)
    fail(CTN_ERR_UNSUPPORTED, "ctn_tensor_from_dlpack: device type %d is not host memory", static_cast<int>(t.device.device_type));
  if (t.dtype.lanes != 1) fail(CTN_ERR_UNSUPPORTED, "ctn_tensor_from_dlpack: %u lanes (only 1 is supported)", t.dtype.lanes);
  const int32_t dt = dtype_from_dl(t.dtype);
  if (dt < 0)
    fail(CTN_ERR_UNSUPPORTED, "ctn_tensor_from_dlpack: dtype code %u with %u bits has no chutney dtype", t.dtype.code, t.dtype.bits);
  if (t.ndim < 0 || t.ndim > CTN_MAX_DIMS)
    fail(CTN_ERR_UNSUPPORTED, "ctn_tensor_from_dlpack: %d dims (at most %d)", t.ndim, CTN_MAX_DIMS);
  if (t.ndim > 0 && !t.shape) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_from_dlpack: shape is NULL");
  Tensor r;
  r.dtype = dt;
  r.shape = Shape::from(static_cast<uint32_t>(t.ndim), t.shape);
  if (t.strides)
    for (int32_t k = 0; k < t.ndim; ++k) r.strides[k] = t.strides[k];
  else
    contiguous_strides(r.shape, r.strides);
  // The byte offset goes into the storage's base pointer, so it need not be a multiple of the
  // element size. `bytes` is informational for borrowed memory.
  char *base = static_cast<char *>(t.data) + t.byte_offset;
  r.storage = std::make_shared<Storage>(base, r.nbytes(), call_deleter, m, (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  return r;
}

// Export: the managed tensor owns a view of the storage plus its shape/stride arrays.
struct Export {
  DLManagedTensorVersioned m{};
  Tensor view;
  int64_t shape[CTN_MAX_DIMS] = {}, strides[CTN_MAX_DIMS] = {};
};

void export_deleter(DLManagedTensorVersioned *self) {
  if (self) delete static_cast<Export *>(self->manager_ctx);
}

}  // namespace

extern "C" {

CTN_API ctn_status ctn_tensor_from_dlpack(DLManagedTensorVersioned *managed, ctn_tensor **out) {
  return wall([&] {
    if (!managed) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_from_dlpack: managed is NULL");
    if (!out) {
      call_deleter(managed);
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_from_dlpack: out is NULL");
    }
    Tensor t;
    try {
      t = import(managed);
    } catch (...) {
      call_deleter(managed);  // ownership passed to us: give it back on failure too
      throw;
    }
    // From here the storage owns `managed`: a failed allocation below releases it with `t`.
    *out = new ctn_tensor(std::move(t));
  });
}

CTN_API ctn_status ctn_tensor_to_dlpack(const ctn_tensor *t, uint32_t flags, DLManagedTensorVersioned **out) {
  return wall([&] {
    if (!t || !out) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_to_dlpack: %s is NULL", t ? "out" : "t");
    if (flags & ~CTN_DLPACK_CONTIGUOUS) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_to_dlpack: unknown flags 0x%x", flags);
    auto e = std::make_unique<Export>();
    const bool copy = (flags & CTN_DLPACK_CONTIGUOUS) && !t->is_contiguous();
    e->view = copy ? t->contiguous() : static_cast<const Tensor &>(*t);
    const Tensor &v = e->view;
    for (uint32_t k = 0; k < v.shape.ndim; ++k) e->shape[k] = v.shape[k], e->strides[k] = v.strides[k];
    DLManagedTensorVersioned &m = e->m;
    m.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m.manager_ctx = e.get();
    m.deleter = export_deleter;
    m.flags = (copy ? DLPACK_FLAG_BITMASK_IS_COPIED : 0) | (v.storage->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0);
    m.dl_tensor.data = v.storage->data;
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = static_cast<int32_t>(v.shape.ndim);
    m.dl_tensor.dtype = dl_from_dtype(v.dtype);
    m.dl_tensor.shape = e->shape;
    m.dl_tensor.strides = e->strides;
    m.dl_tensor.byte_offset = static_cast<uint64_t>(v.offset) * dtype_size(v.dtype);
    *out = &e.release()->m;
  });
}

}  // extern "C"
