// A small fork-join pool for the CPU backend. The calling thread takes part in every job, so a
// pool of size n runs n - 1 worker threads. Idle workers spin briefly and then block on a
// condition variable: OpenBLAS runs its own threads on the same cores and must not compete with
// ours spinning.
#ifndef CTN_CPU_THREAD_POOL_H
#define CTN_CPU_THREAD_POOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace ctn_cpu {

// Runs items [begin, end) of a job; `part` is the index of the participant (0 = the caller),
// stable for the whole call so it can select per-thread scratch memory.
using RangeFn = void (*)(void *ctx, int64_t begin, int64_t end, int part);

class ThreadPool {
 public:
  explicit ThreadPool(int size);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return size_; }

  // Splits [0, n) into at most size() contiguous parts of at least `grain` items and runs them
  // in parallel; returns when all are done. Not reentrant: kernels call it from the host thread.
  void parallel_for(int64_t n, int64_t grain, RangeFn fn, void *ctx);

 private:
  void worker_main(int index);
  void run_part(int part);

  int size_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  // The current job, written by the caller before generation_ is bumped.
  RangeFn fn_ = nullptr;
  void *ctx_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0;
};

}  // namespace ctn_cpu

#endif
