/* chutney Vulkan interop: the Vulkan backend's native handles and its command-buffer hook, for
 * op libraries. C99. since 1.2
 *
 * An op library whose kernel maker is asked for backend "vulkan" gets descriptors whose `data` is
 * the backend's buffer handle (not a VkBuffer: buffer_info below turns it into one) and whose
 * `offset` is a byte offset into it. Inside the kernel maker (oplib.h) it calls
 *
 *     void *proc = NULL, *state = NULL;
 *     host->backend_proc("vulkan", CTN_VULKAN_INTEROP_PROC, &proc, &state);   (plugin.h)
 *     ctn_vulkan_interop_fn get;  memcpy(&get, &proc, sizeof get);
 *     ctn_vulkan_interop io = {sizeof io};
 *     get(state, &io);
 *
 * and creates its pipelines on io.device with functions from io.get_instance_proc_addr (the
 * library links no libvulkan; vkGetDeviceProcAddr comes from it too). The handles stay valid
 * until the context is released; the library must not destroy them.
 *
 * The command-buffer hook. The backend batches kernels into command buffers: one per kernel call
 * outside plans, one per plan segment (plan_prepare, backend.h), recorded once and submitted at
 * every plan run. An op library's kernel takes part in that batching: its ctn_kernel.fn is a
 * RECORDER. When called it
 *
 *     ctn_vulkan_commands c = {sizeof c};
 *     io.begin_commands(state, n_sets, n_descriptors, &c);  // c.command_buffer, c.descriptor_pool
 *     ... allocate descriptor sets from c.descriptor_pool, vkCmdBindPipeline, vkCmdDispatch ...
 *     io.end_commands(state, &c);
 *
 * begin_commands returns the command buffer the backend is recording now (a plan segment's, in
 * which case the kernel lands between its neighbours in that one command buffer, or a fresh one
 * for a lone call) with a barrier already recorded that makes every earlier write visible to
 * compute shaders, and a descriptor pool with room for n_sets sets of n_descriptors storage-
 * buffer descriptors in all, which lives as long as the recording. end_commands records the
 * barrier that makes the kernel's writes visible to what follows, and for a lone call submits.
 * So: record only; never submit, wait, or begin/end the command buffer yourself; and because a
 * segment's recording is replayed at every plan run while fn was called once (at plan_prepare),
 * everything the commands do must be decided by the arguments (which stay the same until the plan
 * is released), never by host state that changes between runs. Use push constants or descriptors
 * for offsets and sizes, not host-visible parameter buffers written per call.
 *
 * No Vulkan header is needed to use this one: handles are void * or uint64_t (comments name
 * their real types; non-dispatchable handles are 64-bit on every platform).
 */
#ifndef CHUTNEY_VULKAN_H
#define CHUTNEY_VULKAN_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The name of the extra (backend.h get_proc_address; plugin.h backend_proc). since 1.2 */
#define CTN_VULKAN_INTEROP_PROC "ctn_vulkan_interop"
/* The version of ctn_vulkan_interop this header describes. since 1.2 */
#define CTN_VULKAN_INTEROP_VERSION 1u

/* Any Vulkan entry point (PFN_vkVoidFunction). */
typedef void (*ctn_vulkan_fn)(void);

/* What begin_commands hands out. since 1.2 */
typedef struct ctn_vulkan_commands {
  uint32_t struct_size;         /* in: sizeof(ctn_vulkan_commands) */
  uint32_t reserved;            /* zero */
  void *command_buffer;         /* VkCommandBuffer, recording, compute queue family */
  uint64_t descriptor_pool;     /* VkDescriptorPool (storage-buffer descriptors) */
  void *token;                  /* the backend's; pass the struct back to end_commands */
} ctn_vulkan_commands;

/* The Vulkan backend's native handles and its hook. Filled by ctn_vulkan_interop_fn. since 1.2 */
typedef struct ctn_vulkan_interop {
  uint32_t struct_size;         /* in: sizeof(ctn_vulkan_interop) as the caller knows it */
  uint32_t version;             /* out: CTN_VULKAN_INTEROP_VERSION of the backend */
  void *instance;               /* VkInstance */
  void *physical_device;        /* VkPhysicalDevice */
  void *device;                 /* VkDevice */
  void *queue;                  /* VkQueue: the backend's; never submit to it yourself */
  uint32_t queue_family;        /* the queue's family index (compute) */
  uint32_t api_version;         /* the Vulkan version the device was created for (1.1) */
  /* PFN_vkGetInstanceProcAddr of the loader the backend uses: every other function (including
   * vkGetDeviceProcAddr) comes from it. */
  ctn_vulkan_fn (*get_instance_proc_addr)(void *instance, const char *name);
  uint32_t shader_float64;      /* 1 when shaderFloat64 is enabled on the device */
  uint32_t reserved;            /* zero */
  uint64_t storage_offset_alignment; /* minStorageBufferOffsetAlignment */
  uint64_t max_storage_range;        /* maxStorageBufferRange */
  /* The VkBuffer (*out_buffer, a uint64_t handle) and its size in bytes (*out_size) behind a
   * descriptor's `data`. CTN_ERR_INVALID_ARGUMENT for NULL. */
  ctn_status (*buffer_info)(void *backend_state, void *data, uint64_t *out_buffer,
                            uint64_t *out_size);
  /* The command-buffer hook (see the top of this file). Errors are recorded through the host's
   * set_error and returned; the kernel returns them. */
  ctn_status (*begin_commands)(void *backend_state, uint32_t n_sets, uint32_t n_descriptors,
                               ctn_vulkan_commands *out);
  ctn_status (*end_commands)(void *backend_state, ctn_vulkan_commands *commands);
} ctn_vulkan_interop;

/* The extra's type: fills `out` (whose struct_size the caller set) for the backend state
 * `backend_state`: every field that fits in out->struct_size, out->struct_size left as the
 * caller set it. CTN_ERR_INVALID_ARGUMENT for NULL or a struct_size smaller than version 1's
 * (sizeof this struct in 1.2). since 1.2 */
typedef ctn_status (*ctn_vulkan_interop_fn)(void *backend_state, ctn_vulkan_interop *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_VULKAN_H */
