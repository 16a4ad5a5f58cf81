/* ctn-swish: OpenCL kernels for swish and swish_grad.
 *
 * The kernel maker takes the OpenCL backend's context, device and queue through the host's
 * backend_proc slot and the "ctn_opencl_interop" extra (abi/chutney/opencl.h). The library does
 * not link libOpenCL and needs no OpenCL header: the few entry points it calls come from the
 * interop struct's get_function (the backend's own ICD loader), so ctn-swish.so builds and loads
 * where OpenCL is absent (cross builds), and there the kernel maker is simply never asked.
 *
 * The program (OpenCL C below, compiled at kernel-make time) is built once per cl_context and
 * shared by the kernels of that context; the last kernel released releases it.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chutney/desc.h>
#include <chutney/opencl.h>

#include "swish_device.h"

/* The OpenCL types and constants used here (OpenCL 1.2, cl.h), without the header. */
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef void *cl_handle; /* cl_context, cl_device_id, cl_program, cl_kernel, cl_mem, ... */
#define SW_CL_SUCCESS 0
#define SW_CL_PROGRAM_BUILD_LOG 0x1183

typedef cl_handle (*pfn_create_program)(cl_handle ctx, cl_uint n, const char **src,
                                        const size_t *len, cl_int *err);
typedef cl_int (*pfn_build_program)(cl_handle prog, cl_uint n, const cl_handle *devs,
                                    const char *opts, void (*notify)(cl_handle, void *),
                                    void *user);
typedef cl_int (*pfn_program_build_info)(cl_handle prog, cl_handle dev, cl_uint what,
                                         size_t size, void *value, size_t *size_ret);
typedef cl_int (*pfn_release)(cl_handle obj);
typedef cl_handle (*pfn_create_kernel)(cl_handle prog, const char *name, cl_int *err);
typedef cl_int (*pfn_set_kernel_arg)(cl_handle k, cl_uint i, size_t size, const void *value);
typedef cl_int (*pfn_enqueue_nd)(cl_handle q, cl_handle k, cl_uint dim, const size_t *offset,
                                 const size_t *global, const size_t *local, cl_uint n_wait,
                                 const void *wait, void *event);

/* sigmoid from exp(-|x|), as the CPU kernels: neither branch overflows. Barriers: none. */
static const char kSource[] =
    "#define SWISH_KERNELS(T, S) \\\n"
    "inline T sig_##S(T x) { \\\n"
    "  T e = exp(-fabs(x)); \\\n"
    "  return x >= (T)0 ? (T)1 / ((T)1 + e) : e / ((T)1 + e); \\\n"
    "} \\\n"
    "__kernel void swish_##S(__global const T *x, ulong xo, __global T *y, ulong yo, ulong n) { \\\n"
    "  ulong i = get_global_id(0); \\\n"
    "  if (i < n) { T v = x[xo + i]; y[yo + i] = v * sig_##S(v); } \\\n"
    "} \\\n"
    "__kernel void swish_grad_##S(__global const T *x, ulong xo, __global const T *dy, \\\n"
    "                             ulong dyo, __global T *dx, ulong dxo, ulong n) { \\\n"
    "  ulong i = get_global_id(0); \\\n"
    "  if (i < n) { \\\n"
    "    T v = x[xo + i], s = sig_##S(v); \\\n"
    "    dx[dxo + i] = dy[dyo + i] * (s + v * s * ((T)1 - s)); \\\n"
    "  } \\\n"
    "}\n"
    "SWISH_KERNELS(float, f32)\n"
    "#ifdef SWISH_FP64\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "SWISH_KERNELS(double, f64)\n"
    "#endif\n";

/* ---- the OpenCL entry points, from the backend's interop struct ---------------------------- */
typedef struct cl_api {
  pfn_create_program create_program;
  pfn_build_program build_program;
  pfn_program_build_info build_info;
  pfn_release release_program;
  pfn_create_kernel create_kernel;
  pfn_release release_kernel;
  pfn_set_kernel_arg set_arg;
  pfn_enqueue_nd enqueue;
} cl_api;

static int load_api(const ctn_opencl_interop *io, cl_api *api) {
  /* Each is a ctn_opencl_fn; a cast between function pointer types is well defined. */
  api->create_program = (pfn_create_program)io->get_function("clCreateProgramWithSource");
  api->build_program = (pfn_build_program)io->get_function("clBuildProgram");
  api->build_info = (pfn_program_build_info)io->get_function("clGetProgramBuildInfo");
  api->release_program = (pfn_release)io->get_function("clReleaseProgram");
  api->create_kernel = (pfn_create_kernel)io->get_function("clCreateKernel");
  api->release_kernel = (pfn_release)io->get_function("clReleaseKernel");
  api->set_arg = (pfn_set_kernel_arg)io->get_function("clSetKernelArg");
  api->enqueue = (pfn_enqueue_nd)io->get_function("clEnqueueNDRangeKernel");
  return api->create_program && api->build_program && api->build_info && api->release_program &&
         api->create_kernel && api->release_kernel && api->set_arg && api->enqueue;
}

/* ---- one program per cl_context, shared by that context's kernels -------------------------- */
#define SWISH_MAX_CONTEXTS 16
typedef struct program_entry {
  cl_handle context; /* NULL: free slot */
  cl_handle program;
  int fp64;
  unsigned refs; /* live kernels using it */
} program_entry;

static program_entry g_programs[SWISH_MAX_CONTEXTS];
static pthread_mutex_t g_programs_mu = PTHREAD_MUTEX_INITIALIZER;

/* Returns the entry for io->context with one more reference, building the program if needed. */
static ctn_status acquire_program(const ctn_host_api *host, const ctn_opencl_interop *io,
                                  const cl_api *api, program_entry **out) {
  ctn_status st = CTN_OK;
  program_entry *free_slot = NULL;
  int i;
  pthread_mutex_lock(&g_programs_mu);
  for (i = 0; i < SWISH_MAX_CONTEXTS; ++i) {
    if (g_programs[i].context == io->context) {
      g_programs[i].refs++;
      *out = &g_programs[i];
      pthread_mutex_unlock(&g_programs_mu);
      return CTN_OK;
    }
    if (!g_programs[i].context && !free_slot) free_slot = &g_programs[i];
  }
  if (!free_slot) {
    st = host->set_error(CTN_ERR_UNSUPPORTED,
                         "swish (opencl): more than %d OpenCL contexts hold swish kernels at once",
                         SWISH_MAX_CONTEXTS);
  } else {
    cl_int err = SW_CL_SUCCESS;
    const char *src = kSource;
    size_t len = sizeof kSource - 1;
    const char *opts = io->fp64 ? "-DSWISH_FP64" : "";
    cl_handle prog = api->create_program(io->context, 1, &src, &len, &err);
    if (!prog || err != SW_CL_SUCCESS) {
      st = host->set_error(CTN_ERR_UNSUPPORTED,
                           "swish (opencl): clCreateProgramWithSource failed (%d)", (int)err);
    } else if ((err = api->build_program(prog, 1, &io->device, opts, NULL, NULL)) !=
               SW_CL_SUCCESS) {
      char log[1024];
      size_t got = 0;
      log[0] = 0;
      if (api->build_info(prog, io->device, SW_CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &got) !=
          SW_CL_SUCCESS)
        got = 0;
      log[got < sizeof log ? got : sizeof log - 1] = 0;
      api->release_program(prog);
      st = host->set_error(CTN_ERR_UNSUPPORTED, "swish (opencl): clBuildProgram failed (%d): %s",
                           (int)err, log);
    } else {
      free_slot->context = io->context;
      free_slot->program = prog;
      free_slot->fp64 = io->fp64 != 0;
      free_slot->refs = 1;
      *out = free_slot;
    }
  }
  pthread_mutex_unlock(&g_programs_mu);
  return st;
}

static void release_program(program_entry *e, const cl_api *api) {
  pthread_mutex_lock(&g_programs_mu);
  if (--e->refs == 0) {
    api->release_program(e->program);
    e->context = NULL;
    e->program = NULL;
  }
  pthread_mutex_unlock(&g_programs_mu);
}

/* ---- kernels ------------------------------------------------------------------------------- */
typedef struct ocl_kernel {
  const ctn_host_api *host;
  cl_api api;
  cl_handle queue;
  cl_handle kernel;
  program_entry *program;
  enum swish_op op;
  size_t elem;
} ocl_kernel;

static void ocl_kernel_release(void *state) {
  ocl_kernel *k = (ocl_kernel *)state;
  if (!k) return;
  if (k->kernel) k->api.release_kernel(k->kernel);
  if (k->program) release_program(k->program, &k->api);
  free(k);
}

/* Sets argument `i` to buffer `d` and its element offset `i + 1`. */
static cl_int set_buffer(const ocl_kernel *k, cl_uint i, const ctn_tensor_desc *d) {
  cl_handle mem = d->data;
  uint64_t off = d->offset / k->elem;
  cl_int e = k->api.set_arg(k->kernel, i, sizeof mem, &mem);
  return e != SW_CL_SUCCESS ? e : k->api.set_arg(k->kernel, i + 1, sizeof off, &off);
}

static ctn_status ocl_kernel_run(void *state, const ctn_kernel_args *args) {
  const ocl_kernel *k = (const ocl_kernel *)state;
  const char *name = k->op == SWISH_FWD ? "swish" : "swish_grad";
  uint64_t n = (uint64_t)ctn_desc_numel(&args->outputs[0]);
  size_t global, local = 64;
  cl_uint a = 0;
  cl_int e;
  uint32_t i;
  if (n == 0) return CTN_OK;
  for (i = 0; i < args->n_inputs; ++i)
    if (args->inputs[i].offset % k->elem)
      return k->host->set_error(CTN_ERR_INVALID_ARGUMENT,
                                "%s (opencl): input %u starts at byte %llu, not a multiple of %u",
                                name, (unsigned)i, (unsigned long long)args->inputs[i].offset,
                                (unsigned)k->elem);
  if (args->outputs[0].offset % k->elem)
    return k->host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s (opencl): misaligned output", name);
  e = set_buffer(k, a, &args->inputs[0]);
  a += 2;
  if (e == SW_CL_SUCCESS && k->op == SWISH_GRAD) {
    e = set_buffer(k, a, &args->inputs[1]);
    a += 2;
  }
  if (e == SW_CL_SUCCESS) e = set_buffer(k, a, &args->outputs[0]);
  a += 2;
  if (e == SW_CL_SUCCESS) e = k->api.set_arg(k->kernel, a, sizeof n, &n);
  if (e != SW_CL_SUCCESS)
    return k->host->set_error(CTN_ERR_INTERNAL, "%s (opencl): clSetKernelArg failed (%d)", name,
                              (int)e);
  global = (size_t)((n + local - 1) / local * local);
  /* On the backend's in-order queue: ordered with its own kernels, no wait here. */
  e = k->api.enqueue(k->queue, k->kernel, 1, NULL, &global, &local, 0, NULL, NULL);
  if (e != SW_CL_SUCCESS)
    return k->host->set_error(CTN_ERR_INTERNAL, "%s (opencl): clEnqueueNDRangeKernel failed (%d)",
                              name, (int)e);
  return CTN_OK;
}

ctn_status swish_opencl_kernel(const ctn_host_api *host, enum swish_op op, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               ctn_kernel *out) {
  const char *name = op == SWISH_FWD ? "swish" : "swish_grad";
  void *proc = NULL, *bstate = NULL;
  ctn_opencl_interop_fn get_interop;
  ctn_opencl_interop io;
  ocl_kernel *k;
  ctn_status st;
  cl_int err = SW_CL_SUCCESS;
  char kname[32];
  st = swish_device_checks(host, name, "opencl", CTN_OPENCL_INTEROP_PROC, n_inputs, inputs, output,
                           &proc, &bstate);
  if (st != CTN_OK) return st;
  /* The extra is a function returned as void *: copy its bits (C99 has no cast for it). */
  memcpy(&get_interop, &proc, sizeof get_interop);
  memset(&io, 0, sizeof io);
  io.struct_size = sizeof io;
  if (get_interop(bstate, &io) != CTN_OK || io.version < 1 || !io.get_function)
    return host->set_error(CTN_ERR_UNSUPPORTED, "%s (opencl): the backend's interop failed", name);
  if (output->dtype == CTN_F64 && !io.fp64)
    return host->set_error(CTN_ERR_UNSUPPORTED,
                           "%s (opencl): f64 needs cl_khr_fp64, which this device does not offer",
                           name);
  k = (ocl_kernel *)calloc(1, sizeof *k);
  if (!k) return host->set_error(CTN_ERR_OUT_OF_MEMORY, "%s (opencl): out of memory", name);
  k->host = host;
  k->queue = io.queue;
  k->op = op;
  k->elem = ctn_desc_dtype_size(output->dtype);
  if (!load_api(&io, &k->api)) {
    free(k);
    return host->set_error(CTN_ERR_UNSUPPORTED,
                           "%s (opencl): the backend does not hand out the OpenCL entry points "
                           "swish needs", name);
  }
  st = acquire_program(host, &io, &k->api, &k->program);
  if (st != CTN_OK) {
    free(k);
    return st;
  }
  snprintf(kname, sizeof kname, "%s_%s", name, ctn_desc_dtype_name(output->dtype));
  k->kernel = k->api.create_kernel(k->program->program, kname, &err);
  if (!k->kernel || err != SW_CL_SUCCESS) {
    k->kernel = NULL;
    ocl_kernel_release(k);
    return host->set_error(CTN_ERR_INTERNAL, "%s (opencl): clCreateKernel(%s) failed (%d)", name,
                           kname, (int)err);
  }
  swish_fill_kernel(out, ocl_kernel_run, k, ocl_kernel_release);
  return CTN_OK;
}
