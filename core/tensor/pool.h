// A size-classed free-list of host buffers for eager outputs (exec/eager.cpp). Each context owns
// one: its eager ops take their output buffers from it and a released tensor's storage gives its
// buffer back, so a loop of eager ops stops paying malloc/free (and zeroing fresh pages) per op.
//
// Thread-safe (one mutex, held for a push or a pop). Bounded: at most kMaxCachedBytes cached, and
// only buffers of at most kMaxPooledBytes (larger ones are allocated and freed as before). The
// context closes its pool when it is destroyed: the cached buffers are freed then; tensors that
// outlive the context free their buffers themselves, and the pool object goes with the last one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <mutex>
#include <vector>

namespace ctn {

class BufferPool {
 public:
  static constexpr size_t kMaxPooledBytes = size_t{4} << 20;
  static constexpr size_t kMaxCachedBytes = size_t{32} << 20;

  BufferPool() = default;
  BufferPool(const BufferPool &) = delete;
  BufferPool &operator=(const BufferPool &) = delete;

  // The bytes a buffer for a request of `bytes` has (its size class); 0 when the request is not
  // pooled (larger than kMaxPooledBytes).
  static size_t class_bytes(size_t bytes);

  // A 64-byte aligned buffer of class_bytes(bytes) bytes whose first `bytes` (rounded up to 64)
  // are zero unless `zero` is false; throws CTN_ERR_OUT_OF_MEMORY. `bytes` must be pooled
  // (class_bytes(bytes) != 0).
  void *take(size_t bytes, bool zero = true);
  // Gives back what take(bytes) returned. Never throws (a destructor calls it).
  void give(void *p, size_t bytes) noexcept;
  // The owner is going: frees the cached buffers, makes later gives free theirs, and deletes the
  // pool now or with the last buffer given back. The pool must be heap-allocated (new).
  void close() noexcept;

  size_t cached_bytes() const;
  size_t outstanding() const;  // buffers taken and not given back

 private:
  ~BufferPool() = default;  // close() deletes
  static constexpr size_t kClasses = 64;
  static size_t class_index(size_t bytes);

  // A test-and-set lock: held for a vector push or pop, so cheaper than a mutex uncontended; a
  // waiter yields after a short spin (the holder may be descheduled on a loaded machine).
  class SpinLock {
   public:
    void lock() noexcept;
    void unlock() noexcept { held_.clear(std::memory_order_release); }

   private:
    std::atomic_flag held_ = ATOMIC_FLAG_INIT;
  };

  mutable SpinLock mu_;
  std::vector<void *> free_[kClasses];
  size_t cached_ = 0;
  size_t outstanding_ = 0;
  bool closed_ = false;
};

// A standard allocator drawing on a pool: std::allocate_shared puts an eager tensor's (or its
// storage's) object and reference counts in a pooled block. Blocks past the pooled sizes come
// from operator new.
template <class T>
struct PoolAllocator {
  using value_type = T;
  BufferPool *pool;
  explicit PoolAllocator(BufferPool *p) noexcept : pool(p) {}
  template <class U>
  PoolAllocator(const PoolAllocator<U> &o) noexcept : pool(o.pool) {}  // NOLINT: rebinding converts implicitly
  T *allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    static_assert(alignof(T) <= 64, "pooled blocks are 64-byte aligned");
    if (!BufferPool::class_bytes(bytes)) return static_cast<T *>(::operator new(bytes));
    return static_cast<T *>(pool->take(bytes, false));
  }
  void deallocate(T *p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (!BufferPool::class_bytes(bytes)) ::operator delete(p);
    else pool->give(p, bytes);
  }
  template <class U>
  bool operator==(const PoolAllocator<U> &o) const noexcept {
    return pool == o.pool;
  }
};

}  // namespace ctn
