// startup_bench: how long ctn_context_create takes in a fresh process (plugin search, dlopen,
// every backend's init), the figure a board user waits for before the first op.
//
//   build/bench/startup_bench [--runs N] [--json out.json]
//
// Each configuration runs N times as a new process (this program re-executing itself with
// --child), and the median is reported:
//   cpu              only the CPU backend (explicit load, no search): CPU init, thread pool
//   cpu+opencl       the CPU and OpenCL plugins alone (program cache warm)
//   cpu+vulkan       the CPU and Vulkan plugins alone
//   all              the default search: every plugin of the build (cpu, swish, opencl, vulkan,
//                    cuda when built), with the OpenCL program cache warm
//   all_cold_opencl  the same with CHUTNEY_OPENCL_NO_CACHE=1: the OpenCL program compiled
// The cache is a fresh temporary CHUTNEY_CACHE_DIR, filled by one untimed run first. Nothing
// before ctn_context_create (loading libchutney itself) is counted.
#include <chutney/chutney.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef CTN_BENCH_CPU_PLUGIN
#define CTN_BENCH_CPU_PLUGIN ""
#endif
#ifndef CTN_BENCH_OPENCL_PLUGIN
#define CTN_BENCH_OPENCL_PLUGIN ""
#endif
#ifndef CTN_BENCH_VULKAN_PLUGIN
#define CTN_BENCH_VULKAN_PLUGIN ""
#endif

namespace {

// MODE "all": the default search; else a ':'-separated list of plugin files, loaded alone.
int child(const char *mode) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  if (std::strcmp(mode, "all") != 0) {
    o.flags = CTN_CONTEXT_NO_AUTOLOAD;
    o.plugin_path = mode;
  }
  auto t0 = std::chrono::steady_clock::now();
  ctn_context *ctx = nullptr;
  if (ctn_context_create(&o, &ctx) != CTN_OK) {
    std::fprintf(stderr, "ctn_context_create: %s\n", ctn_last_error());
    return 1;
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  uint32_t n = 0, avail = 0;
  ctn_context_backend_count(ctx, &n);
  for (uint32_t i = 0; i < n; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    if (ctn_context_backend_info(ctx, i, &info) == CTN_OK && info.available) ++avail;
  }
  std::printf("%.3f %u\n", ms, avail);
  ctn_context_release(ctx);
  return 0;
}

// Runs this program with --child MODE; returns the milliseconds it printed (< 0 on failure).
double run_child(const char *self, const char *mode, bool cold_opencl, unsigned *backends) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    if (cold_opencl) setenv("CHUTNEY_OPENCL_NO_CACHE", "1", 1);
    execl(self, self, "--child", mode, static_cast<char *>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = {};
  ssize_t got = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  double ms = -1;
  if (got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && std::sscanf(buf, "%lf %u", &ms, backends) == 2)
    return ms;
  return -1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child(argv[2]);
  int runs = 15;
  const char *json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: startup_bench [--runs N] [--json out.json]\n");
      return 2;
    }
  }
  char cache[] = "/tmp/chutney-startup-XXXXXX";
  if (!mkdtemp(cache)) return 1;
  setenv("CHUTNEY_CACHE_DIR", cache, 1);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  unsigned backends = 0;
  run_child(self, "all", false, &backends);  // fills the program and pipeline caches
  struct Config {
    std::string name, mode;
    bool cold;
    double median = -1;
    unsigned backends = 0;
  };
  const std::string cpu = CTN_BENCH_CPU_PLUGIN;
  std::vector<Config> configs = {{"cpu", cpu, false}};
  if (*CTN_BENCH_OPENCL_PLUGIN) configs.push_back({"cpu+opencl", cpu + ":" + CTN_BENCH_OPENCL_PLUGIN, false});
  if (*CTN_BENCH_VULKAN_PLUGIN) configs.push_back({"cpu+vulkan", cpu + ":" + CTN_BENCH_VULKAN_PLUGIN, false});
  configs.push_back({"all", "all", false});
  if (*CTN_BENCH_OPENCL_PLUGIN) configs.push_back({"all_cold_opencl", "all", true});
  for (Config &c : configs) {
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
      double ms = run_child(self, c.mode.c_str(), c.cold, &c.backends);
      if (ms < 0) {
        std::fprintf(stderr, "startup_bench: child '%s' failed\n", c.mode.c_str());
        return 1;
      }
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    c.median = t[t.size() / 2];
    std::printf("%-16s %8.1f ms  (median of %d processes; %u backends available)\n", c.name.c_str(), c.median, runs,
                c.backends);
  }
  std::string out = "{\"runs\": " + std::to_string(runs) + ", \"context_create_ms\": {";
  for (const Config &c : configs) {
    char item[128];
    std::snprintf(item, sizeof item, "%s\"%s\": %.2f", &c == &configs[0] ? "" : ", ", c.name.c_str(), c.median);
    out += item;
  }
  out += "}}\n";
  if (json) {
    std::FILE *f = std::fopen(json, "w");
    if (f) {
      std::fputs(out.c_str(), f);
      std::fclose(f);
    }
  } else {
    std::fputs(out.c_str(), stdout);
  }
  std::string rm = std::string("rm -rf '") + cache + "'";
  return std::system(rm.c_str()) == 0 ? 0 : 0;
}
