// The CUDA backend's descriptor and its backend-level slots: init (driver probe, device, stream,
// libraries), memory, transfers through pinned staging, options, and plan segments recorded as
// CUDA graphs. Op kernels live in ops_*.cpp (host side) and k_*.cu (device side).
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "cuda_backend.h"

namespace ctn_cuda {





void kernel_release(void *state) { delete static_cast<KernelBase *>(state); }

void kernel_set(ctn_kernel *kernel, ctn_kernel_fn fn, KernelBase *state, uint32_t flags,
                uint64_t workspace) {
  kernel_fill(kernel, fn, state, kernel_release, flags, workspace);
}

ctn_status cuda_fail(Backend *be, cudaError_t e, const char *what) {
  ctn_status code = e == cudaErrorMemoryAllocation ? CTN_ERR_OUT_OF_MEMORY : CTN_ERR_INTERNAL;
  return be->host->set_error(code, "cuda: %s: %s (%s)", what, cudaGetErrorString(e),
                             cudaGetErrorName(e));
}

ctn_status cublas_fail(Backend *be, cublasStatus_t s, const char *what) {
  const char *msg = be->cublas.cublasGetStatusString ? be->cublas.cublasGetStatusString(s) : "?";
  return be->host->set_error(s == CUBLAS_STATUS_ALLOC_FAILED ? CTN_ERR_OUT_OF_MEMORY
                                                             : CTN_ERR_INTERNAL,
                             "cuda: %s: cuBLAS %s", what, msg);
}

ctn_status cudnn_fail(Backend *be, cudnnStatus_t s, const char *what) {
  const char *msg = be->cudnn.cudnnGetErrorString ? be->cudnn.cudnnGetErrorString(s) : "?";
  return be->host->set_error(s == CUDNN_STATUS_ALLOC_FAILED ? CTN_ERR_OUT_OF_MEMORY
                                                            : CTN_ERR_INTERNAL,
                             "cuda: %s: cuDNN %s", what, msg);
}

ctn_status check_launch(Backend *be, const char *op) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return cuda_fail(be, e, op);
  return CTN_OK;
}

namespace {

constexpr size_t kPinnedBytes = size_t(8) << 20;
constexpr size_t kBlasWorkspace = size_t(32) << 20;  // NVIDIA's advice for Hopper

// A recorded plan segment: the CUDA graph of its kernel calls, or (when capture is off or
// failed) the calls themselves, replayed one by one.
struct Segment {
  std::vector<ctn_plan_call> calls;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

void release_resources(Backend &be) {
  if (be.dnn) be.cudnn.cudnnDestroy(be.dnn);
  if (be.blas) be.cublas.cublasDestroy_v2(be.blas);
  if (be.blas_workspace) cudaFree(be.blas_workspace);
  if (be.pinned) cudaFreeHost(be.pinned);
  if (be.err_host) cudaFreeHost(be.err_host);
  if (be.stream) cudaStreamDestroy(be.stream);
  unload_cudnn(&be.cudnn);
  unload_cublas(&be.cublas);
  be.dnn = nullptr;
  be.blas = nullptr;
  be.blas_workspace = be.pinned = nullptr;
  be.err_host = be.err_dev = nullptr;
  be.stream = nullptr;
}

void update_description(Backend &be) {
  char buf[512];
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB, %d SMs), driver %d.%d, runtime %d.%d",
                be.prop.name, be.prop.major, be.prop.minor,
                static_cast<double>(be.prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                be.prop.multiProcessorCount, drv / 1000, (drv % 1000) / 10, rt / 1000,
                (rt % 1000) / 10);
  std::string d = buf;
  if (be.have_cublas) {
    int v = 0;
    be.cublas.cublasGetVersion_v2(be.blas, &v);
    d += ", cuBLAS " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100);
    d += be.tf32 ? " (TF32 on)" : " (TF32 off)";
  } else {
    d += ", no cuBLAS (" + be.cublas_why + ")";
  }
  if (be.have_cudnn) {
    size_t v = be.cudnn.cudnnGetVersion();
    d += ", cuDNN " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100);
  } else {
    d += ", no cuDNN (" + be.cudnn_why + ")";
  }
  d += be.graphs ? ", CUDA graphs" : ", no CUDA graphs";
  be.description = d;
}

ctn_status init_impl(const ctn_host_api *host, void **out_state) {
  auto be = std::make_unique<Backend>();
  be->host = host;
  std::string why;
  // Probe the driver before the runtime: cudart_static would only report "insufficient
  // driver", which hides the actual cause.
  if (!probe_driver(&be->driver, &why))
    return host->set_error(CTN_ERR_UNAVAILABLE,
                           "unavailable: NVIDIA driver (libcuda.so.1) not found (%s)", why.c_str());
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: %s (cudaGetDeviceCount: %s)",
                           cudaGetErrorString(e), cudaGetErrorName(e));
  }
  if (count < 1) return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: no CUDA device");
  if (const char *env = std::getenv("CHUTNEY_CUDA_DEVICE"); env && *env) {
    char *end = nullptr;
    long d = std::strtol(env, &end, 10);
    if (*end != '\0' || d < 0 || d >= count)
      return host->set_error(CTN_ERR_UNAVAILABLE,
                             "unavailable: CHUTNEY_CUDA_DEVICE='%s' is not a device index in [0, %d)",
                             env, count);
    be->device = static_cast<int>(d);
  }
  if ((e = cudaSetDevice(be->device)) != cudaSuccess ||
      (e = cudaGetDeviceProperties(&be->prop, be->device)) != cudaSuccess)
    return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: device %d: %s", be->device,
                           cudaGetErrorString(e));
  // The fatbinary holds sm_80 and sm_90 code plus compute_90 PTX: older GPUs cannot run it.
  if (be->prop.major < 8)
    return host->set_error(CTN_ERR_UNAVAILABLE,
                           "unavailable: %s has compute capability %d.%d; this build needs 8.0 or "
                           "newer (sm_80, sm_90, PTX 9.0)",
                           be->prop.name, be->prop.major, be->prop.minor);
  auto fail = [&](cudaError_t err, const char *what) {
    release_resources(*be);
    return host->set_error(err == cudaErrorMemoryAllocation ? CTN_ERR_OUT_OF_MEMORY
                                                            : CTN_ERR_UNAVAILABLE,
                           "unavailable: %s: %s", what, cudaGetErrorString(err));
  };
  if ((e = cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking)) != cudaSuccess)
    return fail(e, "cudaStreamCreate");
  if ((e = cudaHostAlloc(reinterpret_cast<void **>(&be->err_host), sizeof(int),
                         cudaHostAllocMapped)) != cudaSuccess)
    return fail(e, "cudaHostAlloc (error word)");
  *be->err_host = 0;
  if ((e = cudaHostGetDevicePointer(reinterpret_cast<void **>(&be->err_dev), be->err_host, 0)) !=
      cudaSuccess)
    return fail(e, "cudaHostGetDevicePointer");
  if ((e = cudaHostAlloc(&be->pinned, kPinnedBytes, cudaHostAllocDefault)) != cudaSuccess)
    return fail(e, "cudaHostAlloc (staging)");
  be->pinned_bytes = kPinnedBytes;

  // Libraries: a missing one only takes its ops away (they fall to the next backend).
  if (load_cublas(&be->cublas, &be->cublas_why)) {
    cublasStatus_t bs = be->cublas.cublasCreate_v2(&be->blas);
    if (bs == CUBLAS_STATUS_SUCCESS && (e = cudaMalloc(&be->blas_workspace, kBlasWorkspace)) == cudaSuccess &&
        be->cublas.cublasSetStream_v2(be->blas, be->stream) == CUBLAS_STATUS_SUCCESS &&
        be->cublas.cublasSetWorkspace_v2(be->blas, be->blas_workspace, kBlasWorkspace) ==
            CUBLAS_STATUS_SUCCESS) {
      be->have_cublas = true;
    } else {
      be->cublas_why = std::string("cublasCreate/setup failed: ") + be->cublas.cublasGetStatusString(bs);
    }
  }
  if (load_cudnn(&be->cudnn, &be->cudnn_why)) {
    cudnnStatus_t ds = be->cudnn.cudnnCreate(&be->dnn);
    if (ds == CUDNN_STATUS_SUCCESS && be->cudnn.cudnnSetStream(be->dnn, be->stream) == CUDNN_STATUS_SUCCESS)
      be->have_cudnn = true;
    else
      be->cudnn_why = std::string("cudnnCreate failed: ") + be->cudnn.cudnnGetErrorString(ds);
  }
  if (const char *env = std::getenv("CHUTNEY_CUDA_GRAPHS"); env && std::strcmp(env, "0") == 0)
    be->graphs = false;
  update_description(*be);
  *out_state = be.release();
  return CTN_OK;
}

ctn_status cuda_init(const ctn_host_api *host, const ctn_backend_config *config,
                     void **out_state) {
  return ctn_backend_util::guarded_init(host, "cuda", config, out_state, [&]() -> ctn_status {
    return init_impl(host, out_state);
  });
}

void cuda_shutdown(void *state) {
  auto *be = static_cast<Backend *>(state);
  if (!be) return;
  cudaSetDevice(be->device);
  if (be->stream) cudaStreamSynchronize(be->stream);
  release_resources(*be);
  // The driver handle stays open: cudart_static keeps using libcuda until the process exits.
  delete be;
}

ctn_status cuda_buffer_alloc(void *state, uint64_t bytes, void **out_handle) {
  auto *be = static_cast<Backend *>(state);
  if (!out_handle) return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cuda: NULL out_handle");
  cudaSetDevice(be->device);
  void *p = nullptr;
  // cudaMalloc aligns to 256 bytes; a zero-byte request still gets a distinct handle.
  cudaError_t e = cudaMalloc(&p, bytes ? static_cast<size_t>(bytes) : 256);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return be->host->set_error(CTN_ERR_OUT_OF_MEMORY,
                               "cuda: cannot allocate %" PRIu64 " bytes of device memory: %s",
                               bytes, cudaGetErrorString(e));
  }
  *out_handle = p;
  return CTN_OK;
}

void cuda_buffer_free(void *state, void *handle) {
  if (!handle) return;
  auto *be = static_cast<Backend *>(state);
  cudaSetDevice(be->device);
  cudaFree(handle);
}

// Pageable host memory goes through the pinned staging buffer in chunks: the copy engine then
// runs at full speed and the stream order with the kernels is kept.
ctn_status cuda_upload(void *state, void *handle, uint64_t offset, const void *src,
                       uint64_t bytes) {
  auto *be = static_cast<Backend *>(state);
  if (!handle || (!src && bytes))
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cuda upload: NULL pointer");
  cudaSetDevice(be->device);
  char *dst = static_cast<char *>(handle) + offset;
  const char *s = static_cast<const char *>(src);
  for (uint64_t done = 0; done < bytes;) {
    size_t len = static_cast<size_t>(std::min<uint64_t>(bytes - done, be->pinned_bytes));
    std::memcpy(be->pinned, s + done, len);
    cudaError_t e = cudaMemcpyAsync(dst + done, be->pinned, len, cudaMemcpyHostToDevice, be->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess) return cuda_fail(be, e, "upload");
    done += len;
  }
  return CTN_OK;
}

ctn_status cuda_download(void *state, void *handle, uint64_t offset, void *dst,
                         uint64_t bytes) {
  auto *be = static_cast<Backend *>(state);
  if (!handle || (!dst && bytes))
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cuda download: NULL pointer");
  cudaSetDevice(be->device);
  const char *src = static_cast<const char *>(handle) + offset;
  char *d = static_cast<char *>(dst);
  for (uint64_t done = 0; done < bytes;) {
    size_t len = static_cast<size_t>(std::min<uint64_t>(bytes - done, be->pinned_bytes));
    cudaError_t e = cudaMemcpyAsync(be->pinned, src + done, len, cudaMemcpyDeviceToHost, be->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess) return cuda_fail(be, e, "download");
    std::memcpy(d + done, be->pinned, len);
    done += len;
  }
  return CTN_OK;
}

ctn_status cuda_synchronize(void *state) {
  auto *be = static_cast<Backend *>(state);
  cudaSetDevice(be->device);
  cudaError_t e = cudaStreamSynchronize(be->stream);
  if (e != cudaSuccess) return cuda_fail(be, e, "synchronize");
  int code = __atomic_exchange_n(be->err_host, 0, __ATOMIC_SEQ_CST);
  if (code == kDevErrNone) return CTN_OK;
  // What a device error code (DeviceError) reports, indexed by the code.
  static const struct {
    ctn_status status;
    const char *message;
  } kReports[] = {
      {CTN_OK, nullptr},  // kDevErrNone
      {CTN_ERR_INVALID_ARGUMENT, "cuda cross_entropy: a label is outside [0, C)"},
      {CTN_ERR_INVALID_ARGUMENT, "cuda embedding: an id is outside [0, V)"},
      {CTN_ERR_INVALID_ARGUMENT, "cuda adam_apply: step must be >= 1 (the first update is step 1)"},
      {CTN_ERR_INTERNAL, "cuda: an elementwise kernel got an op code it has no case for"},
  };
  static_assert(sizeof kReports / sizeof kReports[0] == kDevErrOpCode + 1,
                "one report per device error code");
  if (code > kDevErrNone && code <= kDevErrOpCode)
    return be->host->set_error(kReports[code].status, "%s", kReports[code].message);
  return be->host->set_error(CTN_ERR_INTERNAL, "cuda: device error code %d", code);
}

ctn_status cuda_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  auto *be = static_cast<Backend *>(state);
  return ctn_backend_util::get_kernel_by_makers(
      be, "cuda", sig, out, false, [be] {
        cudaSetDevice(be->device);  // the calling thread may have another device current
        return CTN_OK;
      },
      {make_elementwise_kernel, make_reduce_kernel, make_shape_kernel, make_matmul_kernel, make_dnn_kernel,
       make_train_kernel});
}

bool parse_bool(const char *v, bool *out) {
  if (!std::strcmp(v, "1") || !std::strcmp(v, "true") || !std::strcmp(v, "on")) *out = true;
  else if (!std::strcmp(v, "0") || !std::strcmp(v, "false") || !std::strcmp(v, "off")) *out = false;
  else return false;
  return true;
}

ctn_status cuda_set_option(void *state, const char *key, const char *value) {
  auto *be = static_cast<Backend *>(state);
  const ctn_host_api *host = be->host;
  return ctn_backend_util::guarded_set_option(host, "cuda", key, value, [&]() -> ctn_status {
    if (!std::strcmp(key, "placement")) {
      if (!std::strcmp(value, "always")) be->placement = Placement::kAlways;
      else if (!std::strcmp(value, "auto")) be->placement = Placement::kAuto;
      else
        return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "cuda: placement must be 'always' or 'auto', got '%s'", value);
    } else if (!std::strcmp(key, "tf32")) {
      if (!parse_bool(value, &be->tf32))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cuda: tf32 must be 0 or 1, got '%s'", value);
    } else if (!std::strcmp(key, "graphs")) {
      if (!parse_bool(value, &be->graphs))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cuda: graphs must be 0 or 1, got '%s'", value);
    } else {
      return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                             "cuda: unknown option '%s' (placement, tf32, graphs)", key);
    }
    update_description(*be);
    return CTN_OK;
  });
}

void *proc_stream(void *state) { return static_cast<Backend *>(state)->stream; }
int proc_device(void *state) { return static_cast<Backend *>(state)->device; }

CTN_GET_PROC_ADDRESS(cuda_get_proc_address, interop_proc,
    CTN_PROC_ENTRY("ctn_cuda_stream", proc_stream),
    CTN_PROC_ENTRY("ctn_cuda_device", proc_device))

// ---- plan segments: capture once, replay with one cudaGraphLaunch per run ---------------------
ctn_status run_calls(const std::vector<ctn_plan_call> &calls) {
  for (const ctn_plan_call &c : calls)
    if (ctn_status st = c.kernel->fn(c.kernel->state, c.args); st != CTN_OK) return st;
  return CTN_OK;
}

ctn_status cuda_plan_prepare(void *state, uint32_t n_calls, const ctn_plan_call *calls,
                             void **out_segment) {
  auto *be = static_cast<Backend *>(state);
  return ctn_backend_util::guarded(be->host, "cuda plan_prepare", [&]() -> ctn_status {
    if (!out_segment || (n_calls && !calls))
      return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cuda plan_prepare: NULL argument");
    cudaSetDevice(be->device);
    auto seg = std::make_unique<Segment>();
    seg->calls.assign(calls, calls + n_calls);
    if (be->graphs && n_calls) {
      cudaError_t e = cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeThreadLocal);
      if (e != cudaSuccess) return cuda_fail(be, e, "cudaStreamBeginCapture");
      ctn_status st = run_calls(seg->calls);
      cudaGraph_t graph = nullptr;
      e = cudaStreamEndCapture(be->stream, &graph);
      if (st != CTN_OK) {
        if (graph) cudaGraphDestroy(graph);
        return st;
      }
      if (e == cudaSuccess) e = cudaGraphInstantiate(&seg->exec, graph, 0);
      if (e != cudaSuccess) {
        // Something in the segment cannot be captured: replay the calls one by one instead.
        cudaGetLastError();
        if (graph) cudaGraphDestroy(graph);
        seg->exec = nullptr;
        if (be->host->log) {
          std::string m = std::string("CUDA graph capture failed (") + cudaGetErrorString(e) +
                          "); this segment runs kernel by kernel";
          be->host->log(CTN_LOG_WARN, "cuda", m.c_str());
        }
      } else {
        seg->graph = graph;
      }
    }
    *out_segment = seg.release();
    return CTN_OK;
  });
}

ctn_status cuda_plan_run(void *state, void *segment) {
  auto *be = static_cast<Backend *>(state);
  auto *seg = static_cast<Segment *>(segment);
  cudaSetDevice(be->device);
  if (!seg->exec) return run_calls(seg->calls);
  cudaError_t e = cudaGraphLaunch(seg->exec, be->stream);
  if (e != cudaSuccess) return cuda_fail(be, e, "cudaGraphLaunch");
  return CTN_OK;
}

void cuda_plan_release(void *state, void *segment) {
  auto *seg = static_cast<Segment *>(segment);
  if (!seg) return;
  cudaSetDevice(static_cast<Backend *>(state)->device);
  if (seg->exec) cudaGraphExecDestroy(seg->exec);
  if (seg->graph) cudaGraphDestroy(seg->graph);
  delete seg;
}

// Constant-initialised: nothing runs when the plugin is loaded.
constexpr ctn_backend_desc kDesc = CTN_BACKEND_DESC("cuda", 0, cuda, cuda_synchronize, cuda_plan_prepare,
                                                    cuda_plan_run, cuda_plan_release);

}  // namespace
}  // namespace ctn_cuda

CTN_BACKEND_PLUGIN_QUERY(ctn_cuda::kDesc)
