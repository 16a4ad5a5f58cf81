#include "tensor/pool.h"

#include "util/status.h"

#include <cstdlib>
#include <cstring>
#include <thread>

namespace ctn {

namespace {
size_t round64(size_t bytes) { return bytes <= 64 ? 64 : (bytes + 63) / 64 * 64; }
}  // namespace

void BufferPool::SpinLock::lock() noexcept {
  for (int spins = 0; held_.test_and_set(std::memory_order_acquire); ++spins) {
    if (spins >= 64) {
      std::this_thread::yield();
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
      __asm__ __volatile__("yield");
#endif
    }
  }
}

// Classes: 64-byte steps up to 1 KiB (16 classes), then four per doubling (waste <= 25 %).
size_t BufferPool::class_index(size_t bytes) {
  const size_t r = round64(bytes);
  if (r <= 1024) return r / 64 - 1;
  const unsigned p = 63u - static_cast<unsigned>(__builtin_clzll(r - 1));  // 2^p < r <= 2^(p+1)
  const size_t quarter = size_t{1} << (p - 2);
  const size_t k = (r - (size_t{1} << p) + quarter - 1) / quarter;  // 1..4
  return 16 + (p - 10) * 4 + (k - 1);
}

size_t BufferPool::class_bytes(size_t bytes) {
  if (bytes > kMaxPooledBytes) return 0;
  const size_t r = round64(bytes);
  if (r <= 1024) return r;
  const unsigned p = 63u - static_cast<unsigned>(__builtin_clzll(r - 1));
  const size_t quarter = size_t{1} << (p - 2);
  return (size_t{1} << p) + (class_index(bytes) - 16 - (p - 10) * 4 + 1) * quarter;
}

void *BufferPool::take(size_t bytes, bool zero) {
  const size_t cls = class_bytes(bytes);
  if (!cls) fail(CTN_ERR_INTERNAL, "buffer pool: %zu bytes is past the pooled sizes", bytes);
  const size_t idx = class_index(bytes);
  void *p = nullptr;
  {
    std::lock_guard<SpinLock> lk(mu_);
    ++outstanding_;
    if (!free_[idx].empty()) {
      p = free_[idx].back();
      free_[idx].pop_back();
      cached_ -= cls;
    }
  }
  if (!p) {
    p = std::aligned_alloc(64, cls);
    if (!p) {
      std::lock_guard<SpinLock> lk(mu_);  // the owner is alive (it called take): not closed
      --outstanding_;
      fail(CTN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of host memory", bytes);
    }
  }
  if (zero) std::memset(p, 0, round64(bytes));
  return p;
}

void BufferPool::give(void *p, size_t bytes) noexcept {
  const size_t cls = class_bytes(bytes);
  bool keep = false, last = false;
  {
    std::lock_guard<SpinLock> lk(mu_);
    --outstanding_;
    if (!closed_ && cached_ + cls <= kMaxCachedBytes) {
      try {
        free_[class_index(bytes)].push_back(p);
        cached_ += cls;
        keep = true;
      } catch (...) {  // no room to remember it: free it instead
      }
    }
    last = closed_ && outstanding_ == 0;
  }
  if (!keep) std::free(p);
  if (last) delete this;
}

void BufferPool::close() noexcept {
  bool last;
  {
    std::lock_guard<SpinLock> lk(mu_);
    closed_ = true;
    for (std::vector<void *> &f : free_) {
      for (void *p : f) std::free(p);
      std::vector<void *>().swap(f);
    }
    cached_ = 0;
    last = outstanding_ == 0;
  }
  if (last) delete this;
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard<SpinLock> lk(mu_);
  return cached_;
}

size_t BufferPool::outstanding() const {
  std::lock_guard<SpinLock> lk(mu_);
  return outstanding_;
}

}  // namespace ctn
