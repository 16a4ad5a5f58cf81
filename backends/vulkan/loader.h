// The Vulkan loader, opened with dlopen at init: a table of entry points filled through
// vkGetInstanceProcAddr / vkGetDeviceProcAddr (the volk approach), so the plugin has no link-time
// dependency on libvulkan and a machine without it gets a status instead of a loader failure.
#ifndef CTN_VK_LOADER_H
#define CTN_VK_LOADER_H

#include <vulkan/vulkan.h>

#include <string>

namespace ctn_vk {

#define CTN_VK_GLOBAL_FNS(X)                \
  X(vkCreateInstance)                       \
  X(vkEnumerateInstanceLayerProperties)     \
  X(vkEnumerateInstanceExtensionProperties)

#define CTN_VK_INSTANCE_FNS(X)                  \
  X(vkDestroyInstance)                          \
  X(vkEnumeratePhysicalDevices)                 \
  X(vkGetPhysicalDeviceProperties)              \
  X(vkGetPhysicalDeviceFeatures)                \
  X(vkGetPhysicalDeviceQueueFamilyProperties)   \
  X(vkGetPhysicalDeviceMemoryProperties)        \
  X(vkCreateDevice)                             \
  X(vkGetDeviceProcAddr)

#define CTN_VK_DEVICE_FNS(X)          \
  X(vkDestroyDevice)                  \
  X(vkGetDeviceQueue)                 \
  X(vkCreateBuffer)                   \
  X(vkDestroyBuffer)                  \
  X(vkGetBufferMemoryRequirements)    \
  X(vkAllocateMemory)                 \
  X(vkFreeMemory)                     \
  X(vkBindBufferMemory)               \
  X(vkMapMemory)                      \
  X(vkUnmapMemory)                    \
  X(vkCreateCommandPool)              \
  X(vkDestroyCommandPool)             \
  X(vkAllocateCommandBuffers)         \
  X(vkFreeCommandBuffers)             \
  X(vkBeginCommandBuffer)             \
  X(vkEndCommandBuffer)               \
  X(vkCmdBindPipeline)                \
  X(vkCmdBindDescriptorSets)          \
  X(vkCmdPushConstants)               \
  X(vkCmdDispatch)                    \
  X(vkCmdPipelineBarrier)             \
  X(vkCmdCopyBuffer)                  \
  X(vkCmdFillBuffer)                  \
  X(vkQueueSubmit)                    \
  X(vkDeviceWaitIdle)                 \
  X(vkCreateFence)                    \
  X(vkDestroyFence)                   \
  X(vkWaitForFences)                  \
  X(vkResetFences)                    \
  X(vkGetFenceStatus)                 \
  X(vkCreateShaderModule)             \
  X(vkDestroyShaderModule)            \
  X(vkCreateDescriptorSetLayout)      \
  X(vkDestroyDescriptorSetLayout)     \
  X(vkCreatePipelineLayout)           \
  X(vkDestroyPipelineLayout)          \
  X(vkCreateComputePipelines)         \
  X(vkDestroyPipeline)                \
  X(vkCreatePipelineCache)            \
  X(vkDestroyPipelineCache)           \
  X(vkGetPipelineCacheData)           \
  X(vkCreateDescriptorPool)           \
  X(vkDestroyDescriptorPool)          \
  X(vkAllocateDescriptorSets)         \
  X(vkUpdateDescriptorSets)

#define CTN_VK_DECLARE(name) PFN_##name name = nullptr;

struct Vk {
  void *lib = nullptr;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  CTN_VK_GLOBAL_FNS(CTN_VK_DECLARE)
  CTN_VK_INSTANCE_FNS(CTN_VK_DECLARE)
  CTN_VK_DEVICE_FNS(CTN_VK_DECLARE)
  // VK_EXT_debug_utils (validation runs only).
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2 = nullptr;  // Vulkan 1.1, optional
  PFN_vkGetPhysicalDeviceFeatures2 vkGetPhysicalDeviceFeatures2 = nullptr;      // Vulkan 1.1, optional
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;
};

// Opens the loader (CHUTNEY_VULKAN_LOADER overrides the file name, for tests) and fills the
// global entry points. false with *why ("libvulkan.so.1 not found") otherwise.
bool vk_load_global(Vk &vk, std::string *why);
// Instance- and device-level entry points; false names the first one missing.
bool vk_load_instance(Vk &vk, VkInstance instance, std::string *why);
bool vk_load_device(Vk &vk, VkDevice device, std::string *why);
void vk_unload(Vk &vk);

const char *vk_result_name(VkResult r);

}  // namespace ctn_vk

#endif
