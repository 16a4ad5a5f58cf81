/* ctn-swish: device kernels (OpenCL: swish_opencl.c). Internal to the library. */
#ifndef CTN_SWISH_DEVICE_H
#define CTN_SWISH_DEVICE_H

#include <chutney/oplib.h>

/* The two ops of the library. */
enum swish_op { SWISH_FWD = 0, SWISH_GRAD = 1 };

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
