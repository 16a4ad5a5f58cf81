// The OpenCL program: one source holding every kernel (PoCL and embedded drivers compile
// slowly, so one build serves all ops), built once per device and cached on disk as a binary.
// Cache key: device name, driver version, platform, build options and the source itself, so a
// driver update or a kernel change never loads a stale binary. A corrupt or foreign file fails
// its checksum or clBuildProgram and is rebuilt.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ocl_backend.h"
#include "ocl_sources.h"

namespace ctn_ocl {

uint64_t fnv1a(const void *data, size_t n, uint64_t h) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

const char kBuildOptions[] = "-cl-std=CL1.2";
const char kMagic[8] = {'C', 'T', 'N', 'O', 'C', 'L', '1', '\0'};

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

void mkdirs(const std::string &path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

std::string build_log(const Backend &be, cl_program p) {
  size_t n = 0;
  clGetProgramBuildInfo(p, be.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n) clGetProgramBuildInfo(p, be.device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  if (log.size() > 2000) log = log.substr(0, 2000) + "...";
  return log;
}

// File layout: magic, u64 checksum of the binary, u64 size, the binary.
bool read_cached(const std::string &path, std::vector<unsigned char> *bin) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  char magic[8];
  uint64_t sum = 0, size = 0;
  if (!f.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return false;
  if (!f.read(reinterpret_cast<char *>(&sum), 8) || !f.read(reinterpret_cast<char *>(&size), 8))
    return false;
  if (size == 0 || size > (1ull << 30)) return false;
  bin->resize(size);
  if (!f.read(reinterpret_cast<char *>(bin->data()), static_cast<std::streamsize>(size))) return false;
  return fnv1a(bin->data(), bin->size()) == sum;
}

void write_cached(const Backend &be, const std::string &path, cl_program p) {
  size_t size = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return;
  std::vector<unsigned char> bin(size);
  unsigned char *ptr = bin.data();
  if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
  mkdirs(be.cache_dir);
  // Write then rename: a concurrent reader sees the old file or the whole new one.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    uint64_t sum = fnv1a(bin.data(), bin.size()), sz = size;
    f.write(kMagic, 8);
    f.write(reinterpret_cast<const char *>(&sum), 8);
    f.write(reinterpret_cast<const char *>(&sz), 8);
    f.write(reinterpret_cast<const char *>(bin.data()), static_cast<std::streamsize>(size));
    if (!f) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace

std::string device_key(const Backend &be) {
  std::string k = be.device_name + '\n' + be.driver_version + '\n' + be.platform_name;
  return hex64(fnv1a(k.data(), k.size()));
}

namespace {

// reduce_ops.cl for dtype suffix `sfx`: arithmetic type t (helpers of suffix acc), stored type
// st loaded and stored through ld / store (macro names taking (p, i) and (v, p, i)).
std::string reduce_instance(const char *t, const char *st, const char *sfx, const char *acc,
                            const char *ld, const char *store) {
  return std::string("#define T ") + t + "\n#define S " + st + "\n#define FN(n) n##_" + sfx +
         "\n#define AFN(n) n##_" + acc + "\n#define LD(p, i) " + ld + "\n#define ST(v, p, i) " +
         store + "\n" + kClReduceOps + "#undef T\n#undef S\n#undef FN\n#undef AFN\n#undef LD\n#undef ST\n";
}

}  // namespace

std::string program_source(bool fp64, bool fp16) {
  std::string s;
  s.reserve((sizeof kClFloatOps + sizeof kClNnOps + sizeof kClReduceOps) * 2 + sizeof kClAnyOps +
            sizeof kClHalfOps + sizeof kClReduceOps * 2 + sizeof kClOclEwOps + 1024);
  if (fp64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#define CTN_HAVE_FP64 1\n";
  if (fp16) s += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n#define CTN_HAVE_FP16 1\n";
  s += kClOclEwOps;
  for (const char *t : {"float", "double"}) {
    const bool f64 = t[0] == 'd';
    if (f64 && !fp64) continue;
    const char *sfx = f64 ? "f64" : "f32";
    s += std::string("#define T ") + t + "\n#define FN(n) n##_" + sfx + "\n";
    s += kClFloatOps;
    s += kClNnOps;
    s += "#undef T\n#undef FN\n";
    s += reduce_instance(t, t, sfx, sfx, "(p)[i]", "((p)[i] = (v))");
  }
  s += kClAnyOps;
  s += kClHalfOps;
  // The 16-bit floats: stored as half / ushort, summed in f32 (half_ops.cl's loads and stores).
  s += reduce_instance("float", "half", "f16", "f32", "CTN_LD_f16(p, i)", "CTN_ST_f16(v, p, i)");
  s += reduce_instance("float", "ushort", "bf16", "f32", "CTN_LD_bf16(p, i)", "CTN_ST_bf16(v, p, i)");
  return s;
}

namespace {

// The program for be's current fp64/fp16 choice, from the cache or built.
ctn_status program_get(Backend &be) {
  const std::string src = program_source(be.fp64, be.fp16);
  std::string key = device_key(be) + '\n' + kBuildOptions + '\n' + src;
  const std::string path = be.cache_dir + "/opencl-" + hex64(fnv1a(key.data(), key.size())) + ".bin";
  cl_int e = CL_SUCCESS;
  const bool use_cache = !be.cache_dir.empty() && !ctn_backend_util::env_flag("CHUTNEY_OPENCL_NO_CACHE");
  std::vector<unsigned char> bin;
  if (use_cache && read_cached(path, &bin)) {
    const unsigned char *ptr = bin.data();
    size_t size = bin.size();
    cl_int bin_status = CL_SUCCESS;
    cl_program p = clCreateProgramWithBinary(be.context, 1, &be.device, &size, &ptr, &bin_status, &e);
    if (e == CL_SUCCESS && bin_status == CL_SUCCESS &&
        clBuildProgram(p, 1, &be.device, kBuildOptions, nullptr, nullptr) == CL_SUCCESS) {
      be.program = p;
      be.program_origin = "cache";
    } else if (p) {
      clReleaseProgram(p);
    }
    if (!be.program && be.host->log)
      be.host->log(CTN_LOG_WARN, "opencl", ("ignoring unusable cached program " + path).c_str());
  }
  if (!be.program) {
    const char *text = src.c_str();
    size_t len = src.size();
    cl_program p = clCreateProgramWithSource(be.context, 1, &text, &len, &e);
    if (e != CL_SUCCESS)
      return be.host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: clCreateProgramWithSource: %s",
                                cl_error_name(e));
    e = clBuildProgram(p, 1, &be.device, kBuildOptions, nullptr, nullptr);
    if (e != CL_SUCCESS) {
      std::string log = build_log(be, p);
      clReleaseProgram(p);
      return be.host->set_error(CTN_ERR_UNAVAILABLE,
                                "unavailable: building the kernels for %s failed (%s): %s",
                                be.device_name.c_str(), cl_error_name(e), log.c_str());
    }
    be.program = p;
    be.program_origin = "compiled";
    if (use_cache) write_cached(be, path, p);
  }
  return CTN_OK;
}

}  // namespace

ctn_status program_load(Backend &be) {
  auto t0 = std::chrono::steady_clock::now();
  ctn_status st = program_get(be);
  if (st != CTN_OK && be.fp16) {
    // A driver that reports cl_khr_fp16 but does not compile the native half code: f16 keeps
    // working as storage with f32 arithmetic.
    if (be.host->log)
      be.host->log(CTN_LOG_WARN, "opencl",
                   "the kernels did not build with cl_khr_fp16; f16 runs with f32 arithmetic");
    be.fp16 = false;
    st = program_get(be);
  }
  if (st != CTN_OK) return st;
  be.program_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return CTN_OK;
}

}  // namespace ctn_ocl
