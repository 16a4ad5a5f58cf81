#include "thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <system_error>
#include <thread>

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

// Part p of [0, n) split into `parts`: the one formula both the crews and the inline path use.
inline void part_range(int64_t n, int parts, int p, int64_t *begin, int64_t *end) {
  *begin = n * p / parts;
  *end = n * (p + 1) / parts;
}
}  // namespace

// size - 1 workers plus the caller; one job at a time (the pool hands a crew to one caller).
// Which thread runs which part is not fixed (run()), so results never depend on it.
class ThreadPool::Crew {
 public:
  Crew(int size, ThreadInit init, ThreadFini fini, uint64_t epoch) : size_(size), epoch_(epoch) {
    workers_.reserve(static_cast<size_t>(size_ - 1));
    std::string why;
    for (int i = 1; i < size_; ++i) {
      try {
        workers_.emplace_back([this, init, fini] { worker_main(init, fini); });
      } catch (const std::system_error &e) {
        why = "cannot start worker thread " + std::to_string(i) + " of " + std::to_string(size_ - 1) + " (" +
              e.what() + ")";
        break;
      }
    }
    int failed = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return reported_ == static_cast<int>(workers_.size()); });
      failed = init_failed_;
    }
    if (why.empty() && failed)
      why = std::to_string(failed) + " of " + std::to_string(size_ - 1) + " worker threads have no memory for their scratch";
    if (!why.empty()) {
      // Every started worker is parked on work_cv_ (or has exited): wake and join them before
      // the condition variables go, or their destruction would wait forever.
      stop_and_join();
      throw PoolError(why);
    }
  }
  ~Crew() { stop_and_join(); }
  Crew(const Crew &) = delete;
  Crew &operator=(const Crew &) = delete;

  int size() const { return size_; }
  uint64_t epoch() const { return epoch_; }

  // Parts are claimed, not assigned: the caller and the workers take the next unclaimed part
  // until none is left, so the caller runs every part no worker has begun (a worker still
  // waking up, or descheduled, costs nothing) and waits only for parts already running.
  void run(int parts, int64_t n, RangeFn fn, void *ctx) {
    uint32_t seq;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = fn;
      ctx_ = ctx;
      n_ = n;
      done_.store(0, std::memory_order_relaxed);
      seq = static_cast<uint32_t>(generation_.load(std::memory_order_relaxed) + 1);
      claim_.store(pack(seq, parts, 0), std::memory_order_release);
      generation_.fetch_add(1, std::memory_order_release);
    }
    work_cv_.notify_all();
    run_claimed(seq);
    for (int i = 0; i < kSpinIterations; ++i) {
      if (done_.load(std::memory_order_acquire) == parts) return;
      CTN_CPU_RELAX();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == parts; });
  }

 private:
  void stop_and_join() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    work_cv_.notify_all();
    for (auto &t : workers_) t.join();
    workers_.clear();
  }

  // claim_ holds the job's sequence number (the low 32 bits of its generation), its number of
  // parts and the next unclaimed part: one word, so a claim can never take a part of a job that
  // has since been replaced (the sequence must still match).
  static uint64_t pack(uint32_t seq, int parts, int next) {
    return (uint64_t{seq} << 32) | (static_cast<uint64_t>(parts) << 16) | static_cast<uint64_t>(next);
  }
  // Claims and runs parts of job `seq` until none is left; returns how many it ran.
  int run_claimed(uint32_t seq) {
    int ran = 0;
    for (;;) {
      uint64_t v = claim_.load(std::memory_order_acquire);
      int part, parts;
      do {
        parts = static_cast<int>((v >> 16) & 0xffff);
        part = static_cast<int>(v & 0xffff);
        if (static_cast<uint32_t>(v >> 32) != seq || part >= parts) return ran;
      } while (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire));
      // The job's fields stay as they are until every part is done, this one included.
      int64_t begin, end;
      part_range(n_, parts, part, &begin, &end);
      if (begin < end) fn_(ctx_, begin, end, part);
      ++ran;
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_cv_.notify_one();
      }
    }
  }

  void worker_main(ThreadInit init, ThreadFini fini) {
    struct AtExit {
      ThreadFini f;
      ~AtExit() {
        if (f) f();
      }
    } at_exit{fini};
    const bool ok = !init || init();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++reported_;
      if (!ok) ++init_failed_;
    }
    start_cv_.notify_one();
    if (!ok) return;
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
          work_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        seen = generation_.load(std::memory_order_acquire);
        if (stop_) return;
      }
      run_claimed(static_cast<uint32_t>(seen));
    }
  }

  const int size_;
  const uint64_t epoch_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_, start_cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> claim_{0};  // pack(seq, parts, next part)
  std::atomic<int> done_{0};        // parts of the current job finished
  bool stop_ = false;
  int reported_ = 0, init_failed_ = 0;  // start-up: workers that ran their ThreadInit
  // The current job, written by the caller before generation_ is bumped.
  RangeFn fn_ = nullptr;
  void *ctx_ = nullptr;
  int64_t n_ = 0;
};

ThreadPool::~ThreadPool() {
  std::vector<std::shared_ptr<Crew>> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle.swap(idle_);
  }
}

void ThreadPool::resize(int size) {
  if (size < 1) size = 1;
  std::lock_guard<std::mutex> serial(resize_mu_);
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = epoch_ + 1;  // only resize changes epoch_, and resizes are serialised
  }
  // Built before anything changes: on failure (PoolError, bad_alloc) the pool is as it was.
  std::shared_ptr<Crew> fresh;
  if (size > 1) fresh = std::make_shared<Crew>(size, init_, fini_, epoch);
  std::vector<std::shared_ptr<Crew>> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = epoch;
    old.swap(idle_);
    if (fresh) idle_.push_back(std::move(fresh));
    crews_ = static_cast<int>(idle_.size());
    size_.store(size, std::memory_order_release);
  }
  // `old` goes out of scope here, outside the lock: its workers are joined. Crews running a
  // job now are of an older epoch: give_back drops them when their job is done.
}

void ThreadPool::set_mode(Mode m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    mode_ = m;
  }
  resize(size());  // a fresh start: no leftover crews of the other mode
}

std::shared_ptr<ThreadPool::Crew> ThreadPool::acquire(int parts) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!idle_.empty() && idle_.back()->size() >= parts) {
    std::shared_ptr<Crew> c = std::move(idle_.back());
    idle_.pop_back();
    return c;
  }
  const int size = size_.load(std::memory_order_relaxed);
  if (mode_ != Mode::kPerCaller || crews_ >= kMaxCrews || size < parts) return nullptr;
  ++crews_;
  const uint64_t epoch = epoch_;
  lock.unlock();
  try {
    return std::make_shared<Crew>(size, init_, fini_, epoch);
  } catch (...) {
    // No more threads now: this caller runs its parts itself, as in the shared mode.
    lock.lock();
    if (epoch_ == epoch) --crews_;
    return nullptr;
  }
}

void ThreadPool::give_back(std::shared_ptr<Crew> crew) {
  std::unique_lock<std::mutex> lock(mu_);
  if (crew->epoch() == epoch_) {
    idle_.push_back(std::move(crew));
    return;
  }
  lock.unlock();  // a crew of an older size: joined here, outside the lock
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, RangeFn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t max_parts = (n + grain - 1) / grain;
  const int parts = static_cast<int>(std::min<int64_t>(max_parts, size()));
  if (parts <= 1) {
    fn(ctx, 0, n, 0);
    return;
  }
  if (std::shared_ptr<Crew> crew = acquire(parts)) {
    crew->run(parts, n, fn, ctx);
    give_back(std::move(crew));
    return;
  }
  // Every crew is busy with other callers' jobs: the same parts, one after another, here.
  for (int p = 0; p < parts; ++p) {
    int64_t begin, end;
    part_range(n, parts, p, &begin, &end);
    if (begin < end) fn(ctx, begin, end, p);
  }
}

}  // namespace ctn_cpu
