// Recording kernels into command buffers: descriptor sets for each dispatch (sub-ranges of the
// buffers, so tensors larger than maxStorageBufferRange are reached window by window), barriers
// between commands, the eager path (one submission per kernel call) and plan segments (one
// command buffer recorded at plan_prepare, resubmitted by plan_run).
#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "vk_backend.h"

namespace ctn_vk {

// ---- small helpers shared by the kernel makers ---------------------------------------------------





uint64_t desc_bytes(const ctn_tensor_desc &d) {
  return static_cast<uint64_t>(desc_numel(d)) * dtype_size(d.dtype);
}



ctn_status decline(Backend &be, const ctn_op_signature *sig, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return be.host->set_error(CTN_ERR_UNSUPPORTED, "vulkan %s: %s", sig->op, buf);
}

bool float_ok(Backend &be, const ctn_op_signature *sig, int32_t dtype, ctn_status *st,
              bool half_ok) {
  const bool half = dtype == CTN_F16 || dtype == CTN_BF16;
  if (dtype == CTN_F32 || (dtype == CTN_F64 && be.has_f64) || (half && half_ok && be.has_16bit))
    return true;
  if (dtype == CTN_F64)
    *st = decline(be, sig, "f64 needs shaderFloat64, which %s lacks", be.props.deviceName);
  else if (half && half_ok)
    *st = decline(be, sig, "unavailable for %s: the device lacks storageBuffer16BitAccess",
                  dtype_name(dtype));
  else
    *st = decline(be, sig, "dtype %s is not supported (f32, f64 only)", dtype_name(dtype));
  return false;
}

bool grid_1d(const Backend &be, uint64_t items, uint32_t wg, uint32_t *gx, uint32_t *gy) {
  uint64_t groups = (items + wg - 1) / wg;
  if (groups == 0) groups = 1;
  uint64_t x = std::min<uint64_t>(groups, be.max_groups_x);
  uint64_t y = (groups + x - 1) / x;
  if (y > be.max_groups_y) return false;
  *gx = static_cast<uint32_t>(x);
  *gy = static_cast<uint32_t>(y);
  return true;
}

ctn_status kernel_new(Backend &be, const char *op, const std::vector<uint32_t> &params, Kernel **out) {
  auto k = std::make_unique<Kernel>();
  k->be = &be;
  k->op = op;
  uint64_t bytes = std::max<uint64_t>(params.size() * 4, 64);
  if (ctn_status st = buffer_create(be, bytes, true, &k->params); st != CTN_OK) return st;
  std::memset(k->params->map, 0, k->params->size);
  if (!params.empty()) std::memcpy(k->params->map, params.data(), params.size() * 4);
  *out = k.release();
  return CTN_OK;
}

void kernel_delete(Kernel *k) {
  if (!k) return;
  Backend &be = *k->be;
  if (!be.inflight.empty() || !be.pending_segments.empty()) drain(be);
  be.checked_kernels.erase(k);
  buffer_destroy(be, k->params);
  delete k;
}

void kernel_release(void *state) {
  try {
    kernel_delete(static_cast<Kernel *>(state));
  } catch (...) {
  }
}

namespace {
ctn_status kernel_call(void *state, const ctn_kernel_args *args);
}

void kernel_publish(Kernel *k, ctn_kernel *out, uint32_t flags, uint64_t workspace) {
  if (k->checks_error) k->be->checked_kernels.insert(k);
  kernel_fill(out, kernel_call, k, kernel_release, flags, workspace);
}

ctn_kernel_fn kernel_entry() { return kernel_call; }

// ---- recording -----------------------------------------------------------------------------------

// A global barrier: every earlier compute or transfer write (or, at the start of a command buffer,
// anything earlier in submission order) is visible to later compute, transfer and host access.
void cmd_barrier(Backend &be, VkCommandBuffer cb, bool from_all) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     (from_all ? VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_MEMORY_WRITE_BIT : 0);
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_HOST_READ_BIT;
  VkPipelineStageFlags src = from_all ? VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
                                      : VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkPipelineStageFlags dst = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                             VK_PIPELINE_STAGE_HOST_BIT;
  be.vk.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

ctn_status create_descriptor_pool(Backend &be, uint32_t n_sets, VkDescriptorPool *out,
                                  uint32_t n_desc, const char *what) {
  if (n_sets == 0) {
    *out = VK_NULL_HANDLE;
    return CTN_OK;
  }
  VkDescriptorPoolSize ps{};
  ps.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  ps.descriptorCount = n_desc ? n_desc : n_sets * kMaxBind;
  VkDescriptorPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pi.maxSets = n_sets;
  pi.poolSizeCount = 1;
  pi.pPoolSizes = &ps;
  VkResult r = be.vk.vkCreateDescriptorPool(be.dev, &pi, nullptr, out);
  return r == VK_SUCCESS ? CTN_OK : vk_fail(be, r, what);
}

ctn_status begin_cb(Backend &be, VkCommandBuffer *out) {
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = be.cmd_pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult r = be.vk.vkAllocateCommandBuffers(be.dev, &ai, out);
  if (r != VK_SUCCESS) return vk_fail(be, r, "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  r = be.vk.vkBeginCommandBuffer(*out, &bi);
  if (r != VK_SUCCESS) {
    be.vk.vkFreeCommandBuffers(be.dev, be.cmd_pool, 1, out);
    return vk_fail(be, r, "vkBeginCommandBuffer");
  }
  return CTN_OK;
}

namespace {

struct Resolved {
  Buffer *buf = nullptr;
  uint64_t offset = 0;
};

ctn_status resolve(Backend &be, const Kernel &k, const ctn_kernel_args &a, int8_t opnd, Resolved *r) {
  if (opnd >= 0 && opnd < 8) {
    if (static_cast<uint32_t>(opnd) >= a.n_inputs)
      return be.host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan %s: input %d missing", k.op.c_str(), opnd);
    r->buf = static_cast<Buffer *>(a.inputs[opnd].data);
    r->offset = a.inputs[opnd].offset;
  } else if (opnd == kOut) {
    r->buf = static_cast<Buffer *>(a.outputs[0].data);
    r->offset = a.outputs[0].offset;
  } else if (opnd == kParams) {
    r->buf = k.params;
  } else if (opnd == kWork) {
    r->buf = static_cast<Buffer *>(a.workspace);
  } else {
    r->buf = be.dummy;
  }
  if (!r->buf)
    return be.host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan %s: NULL buffer for operand %d", k.op.c_str(), opnd);
  return CTN_OK;
}

}  // namespace

ctn_status record_kernel(Backend &be, VkCommandBuffer cb, VkDescriptorPool pool, const Kernel &k,
                         const ctn_kernel_args &args) {
  for (const Cmd &c : k.cmds) {
    cmd_barrier(be, cb, false);
    if (c.kind == Cmd::kFill) {
      Resolved d;
      if (ctn_status st = resolve(be, k, args, c.dst, &d); st != CTN_OK) return st;
      be.vk.vkCmdFillBuffer(cb, d.buf->buf, d.offset + c.rel, c.size, c.value);
      continue;
    }
    if (c.kind == Cmd::kCopy) {
      Resolved s, d;
      if (ctn_status st = resolve(be, k, args, c.src, &s); st != CTN_OK) return st;
      if (ctn_status st = resolve(be, k, args, c.dst, &d); st != CTN_OK) return st;
      std::vector<VkBufferCopy> regions = c.regions;
      for (VkBufferCopy &r : regions) {
        r.srcOffset += s.offset;
        r.dstOffset += d.offset;
      }
      // An in-place copy (the planner aliased output and input) has nothing to move, and
      // overlapping copy regions are invalid.
      if (s.buf == d.buf)
        regions.erase(std::remove_if(regions.begin(), regions.end(),
                                     [](const VkBufferCopy &r) { return r.srcOffset == r.dstOffset; }),
                      regions.end());
      if (!regions.empty())
        be.vk.vkCmdCopyBuffer(cb, s.buf->buf, d.buf->buf, static_cast<uint32_t>(regions.size()), regions.data());
      continue;
    }
    VkDescriptorSetAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ai.descriptorPool = pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &be.dsl[c.nb];
    VkDescriptorSet set;
    VkResult r = be.vk.vkAllocateDescriptorSets(be.dev, &ai, &set);
    if (r != VK_SUCCESS) return vk_fail(be, r, "vkAllocateDescriptorSets");
    VkDescriptorBufferInfo infos[kMaxBind];
    VkWriteDescriptorSet writes[kMaxBind];
    uint32_t pcv[12] = {};
    for (uint32_t i = 0; i < c.nb; ++i) {
      const Bind &b = c.b[i];
      Resolved res;
      if (ctn_status st = resolve(be, k, args, b.opnd, &res); st != CTN_OK) return st;
      uint64_t abs = res.offset + (b.opnd == kNone ? 0 : b.rel);
      uint64_t aligned = abs - abs % be.align;
      uint64_t delta = abs - aligned;
      uint64_t range = (delta + (b.opnd == kNone ? 4 : b.range) + 3) / 4 * 4;
      if (aligned + range > res.buf->size) range = res.buf->size - aligned;
      if (range > be.max_range)
        return be.host->set_error(CTN_ERR_INTERNAL, "vulkan %s: binding %u spans %" PRIu64
                                  " bytes, over maxStorageBufferRange", k.op.c_str(), i, range);
      infos[i].buffer = res.buf->buf;
      infos[i].offset = aligned;
      infos[i].range = range;
      writes[i] = VkWriteDescriptorSet{};
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = set;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
      pcv[i] = static_cast<uint32_t>(delta / b.unit);
    }
    be.vk.vkUpdateDescriptorSets(be.dev, c.nb, writes, 0, nullptr);
    pcv[8] = c.base;
    pcv[9] = c.count;
    pcv[10] = c.e2;
    pcv[11] = c.e3;
    be.vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipe->pipe);
    be.vk.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipe->layout, 0, 1, &set, 0, nullptr);
    be.vk.vkCmdPushConstants(cb, c.pipe->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pcv, pcv);
    be.vk.vkCmdDispatch(cb, c.gx, c.gy, c.gz);
  }
  return CTN_OK;
}

namespace {

// One kernel call outside a recorded segment: its own command buffer and submission. The host
// reads results only after synchronize/download, which wait.
ctn_status kernel_call(void *state, const ctn_kernel_args *args) {
  auto *k = static_cast<Kernel *>(state);
  Backend &be = *k->be;
  try {
    VkDescriptorPool pool = VK_NULL_HANDLE;
    if (ctn_status st = create_descriptor_pool(be, k->n_dispatch(), &pool); st != CTN_OK) return st;
    VkCommandBuffer cb;
    if (ctn_status st = begin_cb(be, &cb); st != CTN_OK) {
      if (pool) be.vk.vkDestroyDescriptorPool(be.dev, pool, nullptr);
      return st;
    }
    cmd_barrier(be, cb, true);
    ctn_status st = record_kernel(be, cb, pool, *k, *args);
    cmd_barrier(be, cb, false);
    be.vk.vkEndCommandBuffer(cb);
    if (st != CTN_OK) {
      be.vk.vkFreeCommandBuffers(be.dev, be.cmd_pool, 1, &cb);
      if (pool) be.vk.vkDestroyDescriptorPool(be.dev, pool, nullptr);
      return st;
    }
    return submit_transient(be, cb, pool);
  } catch (const std::bad_alloc &) {
    return be.host->set_error(CTN_ERR_OUT_OF_MEMORY, "vulkan %s: out of memory", k->op.c_str());
  }
}

void segment_destroy(Backend &be, Segment *s) {
  if (!s) return;
  if (s->pending) {
    be.vk.vkWaitForFences(be.dev, 1, &s->fence, VK_TRUE, UINT64_MAX);
    be.pending_segments.erase(s);
  }
  if (s->cb) be.vk.vkFreeCommandBuffers(be.dev, be.cmd_pool, 1, &s->cb);
  if (s->pool) be.vk.vkDestroyDescriptorPool(be.dev, s->pool, nullptr);
  for (VkDescriptorPool p : s->foreign_pools) be.vk.vkDestroyDescriptorPool(be.dev, p, nullptr);
  if (s->fence) be.vk.vkDestroyFence(be.dev, s->fence, nullptr);
  delete s;
}

}  // namespace

// ---- plan segments -------------------------------------------------------------------------------

ctn_status plan_prepare(void *state, uint32_t n, const ctn_plan_call *calls, void **out) {
  auto *be = static_cast<Backend *>(state);
  Segment *s = nullptr;
  try {
    if (!out || (n && !calls)) return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan plan_prepare: NULL argument");
    s = new Segment;
    s->calls.assign(calls, calls + n);
    s->recorded = be->record;
    // A step whose kernel is not ours is an op library's: it records through the command-buffer
    // hook (interop.cpp, abi/chutney/vulkan.h) into this segment's command buffer.
    if (!s->recorded) {
      *out = s;
      return CTN_OK;
    }
    uint32_t sets = 0;
    for (uint32_t i = 0; i < n; ++i)
      if (calls[i].kernel->fn == kernel_call) sets += static_cast<const Kernel *>(calls[i].kernel->state)->n_dispatch();
    ctn_status st = create_descriptor_pool(*be, sets, &s->pool);
    if (st == CTN_OK) st = begin_cb(*be, &s->cb);
    if (st != CTN_OK) {
      segment_destroy(*be, s);
      return st;
    }
    cmd_barrier(*be, s->cb, true);
    for (uint32_t i = 0; i < n && st == CTN_OK; ++i)
      st = calls[i].kernel->fn == kernel_call
               ? record_kernel(*be, s->cb, s->pool, *static_cast<const Kernel *>(calls[i].kernel->state), *calls[i].args)
               : record_foreign(*be, s->cb, s->foreign_pools, calls[i]);
    cmd_barrier(*be, s->cb, false);
    VkResult r = be->vk.vkEndCommandBuffer(s->cb);
    if (st == CTN_OK && r != VK_SUCCESS) st = vk_fail(*be, r, "vkEndCommandBuffer");
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    if (st == CTN_OK && (r = be->vk.vkCreateFence(be->dev, &fi, nullptr, &s->fence)) != VK_SUCCESS)
      st = vk_fail(*be, r, "vkCreateFence");
    if (st != CTN_OK) {
      segment_destroy(*be, s);
      return st;
    }
    *out = s;
    return CTN_OK;
  } catch (const std::bad_alloc &) {
    segment_destroy(*be, s);
    return be->host->set_error(CTN_ERR_OUT_OF_MEMORY, "vulkan plan_prepare: out of memory");
  }
}

ctn_status plan_run(void *state, void *segment) {
  auto *be = static_cast<Backend *>(state);
  auto *s = static_cast<Segment *>(segment);
  try {
    if (!s->recorded) {
      for (const ctn_plan_call &c : s->calls)
        if (ctn_status st = c.kernel->fn(c.kernel->state, c.args); st != CTN_OK) return st;
      return CTN_OK;
    }
    if (!s->cb) return CTN_OK;
    // Transient submissions before this one must be complete before the segment reuses
    // resources; ordering on the queue plus the leading barrier covers that.
    if (s->pending) {
      be->vk.vkWaitForFences(be->dev, 1, &s->fence, VK_TRUE, UINT64_MAX);
      s->pending = false;
      be->pending_segments.erase(s);
    }
    be->vk.vkResetFences(be->dev, 1, &s->fence);
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &s->cb;
    VkResult r = be->vk.vkQueueSubmit(be->queue, 1, &si, s->fence);
    if (r != VK_SUCCESS) return vk_fail(*be, r, "vkQueueSubmit");
    ++be->n_submits;
    s->pending = true;
    be->pending_segments.insert(s);
    return CTN_OK;
  } catch (const std::bad_alloc &) {
    return be->host->set_error(CTN_ERR_OUT_OF_MEMORY, "vulkan plan_run: out of memory");
  }
}

void plan_release(void *state, void *segment) {
  try {
    segment_destroy(*static_cast<Backend *>(state), static_cast<Segment *>(segment));
  } catch (...) {
  }
}

}  // namespace ctn_vk
