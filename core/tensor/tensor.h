// Host tensors: a reference-counted storage plus shape, strides (elements) and offset. Views
// (slice, permute, reshape where strides allow) share the storage.
#pragma once

#include "tensor/shape.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ctn {

class BufferPool;

// The largest single host buffer: PTRDIFF_MAX (2 GiB - 1 on 32-bit targets such as armhf, where
// pointer differences and malloc stop there).
constexpr uint64_t kMaxBufferBytes = static_cast<uint64_t>(PTRDIFF_MAX);

// `bytes` when one buffer can hold it; else CTN_ERR_OUT_OF_MEMORY naming `what`, the size and this
// build's limit (a 32-bit build refuses what a 64-bit one would allocate, instead of wrapping).
size_t checked_buffer_bytes(uint64_t bytes, const char *what);
// Bytes of a dense `dtype` tensor of `shape`, checked the same way (and against overflow).
size_t checked_tensor_bytes(int32_t dtype, const Shape &shape);

struct Storage {
  void *data = nullptr;
  size_t bytes = 0;
  // Borrowed memory (a DLPack producer's): `release(release_ctx)` runs once, when the last view
  // goes; read_only storage refuses every write through the C API.
  void (*release)(void *ctx) = nullptr;
  void *release_ctx = nullptr;
  bool borrowed = false;
  bool read_only = false;
  // Pooled memory (tensor/pool.h): the destructor gives the buffer back to `pool`.
  BufferPool *pool = nullptr;
  explicit Storage(size_t nbytes);  // zero-filled, 64-byte aligned; throws on OOM
  Storage(BufferPool *from, size_t nbytes);  // the same, taken from `from` (a pooled size)
  Storage(void *external, size_t nbytes, void (*release_fn)(void *), void *ctx, bool ro)
      : data(external), bytes(nbytes), release(release_fn), release_ctx(ctx), borrowed(true), read_only(ro) {}
  ~Storage();
  Storage(const Storage &) = delete;
  Storage &operator=(const Storage &) = delete;
};

struct Tensor {
  std::shared_ptr<Storage> storage;
  int32_t dtype = CTN_F32;
  Shape shape;
  int64_t strides[CTN_MAX_DIMS] = {};
  int64_t offset = 0;  // elements

  // Contiguous, zeroed; with a pool, a buffer of a pooled size comes from (and goes back to) it.
  static Tensor empty(int32_t dtype, const Shape &shape, BufferPool *pool = nullptr);
  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  char *data() const { return static_cast<char *>(storage->data) + offset * dtype_size(dtype); }

  // Copies elements in row-major order to/from a packed buffer.
  void read(void *dst) const;
  void write(const void *src);
  Tensor contiguous() const;  // a packed copy (always a new storage)

  Tensor slice(int32_t axis, int64_t start, int64_t stop, int64_t step) const;
  Tensor permute(const int32_t *perm) const;
  // View when possible; else a packed copy. *copied tells which.
  Tensor reshape(const Shape &target, bool *copied) const;
};

// Resolves one -1 in a reshape target against numel; throws naming `op`.
Shape resolve_reshape(const char *op, const Shape &from, uint32_t ndim, const int64_t *dims);

// Normalises slice bounds numpy-style; returns the resulting length.
int64_t normalize_slice(int64_t size, int64_t *start, int64_t *stop, int64_t step);

}  // namespace ctn
