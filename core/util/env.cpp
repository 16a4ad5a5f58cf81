#include "util/env.h"

#include <chutney/types.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/status.h"

extern char **environ;

namespace ctn {

const std::vector<EnvVar> &env_vars() {
  static const std::vector<EnvVar> vars = {
      {"CHUTNEY_BACKEND", EnvKind::Backends, nullptr, 0, 0, "preferred backends, ','-separated"},
      {"CHUTNEY_NUM_THREADS", EnvKind::Count, nullptr, 1, 1024, "worker threads of host backends"},
      {"CHUTNEY_PLUGIN_PATH", EnvKind::Paths, nullptr, 0, 0, "':'-separated plugin directories or files"},
      {"CHUTNEY_LOG", EnvKind::Choice, "debug,info,warn,error", 0, 0, "log level"},
      {"CHUTNEY_PROFILE", EnvKind::Choice, "0,1,steps", 0, 0, "per-op time of each plan, printed at its end"},
      {"CHUTNEY_CACHE_DIR", EnvKind::Paths, nullptr, 0, 0, "cache directory of the GPU backends"},
      {"CHUTNEY_CPU_GEMM", EnvKind::Choice, "openblas,own,auto", 0, 0, "CPU backend GEMM"},
      {"CHUTNEY_CPU_CONV", EnvKind::Choice, "onednn,own,auto", 0, 0, "CPU backend convolutions"},
      {"CHUTNEY_CPU_HALF_MATMUL", EnvKind::Choice, "auto,convert,own,onednn", 0, 0,
       "CPU backend bf16/f16 matmuls and convolutions"},
      {"CHUTNEY_CPU_ISA", EnvKind::Choice, "generic,neon,avx2,avx512", 0, 0, "CPU kernel variant"},
      {"CHUTNEY_OPENCL_PLACEMENT", EnvKind::Choice, "always,auto", 0, 0, "OpenCL placement policy"},
      {"CHUTNEY_OPENCL_REMEASURE", EnvKind::Flag, nullptr, 0, 0, "OpenCL: ignore the cached placement policy"},
      {"CHUTNEY_OPENCL_NO_CACHE", EnvKind::Flag, nullptr, 0, 0, "OpenCL: neither read nor write the program cache"},
      {"CHUTNEY_OPENCL_NO_FP64", EnvKind::Flag, nullptr, 0, 0, "OpenCL: act as if the device had no f64"},
      {"CHUTNEY_OPENCL_SMALL_GEMM", EnvKind::Count, nullptr, 0, 1ll << 40, "OpenCL: largest GEMM of the own kernel"},
      {"CHUTNEY_VULKAN_PLACEMENT", EnvKind::Choice, "always,auto", 0, 0, "Vulkan placement policy"},
      {"CHUTNEY_VULKAN_REMEASURE", EnvKind::Flag, nullptr, 0, 0, "Vulkan: ignore the cached placement policy"},
      {"CHUTNEY_VULKAN_VALIDATION", EnvKind::Flag, nullptr, 0, 0, "Vulkan: enable the validation layers"},
      {"CHUTNEY_VULKAN_DEVICE", EnvKind::Text, nullptr, 0, 0, "Vulkan: device index or name"},
      {"CHUTNEY_VULKAN_LOADER", EnvKind::Paths, nullptr, 0, 0, "Vulkan: the loader library to open"},
      {"CHUTNEY_VULKAN_STAGING", EnvKind::Flag, nullptr, 0, 0, "Vulkan: force staging buffers"},
      {"CHUTNEY_VULKAN_NO_F64", EnvKind::Flag, nullptr, 0, 0, "Vulkan: act as if the device had no f64"},
      {"CHUTNEY_VULKAN_MAX_RANGE", EnvKind::Count, nullptr, 256, 1ll << 40, "Vulkan: largest buffer window (tests)"},
      {"CHUTNEY_VULKAN_SMALL_TILES", EnvKind::Flag, nullptr, 0, 0, "Vulkan: small GEMM tiles (tests)"},
      {"CHUTNEY_VULKAN_TILED_MATMUL", EnvKind::Flag, nullptr, 0, 0, "Vulkan: force the tiled GEMM (tests)"},
      {"CHUTNEY_VULKAN_DIRECT_CONV", EnvKind::Flag, nullptr, 0, 0, "Vulkan: force the direct convolution (tests)"},
      {"CHUTNEY_CUDA_DEVICE", EnvKind::Count, nullptr, 0, 1023, "CUDA device index"},
      {"CHUTNEY_CUDA_GRAPHS", EnvKind::Flag, nullptr, 0, 0, "CUDA graph replay (default 1)"},
      {"CHUTNEY_RENDEZVOUS", EnvKind::Text, nullptr, 0, 0, "NCCL rendezvous (file:PATH)"},
      {"CHUTNEY_MPI_SHM_BYTES", EnvKind::Count, nullptr, 0, 1ll << 40,
       "mpi: shared-memory allreduce ring per rank in bytes (default 32 MiB; 0: MPI's own allreduce)"},
  };
  return vars;
}

namespace {

// Variables of the build, the tests and the bindings' tooling, never read by the library: known,
// so not warned about, and not checked.
const char *const kToolVars[] = {"CHUTNEY_BUILD_DIR", "CHUTNEY_LIB_DIR",     "CHUTNEY_INCLUDE_DIR", "CHUTNEY_CLI",
                                 "CHUTNEY_GO_WRAP_H", "CHUTNEY_GO_LEAKS",    "CHUTNEY_LEAK_CPU_ONLY",
                                 "CHUTNEY_LEAK_CYCLES", "CHUTNEY_LEAK_WARMUP", "CHUTNEY_LEAK_CONTEXTS",
                                 "CHUTNEY_ABI_STUB_CHILD", "CHUTNEY_TEST_DATA_DIR"};

bool in_list(const std::string &v, const char *list) {
  std::string cur;
  for (const char *p = list;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (cur == v) return true;
      cur.clear();
      if (!*p) return false;
    } else {
      cur += *p;
    }
  }
}

[[noreturn]] void refuse(const EnvVar &var, const std::string &value, const std::string &accepts) {
  fail(CTN_ERR_INVALID_ARGUMENT, "environment variable %s='%s': %s accepts %s (%s)", var.name, value.c_str(), var.name,
       accepts.c_str(), var.what);
}

void check_value(const EnvVar &var, const std::string &v) {
  // Empty is unset: `VAR= command` and meson's environment() (which cannot unset) rely on it.
  if (v.empty()) return;
  switch (var.kind) {
    case EnvKind::Flag:
      if (v != "0" && v != "1") refuse(var, v, "0 or 1");
      return;
    case EnvKind::Count: {
      char *end = nullptr;
      errno = 0;
      const long long n = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || errno || *end != '\0' || n < var.lo || n > var.hi)
        refuse(var, v, format("an integer in [%lld, %lld]", var.lo, var.hi));
      return;
    }
    case EnvKind::Choice:
      if (!in_list(v, var.choices)) refuse(var, v, std::string("one of ") + var.choices);
      return;
    case EnvKind::Backends: {
      // Names are checked against the loaded backends when the list is applied; here, its form.
      bool item = false, empty_item = v.empty();
      for (char c : v) {
        if (c == ',') empty_item = empty_item || !item, item = false;
        else if (c != ' ') item = true;
      }
      if (empty_item || !item) refuse(var, v, "a ','-separated list of backend names, none empty");
      return;
    }
    case EnvKind::Text:
      if (v.empty()) refuse(var, v, "a non-empty value");
      return;
    case EnvKind::Paths:
      return;
  }
}

size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min<size_t>({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

void warn_unknown(const std::string &name) {
  std::string best;
  size_t best_d = 4;  // suggest only a near miss
  for (const EnvVar &v : env_vars())
    if (size_t d = edit_distance(name, v.name); d < best_d) best_d = d, best = v.name;
  std::fprintf(stderr, "chutney: warning: environment variable %s is not one chutney reads%s\n", name.c_str(),
               best.empty() ? "" : (" (did you mean " + best + "?)").c_str());
}

}  // namespace

void validate_environment() {
  static std::atomic<bool> warned{false};
  std::vector<std::string> unknown;
  for (char **e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "CHUTNEY_", 8) != 0) continue;
    const char *eq = std::strchr(*e, '=');
    if (!eq) continue;
    const std::string name(*e, static_cast<size_t>(eq - *e)), value(eq + 1);
    const EnvVar *var = nullptr;
    for (const EnvVar &v : env_vars())
      if (name == v.name) var = &v;
    if (var) {
      check_value(*var, value);
      continue;
    }
    bool tool = false;
    for (const char *t : kToolVars) tool = tool || name == t;
    if (!tool) unknown.push_back(name);
  }
  if (!unknown.empty() && !warned.exchange(true))
    for (const std::string &n : unknown) warn_unknown(n);
}

bool env_flag(const char *name) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace ctn
