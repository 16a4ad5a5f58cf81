#include "loader.h"

#include <dlfcn.h>

#include <cstdlib>

namespace ctn_vk {

// Loads vk.fn with get(handle, "fn"); when it is missing, *why = what + "fn" + tail and the
// loader returns false.
#define CTN_VK_LOAD_WITH(get, handle, what, tail, fn)                  \
  vk.fn = reinterpret_cast<PFN_##fn>(vk.get(handle, #fn));             \
  if (!vk.fn) {                                                         \
    *why = what + std::string(#fn) + tail;                              \
    return false;                                                       \
  }
// The three tables (loader.h): the global functions of library `name`, the instance's and the
// device's.
#define CTN_VK_LOAD_GLOBAL(fn) \
  CTN_VK_LOAD_WITH(vkGetInstanceProcAddr, VK_NULL_HANDLE, std::string(name) + ": ", " is missing", \
                   fn)
#define CTN_VK_LOAD_INSTANCE(fn) \
  CTN_VK_LOAD_WITH(vkGetInstanceProcAddr, instance, "the Vulkan loader lacks ", "", fn)
#define CTN_VK_LOAD_DEVICE(fn) \
  CTN_VK_LOAD_WITH(vkGetDeviceProcAddr, device, "the Vulkan device lacks ", "", fn)

bool vk_load_global(Vk &vk, std::string *why) {
  const char *env = std::getenv("CHUTNEY_VULKAN_LOADER");
  const char *name = env && *env ? env : "libvulkan.so.1";
  vk.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!vk.lib) {
    *why = std::string(name) + " not found";
    if (const char *e = dlerror()) *why += std::string(" (") + e + ")";
    return false;
  }
  vk.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(vk.lib, "vkGetInstanceProcAddr"));
  if (!vk.vkGetInstanceProcAddr) {
    *why = std::string(name) + " has no vkGetInstanceProcAddr";
    return false;
  }
  CTN_VK_GLOBAL_FNS(CTN_VK_LOAD_GLOBAL)
  return true;
}

bool vk_load_instance(Vk &vk, VkInstance instance, std::string *why) {
  CTN_VK_INSTANCE_FNS(CTN_VK_LOAD_INSTANCE)
  vk.vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vk.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
  vk.vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
      vk.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
  vk.vkGetPhysicalDeviceProperties2 = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties2>(
      vk.vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceProperties2"));
  vk.vkGetPhysicalDeviceFeatures2 = reinterpret_cast<PFN_vkGetPhysicalDeviceFeatures2>(
      vk.vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceFeatures2"));
  return true;
}

bool vk_load_device(Vk &vk, VkDevice device, std::string *why) {
  CTN_VK_DEVICE_FNS(CTN_VK_LOAD_DEVICE)
  return true;
}

#undef CTN_VK_LOAD_GLOBAL
#undef CTN_VK_LOAD_INSTANCE
#undef CTN_VK_LOAD_DEVICE
#undef CTN_VK_LOAD_WITH

void vk_unload(Vk &vk) {
  if (vk.lib) dlclose(vk.lib);
  vk = Vk{};
}

const char *vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult(other)";
  }
}

}  // namespace ctn_vk
