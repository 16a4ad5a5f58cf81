/* chutney CUDA interop: the CUDA backend's native handles for op libraries. C99. since 1.2
 *
 * An op library whose kernel maker is asked for backend "cuda" gets descriptors whose `data` is a
 * device pointer (CUdeviceptr / void * of cudaMalloc; the byte `offset` is added to it). Inside
 * the kernel maker (oplib.h) it calls
 *
 *     void *proc = NULL, *state = NULL;
 *     host->backend_proc("cuda", CTN_CUDA_INTEROP_PROC, &proc, &state);   (plugin.h)
 *     ctn_cuda_interop_fn get;  memcpy(&get, &proc, sizeof get);
 *     ctn_cuda_interop io = {sizeof io};
 *     get(state, &io);
 *
 * Rules for kernels an op library launches:
 *   - launch on `stream` only (cuLaunchKernel(..., stream, ...) or kernel<<<g, b, 0, stream>>>),
 *     never on the legacy default stream, and never synchronise (no cuStreamSynchronize,
 *     cudaDeviceSynchronize, no allocation) in the kernel function: the host synchronises. The
 *     backend records plan segments as CUDA graphs by capturing `stream` while it calls the
 *     segment's kernels once (cudaStreamBeginCapture, thread-local mode); a launch on that stream
 *     is captured into the graph in its place and replayed at every plan run, anything else
 *     either breaks the capture (the backend then logs a warning and runs that segment kernel by
 *     kernel) or escapes it. So what the launch does must be decided by the arguments, which stay
 *     the same until the plan is released;
 *   - the current context is the device's primary context (`context`) when the kernel function
 *     runs; a library that uses the driver API takes its functions from get_driver_function
 *     (the backend's libcuda) instead of linking libcuda, so it loads on machines without CUDA.
 *
 * No CUDA header is needed to use this one: handles are void * (comments name their real types).
 */
#ifndef CHUTNEY_CUDA_H
#define CHUTNEY_CUDA_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The name of the extra (backend.h get_proc_address; plugin.h backend_proc). since 1.2 */
#define CTN_CUDA_INTEROP_PROC "ctn_cuda_interop"
/* The version of ctn_cuda_interop this header describes. since 1.2 */
#define CTN_CUDA_INTEROP_VERSION 1u

/* Any CUDA driver entry point: cast it to its real type. */
typedef void (*ctn_cuda_fn)(void);

/* The CUDA backend's native handles. Filled by ctn_cuda_interop_fn. since 1.2 */
typedef struct ctn_cuda_interop {
  uint32_t struct_size;         /* in: sizeof(ctn_cuda_interop) as the caller knows it */
  uint32_t version;             /* out: CTN_CUDA_INTEROP_VERSION of the backend */
  int32_t device;               /* CUdevice / the runtime's device ordinal */
  int32_t compute_capability;   /* major * 10 + minor (80 for sm_80) */
  void *context;                /* CUcontext: the device's primary context */
  void *stream;                 /* CUstream == cudaStream_t: launch here, and only here */
  /* The driver API function `name` ("cuModuleLoadData", "cuLaunchKernel"...) from the libcuda
   * the backend opened, NULL when absent. */
  ctn_cuda_fn (*get_driver_function)(void *backend_state, const char *name);
} ctn_cuda_interop;

/* The extra's type: fills `out` (whose struct_size the caller set) for the backend state
 * `backend_state`: every field that fits, out->struct_size left as the caller set it.
 * CTN_ERR_INVALID_ARGUMENT for NULL or a struct_size smaller than version 1's (sizeof this
 * struct in 1.2); CTN_ERR_INTERNAL when the context cannot be read. since 1.2 */
typedef ctn_status (*ctn_cuda_interop_fn)(void *backend_state, ctn_cuda_interop *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_CUDA_H */
