/* ctn-swish: device kernels (OpenCL: swish_opencl.c, Vulkan: swish_vulkan.c) and what they
 * share with swish.c. Internal to the library. */
#ifndef CTN_SWISH_DEVICE_H
#define CTN_SWISH_DEVICE_H

#include <chutney/oplib.h>

/* The two ops of the library. */
enum swish_op { SWISH_FWD = 0, SWISH_GRAD = 1 };

/* Fills `out` with a kernel that runs `fn` on `state` (freed by `release`, which may be NULL),
 * with no workspace. Every swish kernel reads element i of its inputs before it writes element i
 * of its output, so all of them may run in place. (swish.c) */
void swish_fill_kernel(ctn_kernel *out, ctn_kernel_fn fn, void *state, void (*release)(void *));

/* The checks every device kernel maker starts with (swish.c): the host has backend_proc (ABI
 * 1.2) and backend `backend` hands out the extra `proc_name` (into *proc, with the backend's
 * state in *bstate); the output is f32 or f64 and every input has its dtype. `name` is the op,
 * for the messages ("swish (opencl): ..."). */
ctn_status swish_device_checks(const ctn_host_api *host, const char *name, const char *backend,
                               const char *proc_name, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               void **proc, void **bstate);

/* Kernel maker for backend "opencl": the kernel enqueues OpenCL C compiled at kernel-make time
 * on the backend's queue (abi/chutney/opencl.h). */
ctn_status swish_opencl_kernel(const ctn_host_api *host, enum swish_op op, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               ctn_kernel *out);

/* Kernel maker for backend "vulkan" (swish_vulkan.c, built where the Vulkan headers and glslc
 * are: SWISH_HAVE_VULKAN): the kernel records its dispatch into the backend's command buffer
 * through the hook of abi/chutney/vulkan.h. */
ctn_status swish_vulkan_kernel(const ctn_host_api *host, enum swish_op op, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               ctn_kernel *out);

#endif
