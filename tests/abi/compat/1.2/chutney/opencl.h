/* chutney OpenCL interop: the OpenCL backend's native handles for op libraries. C99.
 *
 * An op library whose kernel maker is asked for backend "opencl" gets descriptors whose `data`
 * is a cl_mem (the byte `offset` is a byte offset into it). To enqueue its own kernel it needs
 * the backend's context, device and queue: this header describes how to obtain them. since 1.2
 *
 * How: inside a kernel maker (ctn_oplib_kernel.get_kernel or ctn_op_kernel.make, oplib.h) call
 *
 *     void *proc = NULL, *state = NULL;
 *     host->backend_proc("opencl", CTN_OPENCL_INTEROP_PROC, &proc, &state);   (plugin.h)
 *     ctn_opencl_interop_fn get;  memcpy(&get, &proc, sizeof get);   (C99-clean cast)
 *     ctn_opencl_interop io = {sizeof io};
 *     get(state, &io);
 *
 * (A program can reach the same extra with ctn_context_backend_proc, chutney.h.) The handles
 * stay valid until the context is released; the library must not release them. A kernel keeps
 * what it needs (its cl_kernel, the queue) in its state.
 *
 * Rules for kernels an op library enqueues on the backend:
 *   - enqueue on `queue` only (in order, the backend's own queue: the kernel is ordered after the
 *     kernels that produced its inputs and before the ones that read its output, with no
 *     events); never call clFinish/clWaitForEvents in a kernel: the host synchronises;
 *   - inputs and output are contiguous row-major, starting `offset` bytes into their cl_mem; the
 *     output may alias input 0 only when the kernel sets CTN_KERNEL_INPLACE_OK;
 *   - the kernel runs inside plan segments as a call of its own (plan_prepare, backend.h):
 *     ctn_kernel.fn is called at every plan run, so it enqueues each time;
 *   - OpenCL entry points come from get_function, never from linking libOpenCL: the op library
 *     then loads on machines (and cross builds) without OpenCL, and it always calls the same
 *     ICD loader as the backend. PoCL miscompiles barriers inside loops or branches
 *     (docs/OPENCL.md): keep barriers at the top level of a kernel.
 *
 * No OpenCL header is needed to use this one: handles are void * (comments name their real
 * types) and cast to them where <CL/cl.h> is available.
 */
#ifndef CHUTNEY_OPENCL_H
#define CHUTNEY_OPENCL_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The name of the extra (backend.h get_proc_address; plugin.h backend_proc). since 1.2 */
#define CTN_OPENCL_INTEROP_PROC "ctn_opencl_interop"
/* The version of ctn_opencl_interop this header describes. since 1.2 */
#define CTN_OPENCL_INTEROP_VERSION 1u

/* Any OpenCL entry point, as get_function returns it: cast it to its real type
 * (e.g. cl_int (*)(cl_kernel, cl_uint, size_t, const void *) for "clSetKernelArg"). */
typedef void (*ctn_opencl_fn)(void);

/* The OpenCL backend's native handles. Filled by ctn_opencl_interop_fn. since 1.2 */
typedef struct ctn_opencl_interop {
  uint32_t struct_size;         /* in: sizeof(ctn_opencl_interop) as the caller knows it;
                                   the backend fills only the fields that fit */
  uint32_t version;             /* out: CTN_OPENCL_INTEROP_VERSION of the backend */
  void *platform;               /* cl_platform_id */
  void *device;                 /* cl_device_id */
  void *context;                /* cl_context */
  void *queue;                  /* cl_command_queue: in order, the backend's own */
  /* Returns the OpenCL 1.2 core entry point named `name` ("clCreateKernel") of the ICD loader
   * the backend uses, NULL for a name it does not list (docs/OPENCL.md lists them). */
  ctn_opencl_fn (*get_function)(const char *name);
  uint32_t fp64;                /* 1 when the device supports cl_khr_fp64 (double kernels) */
  uint32_t reserved;            /* zero */
} ctn_opencl_interop;

/* The extra's type: fills `out` (whose struct_size the caller set) for the backend state
 * `backend_state`: every field that fits in out->struct_size, out->struct_size itself left as
 * the caller set it. CTN_ERR_INVALID_ARGUMENT (no message: the caller names the call) for NULL
 * or a struct_size smaller than version 1's (sizeof this struct in 1.2). since 1.2 */
typedef ctn_status (*ctn_opencl_interop_fn)(void *backend_state, ctn_opencl_interop *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_OPENCL_H */
