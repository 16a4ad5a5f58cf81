// since 1.2: the "ctn_vulkan_interop" extra (abi/chutney/vulkan.h): the backend's native handles
// and the command-buffer hook through which op libraries' kernels record into the backend's
// command buffers (a plan segment's, or a fresh one per lone call).
#include <chutney/vulkan.h>

#include <cstring>
#include <new>

#include "vk_backend.h"

namespace ctn_vk {
namespace {

// The segment being recorded on this thread (plan_prepare calls the foreign kernel's fn once).
struct Recording {
  Backend *be = nullptr;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> *pools = nullptr;
};
thread_local Recording *tl_recording = nullptr;

// What begin_commands hands out in ctn_vulkan_commands.token.
struct Token {
  bool lone = false;  // a fresh command buffer end_commands submits
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
};

ctn_status make_pool(Backend &be, uint32_t n_sets, uint32_t n_desc, VkDescriptorPool *out) {
  *out = VK_NULL_HANDLE;
  return create_descriptor_pool(be, n_sets, out, n_desc ? n_desc : 1,
                                "vkCreateDescriptorPool (op library)");
}

ctn_status begin_commands(void *state, uint32_t n_sets, uint32_t n_desc, ctn_vulkan_commands *out) {
  auto *be = static_cast<Backend *>(state);
  if (!be) return CTN_ERR_INVALID_ARGUMENT;
  if (!out || out->struct_size < sizeof(ctn_vulkan_commands))
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan begin_commands: NULL or short ctn_vulkan_commands");
  try {
    auto *t = new Token;
    if (ctn_status st = make_pool(*be, n_sets, n_desc, &t->pool); st != CTN_OK) {
      delete t;
      return st;
    }
    if (tl_recording && tl_recording->be == be) {
      // Inside a plan segment: the segment's command buffer, after the commands before it.
      t->cb = tl_recording->cb;
      if (t->pool) tl_recording->pools->push_back(t->pool);  // lives as long as the segment
      cmd_barrier(*be, t->cb, false);
    } else {
      t->lone = true;
      if (ctn_status st = begin_cb(*be, &t->cb); st != CTN_OK) {
        if (t->pool) be->vk.vkDestroyDescriptorPool(be->dev, t->pool, nullptr);
        delete t;
        return st;
      }
      cmd_barrier(*be, t->cb, true);
    }
    out->command_buffer = t->cb;
    out->descriptor_pool = reinterpret_cast<uint64_t>(t->pool);
    out->token = t;
    return CTN_OK;
  } catch (const std::bad_alloc &) {
    return be->host->set_error(CTN_ERR_OUT_OF_MEMORY, "vulkan begin_commands: out of memory");
  }
}

ctn_status end_commands(void *state, ctn_vulkan_commands *c) {
  auto *be = static_cast<Backend *>(state);
  if (!be) return CTN_ERR_INVALID_ARGUMENT;
  if (!c || !c->token) return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan end_commands: no begin_commands");
  auto *t = static_cast<Token *>(c->token);
  c->token = nullptr;
  cmd_barrier(*be, t->cb, false);
  ctn_status st = CTN_OK;
  if (t->lone) {
    VkResult r = be->vk.vkEndCommandBuffer(t->cb);
    if (r != VK_SUCCESS) {
      be->vk.vkFreeCommandBuffers(be->dev, be->cmd_pool, 1, &t->cb);
      if (t->pool) be->vk.vkDestroyDescriptorPool(be->dev, t->pool, nullptr);
      st = vk_fail(*be, r, "vkEndCommandBuffer (op library)");
    } else {
      st = submit_transient(*be, t->cb, t->pool);  // owns cb and pool from here
    }
  }
  delete t;
  return st;
}

ctn_status buffer_info(void *, void *data, uint64_t *out_buffer, uint64_t *out_size) {
  if (!data || !out_buffer) return CTN_ERR_INVALID_ARGUMENT;
  const auto *b = static_cast<const Buffer *>(data);
  *out_buffer = reinterpret_cast<uint64_t>(b->buf);
  if (out_size) *out_size = b->size;
  return CTN_OK;
}

ctn_status fill_interop(void *state, ctn_vulkan_interop *out) {
  return ctn_backend_util::interop_answer(
      state, out, CTN_VULKAN_INTEROP_VERSION, [&](ctn_vulkan_interop &io) -> ctn_status {
    const auto *be = static_cast<const Backend *>(state);
    io.instance = be->instance;
    io.physical_device = be->phys;
    io.device = be->dev;
    io.queue = be->queue;
    io.queue_family = be->qfamily;
    io.api_version = VK_API_VERSION_1_1;
    io.get_instance_proc_addr = reinterpret_cast<ctn_vulkan_fn (*)(void *, const char *)>(be->vk.vkGetInstanceProcAddr);
    io.shader_float64 = be->has_f64 ? 1u : 0u;
    io.storage_offset_alignment = be->align;
    io.max_storage_range = be->max_range;
    io.buffer_info = buffer_info;
    io.begin_commands = begin_commands;
    io.end_commands = end_commands;
    return CTN_OK;
  });
}

}  // namespace

void *interop_proc(const char *name) {
  return ctn_backend_util::interop_proc_entry(name, CTN_VULKAN_INTEROP_PROC,
                                              static_cast<ctn_vulkan_interop_fn>(fill_interop));
}

ctn_status record_foreign(Backend &be, VkCommandBuffer cb, std::vector<VkDescriptorPool> &pools,
                          const ctn_plan_call &call) {
  Recording rec{&be, cb, &pools};
  Recording *prev = tl_recording;
  tl_recording = &rec;
  ctn_status st = call.kernel->fn(call.kernel->state, call.args);
  tl_recording = prev;
  return st;
}

}  // namespace ctn_vk
