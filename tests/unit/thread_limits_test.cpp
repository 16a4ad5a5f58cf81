// Thread limits: asking for more worker threads than the process may start (an address-space
// limit, a container's pid limit) gives a clear error and never a hang, and the thread count is
// bounded however it is asked for. The limited cases run in a child process with RLIMIT_AS set
// low, under a deadline: before the fix the CPU backend's pool blocked forever while unwinding.
#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CTN_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define CTN_UNDER_SANITIZER 1
#endif
#endif

namespace {

// The process's current virtual size in bytes (/proc/self/statm, first field, in pages).
long long virtual_bytes() {
  std::FILE *f = std::fopen("/proc/self/statm", "r");
  long long pages = 0;
  if (f) {
    if (std::fscanf(f, "%lld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * sysconf(_SC_PAGESIZE);
}

constexpr int kNotEnforced = 77;

// Runs `child` in a forked process whose address space may grow by `headroom` bytes only;
// fails the test when it does not exit 0 within `deadline`. The child reports on stderr.
void run_limited(int (*child)(), long long headroom, std::chrono::seconds deadline) {
#ifdef CTN_UNDER_SANITIZER
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space: RLIMIT_AS cannot be used";
#endif
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    rl.rlim_cur = static_cast<rlim_t>(virtual_bytes() + headroom);  // the soft limit: lift_limit() undoes it
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    // qemu-user (the aarch64 stage) accepts the call and ignores it: nothing to test there.
    void *probe = mmap(nullptr, static_cast<size_t>(headroom) * 2, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe != MAP_FAILED) _exit(kNotEnforced);
    _exit(child());
  }
  const auto end = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "the child did not return within " << deadline.count() << " s (hang)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the child died with signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (WEXITSTATUS(status) == kNotEnforced) GTEST_SKIP() << "RLIMIT_AS is not enforced here (an emulator?)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's message above";
}

// Back to the hard limit (the failed attempt's malloc arenas may have used up the headroom).
void lift_limit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_AS, &rl);
  }
}

// Room for a few hundred workers (8 MiB stack + 3.3 MiB GEMM scratch each), not 1000: the
// scratch of all 1000 fits (3.3 GB), so the old pool got as far as starting threads, and hung.
constexpr long long kHeadroom = 5ll << 30;

// A context on the CPU backend with `threads` workers.
ctn_status cpu_context(int32_t threads, ctn_context **ctx) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.backends = "cpu";
  o.num_threads = threads;
  return ctn_context_create(&o, ctx);
}

// A context asking for 1000 threads: the CPU backend reports why it is unavailable.
int child_init() {
  ctn_context *ctx = nullptr;
  ctn_status s = cpu_context(1000, &ctx);
  const std::string msg = ctn_last_error();
  ctn_context_release(ctx);
  if (s == CTN_ERR_UNAVAILABLE && msg.find("cannot run 1000 threads") != std::string::npos) return 0;
  std::fprintf(stderr, "child: expected CTN_ERR_UNAVAILABLE naming 1000 threads, got %s: %s\n", ctn_status_name(s),
               msg.c_str());
  return 1;
}

// ctn_context_set_num_threads(1000) fails the same way, and the context keeps its 2 threads.
int child_resize() {
  ctn_context *ctx = nullptr;
  if (cpu_context(2, &ctx) != CTN_OK) {
    std::fprintf(stderr, "child: create: %s\n", ctn_last_error());
    return 1;
  }
  int rc = 0;
  ctn_status s = ctn_context_set_num_threads(ctx, 1000);
  std::string msg = ctn_last_error();
  if (s != CTN_ERR_UNAVAILABLE || msg.find("cannot run 1000 threads") == std::string::npos) {
    std::fprintf(stderr, "child: set_num_threads(1000) gave %s: %s\n", ctn_status_name(s), msg.c_str());
    rc = 1;
  }
  // Still usable, still 2 threads: x [64,64] @ x.
  lift_limit();
  ctn_graph *g = nullptr;
  ctn_node x, y;
  ctn_plan *p = nullptr;
  ctn_tensor *xv = nullptr, *yv = nullptr;
  const int64_t shape[2] = {64, 64};
  float ones[64 * 64], out[64 * 64];
  const ctn_tensor *feeds[1] = {nullptr};
  for (float &v : ones) v = 1.0f;
  if (ctn_graph_create(ctx, 0, &g) != CTN_OK || ctn_input(g, "x", CTN_F32, 2, shape, &x) != CTN_OK ||
      ctn_matmul(g, x, x, 0, 0, &y) != CTN_OK || ctn_plan_compile(g, 1, &y, nullptr, &p) != CTN_OK ||
      ctn_tensor_create(CTN_F32, 2, shape, ones, &xv) != CTN_OK || ctn_plan_output_create(p, 0, &yv) != CTN_OK ||
      (feeds[0] = xv, ctn_plan_run(p, 1, &x, feeds, 1, &yv)) != CTN_OK ||
      ctn_tensor_read(yv, out, sizeof out) != CTN_OK) {
    std::fprintf(stderr, "child: running after the failed resize: %s\n", ctn_last_error());
    rc = 1;
  } else if (out[0] != 64.0f || out[64 * 64 - 1] != 64.0f) {
    std::fprintf(stderr, "child: wrong matmul result %g\n", static_cast<double>(out[0]));
    rc = 1;
  }
  ctn_backend_info bi{};
  bi.struct_size = sizeof bi;
  uint32_t n = 0;
  ctn_context_backend_count(ctx, &n);
  for (uint32_t i = 0; i < n; ++i)
    if (ctn_context_backend_info(ctx, i, &bi) == CTN_OK && std::strcmp(bi.name, "cpu") == 0 &&
        !std::strstr(bi.description, "2 threads")) {
      std::fprintf(stderr, "child: cpu is now \"%s\"\n", bi.description);
      rc = 1;
    }
  ctn_tensor_release(yv);
  ctn_tensor_release(xv);
  ctn_plan_release(p);
  ctn_graph_release(g);
  ctn_context_release(ctx);
  return rc;
}

TEST(ThreadLimits, InitWithTooManyThreadsFailsClearly) { run_limited(child_init, kHeadroom, std::chrono::seconds(60)); }

TEST(ThreadLimits, SetNumThreadsWithTooManyThreadsFailsClearly) {
  run_limited(child_resize, kHeadroom, std::chrono::seconds(60));
}

// The bound 1..1024 of the CPU backend's num_threads option holds for every way of asking.
TEST(ThreadLimits, ThreadCountIsBoundedEverywhere) {
  const char *old = std::getenv("CHUTNEY_NUM_THREADS");
  const std::string saved = old ? old : "";
  ctn_context *ctx = nullptr;
  for (const char *bad : {"1025", "100000", "-3", "two", "4x"}) {
    setenv("CHUTNEY_NUM_THREADS", bad, 1);
    EXPECT_EQ(ctn_context_create(nullptr, &ctx), CTN_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(ctn_last_error()).find("CHUTNEY_NUM_THREADS"), std::string::npos) << ctn_last_error();
    EXPECT_EQ(ctx, nullptr);
  }
  setenv("CHUTNEY_NUM_THREADS", "3", 1);
  ASSERT_EQ(ctn_context_create(nullptr, &ctx), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_context_set_num_threads(ctx, 1025), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_context_set_num_threads(ctx, 0), CTN_ERR_INVALID_ARGUMENT);
  ctn_context_release(ctx);
  if (old) setenv("CHUTNEY_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("CHUTNEY_NUM_THREADS");
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.num_threads = 1025;
  EXPECT_EQ(ctn_context_create(&o, &ctx), CTN_ERR_INVALID_ARGUMENT);
  o.num_threads = -1;
  EXPECT_EQ(ctn_context_create(&o, &ctx), CTN_ERR_INVALID_ARGUMENT);
}

}  // namespace
