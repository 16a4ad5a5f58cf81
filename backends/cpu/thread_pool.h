// A fork-join pool for the CPU backend that any number of threads may call at once (one
// context serves plans and eager graphs run from several threads; chutney.h).
//
// The work is done by crews: a crew is size - 1 worker threads plus the calling thread, and runs
// one job at a time. The parts of a job are claimed in order by whichever of them is free, so
// the caller runs the parts no worker has begun and never waits for a worker that has not
// started (a descheduled or still sleeping worker used to hold the whole job up). A caller takes an idle crew for its job; when none
// is idle it either starts another crew (mode kPerCaller, up to kMaxCrews) or runs the job's
// parts one after another on its own thread (mode kShared, the default: one crew, so a pool of
// n never runs more than n - 1 workers however many callers there are; docs/BENCHMARKS.md has
// the measurement behind that choice). Either way [0, n) is split into the same parts, so a
// job's result does not depend on which path ran it.
//
// Idle workers spin briefly and then block on a condition variable: OpenBLAS runs its own
// threads on the same cores and must not compete with ours spinning.
#ifndef CTN_CPU_THREAD_POOL_H
#define CTN_CPU_THREAD_POOL_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace ctn_cpu {

// Runs items [begin, end) of a job; `part` is the index of the part (0 .. parts - 1), which a
// kernel may use to pick per-part output slots.
using RangeFn = void (*)(void *ctx, int64_t begin, int64_t end, int part);

// Run once on every worker thread before it takes jobs; false: the thread cannot work (out of
// memory for its scratch), and the crew is not built.
using ThreadInit = bool (*)();
// Run on every worker thread when it ends (after its ThreadInit, whatever that returned).
using ThreadFini = void (*)();

// A crew could not be built: a worker thread did not start (thread or memory limits) or its
// ThreadInit failed. what() says which and why.
struct PoolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ThreadPool {
 public:
  enum class Mode { kShared, kPerCaller };
  static constexpr int kMaxCrews = 16;

  explicit ThreadPool(ThreadInit init, ThreadFini fini = nullptr) : init_(init), fini_(fini) {}
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  // Sets the number of participants per job (>= 1). The new crew is built first: on PoolError
  // the pool keeps its previous size and crews. Jobs running meanwhile finish on their old
  // crew, which is then destroyed; the pool itself stays valid throughout.
  void resize(int size);
  void set_mode(Mode m);
  int size() const { return size_.load(std::memory_order_acquire); }

  // Splits [0, n) into at most size() contiguous parts of at least `grain` items and runs them;
  // returns when all are done. Thread-safe. Not reentrant from inside `fn`.
  void parallel_for(int64_t n, int64_t grain, RangeFn fn, void *ctx);

 private:
  class Crew;
  std::shared_ptr<Crew> acquire(int parts);
  void give_back(std::shared_ptr<Crew> crew);

  const ThreadInit init_;
  const ThreadFini fini_;
  std::atomic<int> size_{1};
  std::mutex resize_mu_;  // serialises resize and set_mode
  std::mutex mu_;  // guards everything below
  std::vector<std::shared_ptr<Crew>> idle_;
  uint64_t epoch_ = 0;  // bumped by resize: crews of an older epoch are dropped on return
  int crews_ = 0;       // crews of the current epoch, idle or running
  Mode mode_ = Mode::kShared;
};

}  // namespace ctn_cpu

#endif
