// The CPU backend's descriptor and its backend-level slots. Op kernels live in k_*.cpp.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <new>
#include <utility>

#include "cpu_backend.h"

#include <strings.h>

#ifdef CTN_CPU_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace ctn_cpu {

#ifdef CTN_CPU_HAVE_OPENBLAS
constexpr bool kHaveOpenBLAS = true;
#else
constexpr bool kHaveOpenBLAS = false;
#endif

// OpenBLAS's DYNAMIC_ARCH build falls back to a pre-AVX core on CPUs it does not recognise
// (Debian's 0.3.21 names this stop's "Intel(R) Xeon(R) Processor" VM Prescott): its SSE3 GEMM ran
// at 32 GFLOP/s there against the own AVX-512 GEMM's 118-160 (bench/gemm_bench, 1 thread).
bool openblas_core_is_pre_avx() {
#ifdef CTN_CPU_HAVE_OPENBLAS
  static const bool weak = [] {
    const char *core = openblas_get_corename();
    if (!core) return false;
    for (const char *w : {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai",
                          "coppermine", "northwood", "banias", "opteron", "barcelona", "generic"})
      if (!strcasecmp(core, w)) return true;
    return false;
  }();
  return weak;
#else
  return false;
#endif
}

bool gemm_uses_openblas(const Backend &be) {
  if (!kHaveOpenBLAS) return false;
  switch (be.gemm_mode.load(std::memory_order_relaxed)) {
    case GemmMode::kOwn: return false;
    case GemmMode::kOpenBLAS: return true;
    default: {
      // auto: OpenBLAS, unless it runs a pre-AVX core while the own GEMM has AVX2/AVX-512 kernels
      const char *isa = be.gemm_isa.load()->name;
      const bool own_vector = !std::strcmp(isa, "avx512") || !std::strcmp(isa, "avx2");
      return !(own_vector && openblas_core_is_pre_avx());
    }
  }
}

const char *gemm_active_name(const Backend &be) {
  return gemm_uses_openblas(be) ? "openblas" : "own";
}

// "auto" with oneDNN picks per shape (k_conv.cpp); without it every convolution is the own one.
const char *conv_active_name(const Backend &be) {
  if (!onednn_built_in()) return "own";
  switch (be.conv_mode.load(std::memory_order_relaxed)) {
    case ConvMode::kOneDNN: return "onednn";
    case ConvMode::kOwn: return "own";
    default: return "auto";
  }
}






void kernel_release(void *state) { delete static_cast<KernelBase *>(state); }

void kernel_set(ctn_kernel *kernel, ctn_kernel_fn fn, KernelBase *state, uint32_t flags,
                uint64_t workspace) {
  kernel_fill(kernel, fn, state, kernel_release, flags, workspace);
}

namespace {

void *aligned_bytes(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded ? rounded : 64);
}

// Resizes the pool in place (kernels running on other threads keep a valid pool). A crew that
// cannot be built (thread or memory limits) leaves the pool as it was and says why.
ctn_status set_threads(Backend &be, int n) {
  try {
    be.pool->resize(n);
  } catch (const PoolError &e) {
    return be.host->set_error(CTN_ERR_UNAVAILABLE, "cpu: cannot run %d threads: %s", n, e.what());
  }
  be.num_threads.store(n);
  return CTN_OK;
}

const char *arch_name() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__)
  return "arm";
#else
  return "unknown-arch";
#endif
}

std::string cpu_model() {
  std::FILE *f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "";
  char line[512];
  std::string model;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "model name", 10) == 0) {
      const char *colon = std::strchr(line, ':');
      if (colon) {
        model = colon + 1;
        while (!model.empty() && (model.front() == ' ' || model.front() == '\t'))
          model.erase(model.begin());
        while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
      }
      break;
    }
  }
  std::fclose(f);
  return model;
}

void update_description(Backend &be) {
  std::string d = arch_name();
  std::string model = cpu_model();
  if (!model.empty()) d += " (" + model + ")";
  const int threads = be.num_threads.load();
  d += ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  d += ", GEMM ";
  d += gemm_active_name(be);
#ifdef CTN_CPU_HAVE_OPENBLAS
  if (gemm_uses_openblas(be)) {
    std::string cfg = openblas_get_config();
    while (!cfg.empty() && cfg.back() == ' ') cfg.pop_back();
    d += " (" + cfg + ")";
  } else {
    d += " (" + std::string(be.gemm_isa.load()->name) + ")";
  }
#else
  d += " (" + std::string(be.gemm_isa.load()->name) + ", OpenBLAS not built in)";
#endif
  d += ", conv ";
  d += conv_active_name(be);
  if (onednn_built_in()) d += " (oneDNN " + onednn_version() + ")";
  be.description = d;
}

// The value of an option or environment variable among `names`; false (out untouched) if none.
template <class E>
bool parse_choice(const char *v, std::initializer_list<std::pair<const char *, E>> names, E *out) {
  for (const auto &[name, value] : names)
    if (std::strcmp(v, name) == 0) {
      *out = value;
      return true;
    }
  return false;
}

bool parse_half_matmul(const char *v, HalfMatmul *out) {
  return parse_choice(v,
                      {{"auto", HalfMatmul::kAuto}, {"convert", HalfMatmul::kConvert}, {"own", HalfMatmul::kOwn},
                       {"onednn", HalfMatmul::kOneDNN}},
                      out);
}

bool parse_pool_mode(const char *v, ThreadPool::Mode *out) {
  return parse_choice(
      v, {{"shared", ThreadPool::Mode::kShared}, {"per_caller", ThreadPool::Mode::kPerCaller}}, out);
}

bool parse_conv_mode(const char *v, ConvMode *out) {
  return parse_choice(
      v, {{"auto", ConvMode::kAuto}, {"onednn", ConvMode::kOneDNN}, {"own", ConvMode::kOwn}}, out);
}

bool parse_gemm_mode(const char *v, GemmMode *out) {
  return parse_choice(
      v, {{"auto", GemmMode::kAuto}, {"openblas", GemmMode::kOpenBLAS}, {"own", GemmMode::kOwn}},
      out);
}

bool have_openblas() { return kHaveOpenBLAS; }

// The plugin's mode options (ctn_context_set_option), each also read from an environment
// variable at init: its choices, and the mode that needs a library this build may lack.
template <class Mode>
struct ModeOption {
  const char *key, *env, *choices;
  bool (*parse)(const char *, Mode *);
  Mode needs;             // the mode that needs `library`
  bool (*built)();        // whether this build has it
  const char *library;
  std::atomic<Mode> Backend::*field;
};

const ModeOption<GemmMode> kGemmOption{"gemm", "CHUTNEY_CPU_GEMM", "'openblas', 'own' or 'auto'", parse_gemm_mode,
                                       GemmMode::kOpenBLAS, have_openblas, "OpenBLAS", &Backend::gemm_mode};
const ModeOption<ConvMode> kConvOption{"conv", "CHUTNEY_CPU_CONV", "'onednn', 'own' or 'auto'", parse_conv_mode,
                                       ConvMode::kOneDNN, onednn_built_in,
                                       "oneDNN (libdnnl-dev; meson option cpu_onednn)", &Backend::conv_mode};
const ModeOption<HalfMatmul> kHalfMatmulOption{
    "half_matmul", "CHUTNEY_CPU_HALF_MATMUL", "'auto', 'convert', 'own' or 'onednn'", parse_half_matmul,
    HalfMatmul::kOneDNN, onednn_built_in, "oneDNN (libdnnl-dev; meson option cpu_onednn)", &Backend::half_matmul};

// ctn_context_set_option of a mode option: an unknown choice, or one this build cannot run, is
// refused and changes nothing.
template <class Mode>
ctn_status set_mode_option(const ctn_host_api *host, Backend &be, const ModeOption<Mode> &o, const char *value) {
  Mode mode{};
  if (!o.parse(value, &mode))
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu: %s must be %s, got '%s'", o.key, o.choices, value);
  if (mode == o.needs && !o.built())
    return host->set_error(CTN_ERR_UNAVAILABLE, "cpu: %s '%s' requested but this build has no %s", o.key, value,
                           o.library);
  (be.*o.field) = mode;
  return CTN_OK;
}

// The environment variable of a mode option at init: never an error (a warning, then auto, or
// the kernels' own fallback where the library is missing).
template <class Mode>
void env_mode_option(const ctn_host_api *host, Backend &be, const ModeOption<Mode> &o) {
  const char *env = std::getenv(o.env);
  if (!env || !*env) return;
  Mode mode{};
  char msg[256];
  if (!o.parse(env, &mode)) {
    std::snprintf(msg, sizeof msg, "%s must be %s; using auto", o.env, o.choices);
    if (host->log) host->log(CTN_LOG_WARN, "cpu", msg);
    return;
  }
  if (mode == o.needs && !o.built() && host->log) {
    std::snprintf(msg, sizeof msg, "%s=%s but this build has no %s; the kernels fall back", o.env, env, o.library);
    host->log(CTN_LOG_WARN, "cpu", msg);
  }
  (be.*o.field) = mode;
}

ctn_status cpu_init(const ctn_host_api *host, const ctn_backend_config *config,
                    void **out_state) {
  return ctn_backend_util::guarded_init(host, "cpu", config, out_state, [&]() -> ctn_status {
    if (config->struct_size < sizeof(uint32_t) + sizeof(int32_t) || config->num_threads < 1 ||
        config->num_threads > 1024)
      return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                             "cpu init: num_threads must be in [1, 1024] (got %d)",
                             static_cast<int>(config->num_threads));
    auto be = std::make_unique<Backend>();
    be->host = host;
    onednn_pin_libraries();
    be->gemm_isa = gemm_isa_select(nullptr);
    // CHUTNEY_CPU_ISA forces a kernel variant: "generic" is the scalar path on 32-bit ARM (tests
    // run the conformance suite on it), "neon"/"avx2"/"avx512" a vector one the CPU must have.
    if (const char *isa = std::getenv("CHUTNEY_CPU_ISA"); isa && *isa) {
      onednn_limit_isa(isa);
      if (const GemmIsa *v = gemm_isa_select(isa)) be->gemm_isa = v;
      else if (host->log)
        host->log(CTN_LOG_WARN, "cpu", "CHUTNEY_CPU_ISA names a variant this CPU lacks; using auto");
    }
    env_mode_option(host, *be, kGemmOption);
    env_mode_option(host, *be, kConvOption);
    env_mode_option(host, *be, kHalfMatmulOption);
    // Pool workers get their GEMM packing scratch when they start (a crew whose workers cannot
    // have it is not built).
    be->pool = std::make_unique<ThreadPool>(gemm_worker_init, gemm_worker_fini);
    if (ctn_status st = set_threads(*be, config->num_threads); st != CTN_OK) return st;
#ifdef CTN_CPU_HAVE_OPENBLAS
    // OpenBLAS on one thread: its workers spin (sched_yield) for a long while after every call
    // and stole the cores from the pool's next kernel; the pool splits BLAS calls itself
    // (k_matmul.cpp) and convolutions call it per image from each participant.
    openblas_set_num_threads(1);
#endif
    update_description(*be);
    *out_state = be.release();
    return CTN_OK;
  });
}

void cpu_shutdown(void *state) {
  auto *be = static_cast<Backend *>(state);
  if (!be) return;
  try {
    be->pool.reset();  // joins the workers
  } catch (...) {
  }
  delete be;
}

ctn_status cpu_buffer_alloc(void *state, uint64_t bytes, void **out_handle) {
  auto *be = static_cast<Backend *>(state);
  if (!out_handle) return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu: NULL out_handle");
  // PTRDIFF_MAX is the largest object a 32-bit build (armhf) can have: refuse, never truncate.
  if (bytes > (UINT64_C(1) << 48) || bytes > static_cast<uint64_t>(PTRDIFF_MAX))
    return be->host->set_error(CTN_ERR_OUT_OF_MEMORY,
                               "cpu: cannot allocate %" PRIu64 " bytes: more than one buffer can "
                               "hold in this %d-bit build",
                               bytes, static_cast<int>(8 * sizeof(void *)));
  void *p = aligned_bytes(static_cast<size_t>(bytes));
  if (!p)
    return be->host->set_error(CTN_ERR_OUT_OF_MEMORY, "cpu: cannot allocate %" PRIu64 " bytes",
                               bytes);
  *out_handle = p;
  return CTN_OK;
}

}  // namespace

ctn_status make_native_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out) {
  bool handled = false;
  for (KernelMaker *m : {make_elementwise_kernel, make_reduce_kernel, make_shape_kernel,
                         make_matmul_kernel, make_optim_kernel, make_conv_kernel, make_pool_kernel,
                         make_norm_kernel, make_nn_misc_kernel, make_quant_kernel}) {
    ctn_status st = m(be, sig, out, &handled);
    if (handled) return st;
  }
  return be->host->set_error(CTN_ERR_UNSUPPORTED, "cpu backend: unknown op '%s'", sig->op);
}

namespace {

void cpu_buffer_free(void *, void *handle) { std::free(handle); }

ctn_status cpu_upload(void *state, void *handle, uint64_t offset, const void *src,
                      uint64_t bytes) {
  if (!handle || (!src && bytes))
    return static_cast<Backend *>(state)->host->set_error(CTN_ERR_INVALID_ARGUMENT,
                                                          "cpu upload: NULL pointer");
  if (bytes) std::memcpy(static_cast<char *>(handle) + offset, src, bytes);
  return CTN_OK;
}

ctn_status cpu_download(void *state, void *handle, uint64_t offset, void *dst,
                        uint64_t bytes) {
  if (!handle || (!dst && bytes))
    return static_cast<Backend *>(state)->host->set_error(CTN_ERR_INVALID_ARGUMENT,
                                                          "cpu download: NULL pointer");
  if (bytes) std::memcpy(dst, static_cast<const char *>(handle) + offset, bytes);
  return CTN_OK;
}

// Every op family's maker in turn (make_native_kernel) for f32, f64 and integer signatures.
ctn_status native_maker(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  *handled = true;
  return make_native_kernel(be, sig, out);
}

bool all_bf16(const ctn_op_signature *sig) {
  for (uint32_t i = 0; i < sig->n_inputs; ++i)
    if (sig->inputs[i].dtype != CTN_BF16) return false;
  return sig->output->dtype == CTN_BF16;
}

bool is_conv_op(const char *op) {
  for (const char *c : {CTN_OP_CONV2D, CTN_OP_CONV2D_BIAS_ACT, CTN_OP_CONV2D_GRAD_INPUT, CTN_OP_CONV2D_GRAD_WEIGHT,
                        CTN_OP_CONV_TRANSPOSE2D})
    if (!std::strcmp(op, c)) return true;
  return false;
}

// 16-bit floats: the elementwise and shape families have kernels of their own (loads and stores
// convert, the arithmetic is f32's); a matmul may run oneDNN's 16-bit kernel (16-bit dot
// products, f32 sums) when the option asks for it; every other op runs as its f32 kernel
// between conversions (k_widen.cpp). With half_matmul=own, where the CPU has AVX512_BF16
// (bf16_gemm_for), all-bf16 matmuls run on the own bf16 GEMM straight from their bf16 operands
// (k_matmul_bf16.cpp) and all-bf16 convolutions' GEMMs run in bf16 inside the conversions.
ctn_status half_maker(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  if (!sig_has_half(sig)) return CTN_OK;
  for (KernelMaker *m : {make_elementwise_kernel, make_shape_kernel}) {
    ctn_status st = m(be, sig, out, handled);
    if (*handled) return st;
  }
  *handled = true;
  std::string why;
  const HalfMatmul mode = be->half_matmul.load();
  if (mode == HalfMatmul::kOneDNN && make_onednn_matmul_half(be, sig, out, &why)) return CTN_OK;
  const bool bf16 = mode == HalfMatmul::kOwn && all_bf16(sig) && bf16_gemm_for(*be);
  if (bf16 && is_conv_op(sig->op)) return make_widened_kernel(be, sig, out, make_conv_kernel_bf16);
  // The widened kernel's maker validates the signature, also for the bf16 matmul that replaces it.
  const ctn_status st = make_widened_kernel(be, sig, out);
  ctn_kernel native{};
  if (st == CTN_OK && bf16 && make_bf16_matmul(be, sig, &native)) {
    if (out->release) out->release(out->state);
    *out = native;
  }
  return st;
}

ctn_status cpu_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  return ctn_backend_util::get_kernel_by_makers(
      static_cast<Backend *>(state), "cpu", sig, out, /*reduced_dtypes=*/true, [] { return CTN_OK; },
      {half_maker, native_maker});
}

ctn_status cpu_set_option(void *state, const char *key, const char *value) {
  auto *be = static_cast<Backend *>(state);
  const ctn_host_api *host = be->host;
  return ctn_backend_util::guarded_set_option(host, "cpu", key, value, [&]() -> ctn_status {
    std::lock_guard<std::mutex> lock(be->option_mu);
    if (std::strcmp(key, "num_threads") == 0) {
      char *end = nullptr;
      errno = 0;
      long n = std::strtol(value, &end, 10);
      if (errno || end == value || *end != '\0' || n < 1 || n > 1024)
        return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "cpu: num_threads must be an integer in [1, 1024], got '%s'",
                               value);
      // On failure the pool keeps its size: a failed call changes nothing.
      if (n != be->num_threads.load())
        if (ctn_status st = set_threads(*be, static_cast<int>(n)); st != CTN_OK) return st;
    } else if (std::strcmp(key, "pool") == 0) {
      ThreadPool::Mode mode;
      if (!parse_pool_mode(value, &mode))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "cpu: pool must be 'shared' or 'per_caller', got '%s'", value);
      try {
        be->pool->set_mode(mode);
      } catch (const PoolError &e) {
        return host->set_error(CTN_ERR_UNAVAILABLE, "cpu: pool %s: %s", value, e.what());
      }
    } else if (std::strcmp(key, "gemm") == 0) {
      if (ctn_status st = set_mode_option(host, *be, kGemmOption, value); st != CTN_OK) return st;
    } else if (std::strcmp(key, "conv") == 0) {
      if (ctn_status st = set_mode_option(host, *be, kConvOption, value); st != CTN_OK) return st;
    } else if (std::strcmp(key, "half_matmul") == 0) {
      if (ctn_status st = set_mode_option(host, *be, kHalfMatmulOption, value); st != CTN_OK) return st;
    } else if (std::strcmp(key, "gemm_isa") == 0) {
      const GemmIsa *isa = gemm_isa_select(value);
      if (!isa)
        return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "cpu: gemm_isa '%s' is unknown or not supported by this CPU "
                               "(auto, avx512, avx2, neon, generic)",
                               value);
      be->gemm_isa = isa;
    } else {
      return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                             "cpu: unknown option '%s' (num_threads, pool, gemm, gemm_isa, conv, half_matmul)",
                             key);
    }
    update_description(*be);
    return CTN_OK;
  });
}

const char *proc_gemm_name(void *state) {
  return gemm_active_name(*static_cast<Backend *>(state));
}
const char *proc_conv_name(void *state) {
  return conv_active_name(*static_cast<Backend *>(state));
}
uint64_t proc_onednn_kernels(void *state) {
  return static_cast<Backend *>(state)->onednn_kernels.load();
}
const char *proc_gemm_isa(void *state) { return static_cast<Backend *>(state)->gemm_isa.load()->name; }
int proc_num_threads(void *state) { return static_cast<Backend *>(state)->num_threads.load(); }

CTN_GET_PROC_ADDRESS(cpu_get_proc_address, ctn_backend_util::no_proc,
    CTN_PROC_ENTRY("ctn_cpu_gemm_name", proc_gemm_name),
    CTN_PROC_ENTRY("ctn_cpu_gemm_isa", proc_gemm_isa),
    CTN_PROC_ENTRY("ctn_cpu_num_threads", proc_num_threads),
    CTN_PROC_ENTRY("ctn_cpu_conv_name", proc_conv_name),
    CTN_PROC_ENTRY("ctn_cpu_onednn_kernels", proc_onednn_kernels))

// Constant-initialised: no code runs when the plugin is loaded.
// Concurrent: the pool serves any number of callers, kernel states are read-only, scratch belongs
// to the thread that uses it, and options are atomics behind option_mu. No synchronize and no 1.1
// plan segments: kernels run synchronously on the calling thread, so recording the plan would gain
// nothing over the host calling each kernel.
constexpr ctn_backend_desc kDesc =
    CTN_BACKEND_DESC("cpu", CTN_BACKEND_HOST_MEMORY | CTN_BACKEND_CONCURRENT, cpu, nullptr, nullptr, nullptr, nullptr);

}  // namespace
}  // namespace ctn_cpu

CTN_BACKEND_PLUGIN_QUERY(ctn_cpu::kDesc)
