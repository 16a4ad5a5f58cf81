#include "thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CTN_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CTN_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CTN_CPU_RELAX() ((void)0)
#endif

namespace ctn_cpu {

namespace {
// Roughly 10-50 us of spinning: long enough to catch the next node of a plan, short enough not
// to steal cycles from OpenBLAS or from other processes.
constexpr int kSpinIterations = 4000;
}  // namespace

ThreadPool::ThreadPool(int size) : size_(size < 1 ? 1 : size) {
  workers_.reserve(static_cast<size_t>(size_ - 1));
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  for (auto &t : workers_) t.join();
}

void ThreadPool::run_part(int part) {
  if (part >= parts_) return;
  int64_t begin = n_ * part / parts_;
  int64_t end = n_ * (part + 1) / parts_;
  if (begin < end) fn_(ctx_, begin, end, part);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, RangeFn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t max_parts = (n + grain - 1) / grain;
  int parts = static_cast<int>(max_parts < size_ ? max_parts : size_);
  if (parts <= 1) {
    fn(ctx, 0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    parts_ = parts;
    pending_.store(size_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  run_part(0);
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    CTN_CPU_RELAX();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::worker_main(int index) {
  uint64_t seen = 0;
  for (;;) {
    bool have_job = false;
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen) {
        have_job = true;
        break;
      }
      CTN_CPU_RELAX();
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!have_job)
        work_cv_.wait(lock,
                      [&] { return generation_.load(std::memory_order_acquire) != seen; });
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
    }
    run_part(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace ctn_cpu
