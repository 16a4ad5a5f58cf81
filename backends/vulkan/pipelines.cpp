// Compute pipelines: one per (shader, specialisation constants), created on first use through the
// pipeline cache and kept until shutdown. Descriptor set layouts are shared per binding count.
#include "spirv_embed.h"
#include "vk_backend.h"

namespace ctn_vk {

namespace {

const SpirvBlob *find_blob(const char *name) {
  for (const SpirvBlob &b : kSpirvBlobs)
    if (std::strcmp(b.name, name) == 0) return &b;
  return nullptr;
}

ctn_status layout_for(Backend &be, uint32_t nbind) {
  if (be.playout[nbind]) return CTN_OK;
  VkDescriptorSetLayoutBinding binds[kMaxBind];
  for (uint32_t i = 0; i < nbind; ++i) {
    binds[i] = VkDescriptorSetLayoutBinding{};
    binds[i].binding = i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = nbind;
  li.pBindings = binds;
  VkResult r = be.vk.vkCreateDescriptorSetLayout(be.dev, &li, nullptr, &be.dsl[nbind]);
  if (r != VK_SUCCESS) return vk_fail(be, r, "vkCreateDescriptorSetLayout");
  VkPushConstantRange pcr{};
  pcr.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  pcr.size = 48;
  VkPipelineLayoutCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pi.setLayoutCount = 1;
  pi.pSetLayouts = &be.dsl[nbind];
  pi.pushConstantRangeCount = 1;
  pi.pPushConstantRanges = &pcr;
  r = be.vk.vkCreatePipelineLayout(be.dev, &pi, nullptr, &be.playout[nbind]);
  if (r != VK_SUCCESS) return vk_fail(be, r, "vkCreatePipelineLayout");
  return CTN_OK;
}

}  // namespace

bool have_shader(const char *name) { return find_blob(name) != nullptr; }

ctn_status get_pipeline(Backend &be, const char *name, const std::vector<int32_t> &spec,
                        uint32_t nbind, const Pipeline **out) {
  std::string key = name;
  for (int32_t v : spec) key += "," + std::to_string(v);
  key += "/" + std::to_string(nbind);
  auto it = be.pipelines.find(key);
  if (it != be.pipelines.end()) {
    *out = it->second;
    return CTN_OK;
  }
  const SpirvBlob *blob = find_blob(name);
  if (!blob) return be.host->set_error(CTN_ERR_INTERNAL, "vulkan: no shader '%s' built in", name);
  if (nbind > kMaxBind) return be.host->set_error(CTN_ERR_INTERNAL, "vulkan: too many bindings");
  if (ctn_status st = layout_for(be, nbind); st != CTN_OK) return st;
  VkShaderModule &mod = be.modules[name];
  if (!mod) {
    VkShaderModuleCreateInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    si.codeSize = blob->n_words * 4;
    si.pCode = blob->words;
    VkResult r = be.vk.vkCreateShaderModule(be.dev, &si, nullptr, &mod);
    if (r != VK_SUCCESS) {
      be.modules.erase(name);
      return vk_fail(be, r, "vkCreateShaderModule");
    }
  }
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    entries[i].constantID = static_cast<uint32_t>(i);
    entries[i].offset = static_cast<uint32_t>(i * 4);
    entries[i].size = 4;
  }
  VkSpecializationInfo spi{};
  spi.mapEntryCount = static_cast<uint32_t>(entries.size());
  spi.pMapEntries = entries.data();
  spi.dataSize = spec.size() * 4;
  spi.pData = spec.data();
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &spi;
  ci.layout = be.playout[nbind];
  auto p = std::make_unique<Pipeline>();
  p->layout = be.playout[nbind];
  p->nbind = nbind;
  VkResult r = be.vk.vkCreateComputePipelines(be.dev, be.pcache, 1, &ci, nullptr, &p->pipe);
  if (r != VK_SUCCESS) return vk_fail(be, r, "vkCreateComputePipelines");
  ++be.n_pipelines_created;
  *out = p.get();
  be.pipelines[key] = p.release();
  return CTN_OK;
}

void pipelines_destroy(Backend &be) {
  for (auto &[k, p] : be.pipelines) {
    be.vk.vkDestroyPipeline(be.dev, p->pipe, nullptr);
    delete p;
  }
  be.pipelines.clear();
  for (auto &[k, m] : be.modules) be.vk.vkDestroyShaderModule(be.dev, m, nullptr);
  be.modules.clear();
  for (uint32_t i = 0; i <= kMaxBind; ++i) {
    if (be.playout[i]) be.vk.vkDestroyPipelineLayout(be.dev, be.playout[i], nullptr);
    if (be.dsl[i]) be.vk.vkDestroyDescriptorSetLayout(be.dev, be.dsl[i], nullptr);
    be.playout[i] = VK_NULL_HANDLE;
    be.dsl[i] = VK_NULL_HANDLE;
  }
}

}  // namespace ctn_vk
