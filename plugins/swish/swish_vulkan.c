/* ctn-swish: Vulkan kernels for swish and swish_grad.
 *
 * The kernel maker takes the Vulkan backend's device through host->backend_proc and the
 * "ctn_vulkan_interop" extra (abi/chutney/vulkan.h). The SPIR-V (swish.comp) was compiled by
 * glslc at build time and is embedded. Every Vulkan function comes from the interop struct's
 * vkGetInstanceProcAddr (VK_NO_PROTOTYPES: the library links no libvulkan). Built only where the
 * Vulkan headers and glslc are (meson.build); elsewhere swish has no "vulkan" kernel.
 *
 * The kernel function is a recorder (vulkan.h): it asks the backend for the command buffer being
 * recorded (a plan segment's or a fresh one), allocates one descriptor set from the pool handed
 * out with it, and records one dispatch. Offsets and sizes go in push constants, so a segment
 * recorded once is right at every replay.
 */
#define VK_NO_PROTOTYPES
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

#include <chutney/desc.h>
#include <chutney/vulkan.h>

#include "swish_device.h"
#include "swish_spirv.h" /* swish_spv_{fwd,grad}_{f32,f64}, generated */

#define WG 64u /* local_size_x of swish.comp */

typedef struct vk_fns {
  PFN_vkCreateShaderModule create_shader;
  PFN_vkDestroyShaderModule destroy_shader;
  PFN_vkCreateDescriptorSetLayout create_dsl;
  PFN_vkDestroyDescriptorSetLayout destroy_dsl;
  PFN_vkCreatePipelineLayout create_layout;
  PFN_vkDestroyPipelineLayout destroy_layout;
  PFN_vkCreateComputePipelines create_pipelines;
  PFN_vkDestroyPipeline destroy_pipeline;
  PFN_vkAllocateDescriptorSets alloc_sets;
  PFN_vkUpdateDescriptorSets update_sets;
  PFN_vkCmdBindPipeline bind_pipeline;
  PFN_vkCmdBindDescriptorSets bind_sets;
  PFN_vkCmdPushConstants push_constants;
  PFN_vkCmdDispatch dispatch;
} vk_fns;

typedef struct push_block {
  uint32_t xo, dyo, yo, n, gx;
} push_block;

typedef struct vk_kernel {
  const ctn_host_api *host;
  void *bstate; /* the backend state the hook takes */
  ctn_vulkan_interop io;
  vk_fns f;
  VkDevice dev;
  VkDescriptorSetLayout dsl;
  VkPipelineLayout layout;
  VkPipeline pipe;
  enum swish_op op;
  size_t elem;
} vk_kernel;

/* Loads the device functions; 1 when all are there. */
static int load_fns(const ctn_vulkan_interop *io, VkDevice dev, vk_fns *f) {
  PFN_vkGetDeviceProcAddr gdpa;
  ctn_vulkan_fn p = io->get_instance_proc_addr(io->instance, "vkGetDeviceProcAddr");
  if (!p) return 0;
  gdpa = (PFN_vkGetDeviceProcAddr)p;
#define LOAD(field, name) f->field = (PFN_##name)gdpa(dev, #name)
  LOAD(create_shader, vkCreateShaderModule);
  LOAD(destroy_shader, vkDestroyShaderModule);
  LOAD(create_dsl, vkCreateDescriptorSetLayout);
  LOAD(destroy_dsl, vkDestroyDescriptorSetLayout);
  LOAD(create_layout, vkCreatePipelineLayout);
  LOAD(destroy_layout, vkDestroyPipelineLayout);
  LOAD(create_pipelines, vkCreateComputePipelines);
  LOAD(destroy_pipeline, vkDestroyPipeline);
  LOAD(alloc_sets, vkAllocateDescriptorSets);
  LOAD(update_sets, vkUpdateDescriptorSets);
  LOAD(bind_pipeline, vkCmdBindPipeline);
  LOAD(bind_sets, vkCmdBindDescriptorSets);
  LOAD(push_constants, vkCmdPushConstants);
  LOAD(dispatch, vkCmdDispatch);
#undef LOAD
  return f->create_shader && f->destroy_shader && f->create_dsl && f->destroy_dsl &&
         f->create_layout && f->destroy_layout && f->create_pipelines && f->destroy_pipeline &&
         f->alloc_sets && f->update_sets && f->bind_pipeline && f->bind_sets &&
         f->push_constants && f->dispatch;
}

static void vk_kernel_release(void *state) {
  vk_kernel *k = (vk_kernel *)state;
  if (!k) return;
  if (k->pipe) k->f.destroy_pipeline(k->dev, k->pipe, NULL);
  if (k->layout) k->f.destroy_layout(k->dev, k->layout, NULL);
  if (k->dsl) k->f.destroy_dsl(k->dev, k->dsl, NULL);
  free(k);
}

/* Binding of one operand: the buffer from its aligned-down offset; *elem_off is the element
 * offset within the binding. */
static ctn_status bind_operand(const vk_kernel *k, const ctn_tensor_desc *d, uint64_t n,
                               VkDescriptorBufferInfo *info, uint32_t *elem_off) {
  uint64_t buf = 0, size = 0, align = k->io.storage_offset_alignment ? k->io.storage_offset_alignment : 4;
  uint64_t start, delta, range;
  const char *name = k->op == SWISH_FWD ? "swish" : "swish_grad";
  if (k->io.buffer_info(k->bstate, d->data, &buf, &size) != CTN_OK)
    return k->host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s (vulkan): not a vulkan buffer", name);
  if (d->offset % k->elem)
    return k->host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s (vulkan): misaligned operand", name);
  start = d->offset / align * align;
  delta = d->offset - start;
  range = delta + n * k->elem;
  if (start + range > size || range > k->io.max_storage_range || delta / k->elem > 0xffffffffu)
    return k->host->set_error(CTN_ERR_UNSUPPORTED,
                              "%s (vulkan): operand of %llu bytes over maxStorageBufferRange",
                              name, (unsigned long long)range);
  memcpy(&info->buffer, &buf, sizeof info->buffer); /* a 64-bit handle */
  info->offset = start;
  info->range = range;
  *elem_off = (uint32_t)(delta / k->elem);
  return CTN_OK;
}

static ctn_status vk_kernel_run(void *state, const ctn_kernel_args *args) {
  const vk_kernel *k = (const vk_kernel *)state;
  const char *name = k->op == SWISH_FWD ? "swish" : "swish_grad";
  uint64_t n = (uint64_t)ctn_desc_numel(&args->outputs[0]);
  VkDescriptorBufferInfo infos[3];
  VkWriteDescriptorSet writes[3];
  push_block pc;
  uint32_t nb = k->op == SWISH_FWD ? 2u : 3u, i, groups, gx, gy;
  ctn_vulkan_commands c;
  VkDescriptorSetAllocateInfo ai;
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkDescriptorPool pool;
  VkCommandBuffer cb;
  VkResult r;
  ctn_status st;
  if (n == 0) return CTN_OK;
  if (n > 0xffffffffu)
    return k->host->set_error(CTN_ERR_UNSUPPORTED, "%s (vulkan): over 2^32 elements", name);
  memset(&pc, 0, sizeof pc);
  pc.n = (uint32_t)n;
  st = bind_operand(k, &args->inputs[0], n, &infos[0], &pc.xo);
  if (st == CTN_OK && k->op == SWISH_GRAD) st = bind_operand(k, &args->inputs[1], n, &infos[1], &pc.dyo);
  if (st == CTN_OK) st = bind_operand(k, &args->outputs[0], n, &infos[nb - 1], &pc.yo);
  if (st != CTN_OK) return st;
  groups = (uint32_t)((n + WG - 1) / WG);
  gx = groups < 65535u ? groups : 65535u;
  gy = (groups + gx - 1) / gx;
  pc.gx = gx * WG;

  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  if ((st = k->io.begin_commands(k->bstate, 1, nb, &c)) != CTN_OK) return st;
  cb = (VkCommandBuffer)c.command_buffer;
  memcpy(&pool, &c.descriptor_pool, sizeof pool);
  memset(&ai, 0, sizeof ai);
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = pool;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &k->dsl;
  r = k->f.alloc_sets(k->dev, &ai, &set);
  if (r == VK_SUCCESS) {
    for (i = 0; i < nb; ++i) {
      memset(&writes[i], 0, sizeof writes[i]);
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = set;
      /* bindings 0, (1), 2 */
      writes[i].dstBinding = (k->op == SWISH_FWD && i == 1) ? 2u : i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    k->f.update_sets(k->dev, nb, writes, 0, NULL);
    k->f.bind_pipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipe);
    k->f.bind_sets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &set, 0, NULL);
    k->f.push_constants(cb, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
    k->f.dispatch(cb, gx, gy, 1);
  }
  /* Always end what was begun: a lone call is submitted (empty when allocation failed). */
  st = k->io.end_commands(k->bstate, &c);
  if (r != VK_SUCCESS)
    return k->host->set_error(CTN_ERR_INTERNAL, "%s (vulkan): vkAllocateDescriptorSets failed (%d)",
                              name, (int)r);
  return st;
}

ctn_status swish_vulkan_kernel(const ctn_host_api *host, enum swish_op op, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               ctn_kernel *out) {
  const char *name = op == SWISH_FWD ? "swish" : "swish_grad";
  void *proc = NULL, *bstate = NULL;
  ctn_vulkan_interop_fn get_interop;
  vk_kernel *k;
  const uint32_t *code;
  size_t code_size;
  VkShaderModuleCreateInfo smi;
  VkShaderModule mod = VK_NULL_HANDLE;
  VkDescriptorSetLayoutBinding binds[3];
  VkDescriptorSetLayoutCreateInfo dli;
  VkPushConstantRange pcr;
  VkPipelineLayoutCreateInfo pli;
  VkComputePipelineCreateInfo cpi;
  VkResult r;
  uint32_t i, nb = op == SWISH_FWD ? 2u : 3u;
  ctn_status st = swish_device_checks(host, name, "vulkan", CTN_VULKAN_INTEROP_PROC, n_inputs,
                                      inputs, output, &proc, &bstate);
  if (st != CTN_OK) return st;
  k = (vk_kernel *)calloc(1, sizeof *k);
  if (!k) return host->set_error(CTN_ERR_OUT_OF_MEMORY, "%s (vulkan): out of memory", name);
  memcpy(&get_interop, &proc, sizeof get_interop);
  k->io.struct_size = sizeof k->io;
  if (get_interop(bstate, &k->io) != CTN_OK || k->io.version < 1 || !k->io.get_instance_proc_addr) {
    free(k);
    return host->set_error(CTN_ERR_UNSUPPORTED, "%s (vulkan): the backend's interop failed", name);
  }
  if (output->dtype == CTN_F64 && !k->io.shader_float64) {
    free(k);
    return host->set_error(CTN_ERR_UNSUPPORTED,
                           "%s (vulkan): f64 needs shaderFloat64, which this device does not offer",
                           name);
  }
  k->host = host;
  k->bstate = bstate;
  k->op = op;
  k->elem = ctn_desc_dtype_size(output->dtype);
  k->dev = (VkDevice)k->io.device;
  if (!load_fns(&k->io, k->dev, &k->f)) {
    free(k);
    return host->set_error(CTN_ERR_UNSUPPORTED, "%s (vulkan): Vulkan entry points missing", name);
  }
  if (op == SWISH_FWD) {
    code = output->dtype == CTN_F32 ? swish_spv_fwd_f32 : swish_spv_fwd_f64;
    code_size = output->dtype == CTN_F32 ? sizeof swish_spv_fwd_f32 : sizeof swish_spv_fwd_f64;
  } else {
    code = output->dtype == CTN_F32 ? swish_spv_grad_f32 : swish_spv_grad_f64;
    code_size = output->dtype == CTN_F32 ? sizeof swish_spv_grad_f32 : sizeof swish_spv_grad_f64;
  }
  memset(binds, 0, sizeof binds);
  for (i = 0; i < nb; ++i) {
    binds[i].binding = (op == SWISH_FWD && i == 1) ? 2u : i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  memset(&dli, 0, sizeof dli);
  dli.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dli.bindingCount = nb;
  dli.pBindings = binds;
  r = k->f.create_dsl(k->dev, &dli, NULL, &k->dsl);
  if (r == VK_SUCCESS) {
    memset(&pcr, 0, sizeof pcr);
    pcr.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    pcr.size = sizeof(push_block);
    memset(&pli, 0, sizeof pli);
    pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &k->dsl;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &pcr;
    r = k->f.create_layout(k->dev, &pli, NULL, &k->layout);
  }
  if (r == VK_SUCCESS) {
    memset(&smi, 0, sizeof smi);
    smi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    smi.codeSize = code_size;
    smi.pCode = code;
    r = k->f.create_shader(k->dev, &smi, NULL, &mod);
  }
  if (r == VK_SUCCESS) {
    memset(&cpi, 0, sizeof cpi);
    cpi.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpi.stage.module = mod;
    cpi.stage.pName = "main";
    cpi.layout = k->layout;
    r = k->f.create_pipelines(k->dev, VK_NULL_HANDLE, 1, &cpi, NULL, &k->pipe);
    k->f.destroy_shader(k->dev, mod, NULL);
  }
  if (r != VK_SUCCESS) {
    vk_kernel_release(k);
    return host->set_error(CTN_ERR_INTERNAL, "%s (vulkan): pipeline creation failed (%d)", name,
                           (int)r);
  }
  swish_fill_kernel(out, vk_kernel_run, k, vk_kernel_release);
  return CTN_OK;
}
