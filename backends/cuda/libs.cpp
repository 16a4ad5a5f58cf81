// dlopen of the NVIDIA libraries: the driver is only probed (cudart_static loads it itself);
// cuBLAS and cuDNN are reached through function tables so that the plugin has no hard
// dependency on them (`readelf -d ctn-cuda.so` lists libc, libstdc++, libm, libgcc_s only).
#include <dlfcn.h>

#include "cuda_backend.h"

namespace ctn_cuda {
namespace {

void *open_first(const char *const *names, std::string *why) {
  std::string errors;
  for (const char *const *n = names; *n; ++n) {
    if (void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL)) return h;
    const char *e = dlerror();
    if (!errors.empty()) errors += "; ";
    errors += e ? e : *n;
  }
  *why = errors;
  return nullptr;
}

template <class Api>
bool resolve(Api *api, const char *name, void **slot, std::string *why) {
  dlerror();
  void *p = dlsym(api->lib, name);
  if (!p) {
    *why = std::string("missing symbol ") + name;
    return false;
  }
  *slot = p;
  return true;
}

// Resolves api->f into its slot; on failure unloads the table (unload(api)) and returns false.
#define CTN_RESOLVE_OR_UNLOAD(f, unload)                                \
  if (!resolve(api, #f, reinterpret_cast<void **>(&api->f), why)) {     \
    unload(api);                                                        \
    return false;                                                       \
  }

}  // namespace

bool probe_driver(void **handle, std::string *why) {
  static const char *const names[] = {"libcuda.so.1", nullptr};
  *handle = open_first(names, why);
  return *handle != nullptr;
}

bool load_cublas(CublasApi *api, std::string *why) {
  // cuBLAS 13 goes with the CUDA 13 runtime this plugin is built against; libcublas.so.13
  // itself loads libcublasLt.so.13 (preloaded here so a missing Lt gets a clear message).
  // cuBLAS's soname follows the toolkit's major version (the API table above was checked
  // against these headers).
#if CUDART_VERSION >= 13000 && CUDART_VERSION < 14000
  static const char *const lt[] = {"libcublasLt.so.13", nullptr};
  static const char *const names[] = {"libcublas.so.13", nullptr};
#elif CUDART_VERSION >= 12000 && CUDART_VERSION < 13000
  static const char *const lt[] = {"libcublasLt.so.12", nullptr};
  static const char *const names[] = {"libcublas.so.12", nullptr};
#else
#error "the CUDA backend supports CUDA 12 and 13"
#endif
  void *lt_handle = open_first(lt, why);
  if (!lt_handle) return false;
  api->lib = open_first(names, why);
  dlclose(lt_handle);  // libcublas holds its own reference now
  if (!api->lib) return false;
#define CTN_RESOLVE(f) CTN_RESOLVE_OR_UNLOAD(f, unload_cublas)
  CTN_CUBLAS_FUNCS(CTN_RESOLVE)
  CTN_RESOLVE(cublasGemmStridedBatchedEx)
#undef CTN_RESOLVE
  return true;
}

bool load_cudnn(CudnnApi *api, std::string *why) {
  static_assert(CUDNN_MAJOR == 9, "the cuDNN table is written against cuDNN 9");
  static const char *const names[] = {"libcudnn.so.9", nullptr};
  api->lib = open_first(names, why);
  if (!api->lib) return false;
#define CTN_RESOLVE(f) CTN_RESOLVE_OR_UNLOAD(f, unload_cudnn)
  CTN_CUDNN_FUNCS(CTN_RESOLVE)
#undef CTN_RESOLVE
  return true;
}

void unload_cublas(CublasApi *api) {
  if (api->lib) dlclose(api->lib);
  *api = CublasApi{};
}

void unload_cudnn(CudnnApi *api) {
  if (api->lib) dlclose(api->lib);
  *api = CudnnApi{};
}

}  // namespace ctn_cuda
