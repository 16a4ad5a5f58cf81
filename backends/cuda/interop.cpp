// since 1.2: the "ctn_cuda_interop" extra (abi/chutney/cuda.h): the device, its primary
// context, the backend's stream and the driver API of the libcuda the backend opened, for op
// libraries that launch their own kernels. Their launches on the stream are captured into the
// plan segments' CUDA graphs like the backend's own (plugin.cpp, cuda_plan_prepare).
#include <chutney/cuda.h>

#include <dlfcn.h>

#include <cstring>

#include "cuda_backend.h"

namespace ctn_cuda {
namespace {

ctn_cuda_fn driver_function(void *state, const char *name) {
  const auto *be = static_cast<const Backend *>(state);
  if (!be || !be->driver || !name) return nullptr;
  void *p = dlsym(be->driver, name);
  ctn_cuda_fn f = nullptr;
  static_assert(sizeof f == sizeof p, "function and object pointers differ in size");
  std::memcpy(&f, &p, sizeof f);
  return f;
}

ctn_status fill_interop(void *state, ctn_cuda_interop *out) {
  return ctn_backend_util::interop_answer(
      state, out, CTN_CUDA_INTEROP_VERSION, [&](ctn_cuda_interop &io) -> ctn_status {
    auto *be = static_cast<Backend *>(state);
    // The primary context, current after cudaSetDevice + a runtime call (cudaFree(0) makes it so).
    using CtxGetCurrent = int (*)(void **);
    void *sym = be->driver ? dlsym(be->driver, "cuCtxGetCurrent") : nullptr;
    void *ctx = nullptr;
    if (!sym || cudaSetDevice(be->device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess)
      return be->host->set_error(CTN_ERR_INTERNAL, "cuda interop: cannot make the device's context current");
    CtxGetCurrent get = nullptr;
    std::memcpy(&get, &sym, sizeof get);
    if (get(&ctx) != 0 || !ctx) return be->host->set_error(CTN_ERR_INTERNAL, "cuda interop: cuCtxGetCurrent failed");
    io.device = be->device;
    io.compute_capability = be->prop.major * 10 + be->prop.minor;
    io.context = ctx;
    io.stream = be->stream;
    io.get_driver_function = driver_function;
    return CTN_OK;
  });
}

}  // namespace

void *interop_proc(const char *name) {
  return ctn_backend_util::interop_proc_entry(name, CTN_CUDA_INTEROP_PROC,
                                              static_cast<ctn_cuda_interop_fn>(fill_interop));
}

}  // namespace ctn_cuda
