// The Vulkan backend's descriptor and its backend-level slots: instance and device selection,
// buffers and transfers, options. Kernels are in k_*.cpp, command recording in record.cpp.
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>

#include "vk_backend.h"

namespace ctn_vk {

void pipeline_cache_open(Backend &be);  // device.cpp

namespace {

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                             VkDebugUtilsMessageTypeFlagsEXT,
                                             const VkDebugUtilsMessengerCallbackDataEXT *data,
                                             void *user) {
  auto *be = static_cast<Backend *>(user);
  const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    if (be->validation_errors.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lk(be->validation_mu);
      be->first_validation_error = msg;
    }
    if (be->host->log) be->host->log(CTN_LOG_ERROR, "vulkan", msg);
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    if (be->host->log) be->host->log(CTN_LOG_WARN, "vulkan", msg);
  }
  return VK_FALSE;
}

void destroy(Backend *be) {
  if (!be) return;
  if (be->dev) {
    be->vk.vkDeviceWaitIdle(be->dev);
    drain(*be);
    pipeline_cache_save(*be);
    pipelines_destroy(*be);
    buffer_destroy(*be, be->dummy);
    buffer_destroy(*be, be->staging);
    if (be->pcache) be->vk.vkDestroyPipelineCache(be->dev, be->pcache, nullptr);
    if (be->cmd_pool) be->vk.vkDestroyCommandPool(be->dev, be->cmd_pool, nullptr);
    be->vk.vkDestroyDevice(be->dev, nullptr);
  }
  if (be->messenger && be->vk.vkDestroyDebugUtilsMessengerEXT)
    be->vk.vkDestroyDebugUtilsMessengerEXT(be->instance, be->messenger, nullptr);
  if (be->instance) be->vk.vkDestroyInstance(be->instance, nullptr);
  vk_unload(be->vk);
  delete be;
}

bool has_layer(Backend &be, const char *name) {
  uint32_t n = 0;
  be.vk.vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> v(n);
  be.vk.vkEnumerateInstanceLayerProperties(&n, v.data());
  for (auto &l : v)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_instance_ext(Backend &be, const char *name) {
  uint32_t n = 0;
  be.vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> v(n);
  be.vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, v.data());
  for (auto &e : v)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

const char *kind_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

ctn_status unavailable(const ctn_host_api *host, Backend *be, const std::string &why) {
  destroy(be);
  return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: %s", why.c_str());
}

// vk_init's steps. Those returning a string return why the backend is unavailable ("" when the
// step succeeded); vk_init destroys the half-built backend then.

// The instance (with the validation layer and its messenger under CHUTNEY_VULKAN_VALIDATION)
// and the instance-level entry points.
std::string create_instance(Backend &be) {
  const char *val = std::getenv("CHUTNEY_VULKAN_VALIDATION");
  bool want_validation = val && *val && std::strcmp(val, "0") != 0;
  std::vector<const char *> layers, exts;
  if (want_validation) {
    if (!has_layer(be, "VK_LAYER_KHRONOS_validation"))
      return "CHUTNEY_VULKAN_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed (Debian: "
             "vulkan-validationlayers)";
    layers.push_back("VK_LAYER_KHRONOS_validation");
    if (has_instance_ext(be, VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
      exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "chutney";
  app.pEngineName = "chutney";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici{};
  ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ici.pApplicationInfo = &app;
  ici.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  ici.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ici.ppEnabledExtensionNames = exts.data();
  VkResult r = be.vk.vkCreateInstance(&ici, nullptr, &be.instance);
  if (r != VK_SUCCESS)
    return std::string("vkCreateInstance failed (") + vk_result_name(r) +
           "): no Vulkan driver (ICD) is installed or usable";
  if (std::string why; !vk_load_instance(be.vk, be.instance, &why))
    return why.empty() ? "the instance's entry points did not load" : why;
  if (!exts.empty() && be.vk.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT mi{};
    mi.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = on_validation;
    mi.pUserData = &be;
    if (be.vk.vkCreateDebugUtilsMessengerEXT(be.instance, &mi, nullptr, &be.messenger) ==
        VK_SUCCESS)
      be.validation = true;
  }
  return "";
}

// CHUTNEY_VULKAN_DEVICE picks an index; else discrete > integrated > virtual > CPU, among the
// Vulkan 1.1 devices with a compute queue. Sets be.phys.
std::string pick_device(Backend &be) {
  uint32_t ndev = 0;
  VkResult r = be.vk.vkEnumeratePhysicalDevices(be.instance, &ndev, nullptr);
  if (r != VK_SUCCESS || ndev == 0) return "no Vulkan device (vkEnumeratePhysicalDevices found none)";
  std::vector<VkPhysicalDevice> devs(ndev);
  be.vk.vkEnumeratePhysicalDevices(be.instance, &ndev, devs.data());
  int pick = -1, best = -1;
  const char *want = std::getenv("CHUTNEY_VULKAN_DEVICE");
  for (uint32_t i = 0; i < ndev; ++i) {
    VkPhysicalDeviceProperties p{};
    be.vk.vkGetPhysicalDeviceProperties(devs[i], &p);
    if (p.apiVersion < VK_API_VERSION_1_1) continue;
    uint32_t nq = 0;
    be.vk.vkGetPhysicalDeviceQueueFamilyProperties(devs[i], &nq, nullptr);
    std::vector<VkQueueFamilyProperties> q(nq);
    be.vk.vkGetPhysicalDeviceQueueFamilyProperties(devs[i], &nq, q.data());
    bool compute = false;
    for (auto &f : q) compute = compute || (f.queueFlags & VK_QUEUE_COMPUTE_BIT);
    if (!compute) continue;
    int score = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU     ? 4
                : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 3
                : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU    ? 2
                                                                         : 1;
    if (want && *want) score = std::atoi(want) == static_cast<int>(i) ? 100 : 0;
    if (score > best) best = score, pick = static_cast<int>(i);
  }
  if (pick < 0 || best == 0)
    return want && *want ? "CHUTNEY_VULKAN_DEVICE names no usable device" : "no Vulkan 1.1 device with a compute queue";
  be.phys = devs[static_cast<size_t>(pick)];
  return "";
}

// An extension struct Ext filled by a *2 query (`query`) through the pNext of its Outer struct.
template <class Outer, class Ext, class Query>
Ext query_chained(VkStructureType outer_type, VkStructureType ext_type, Query query) {
  Ext ext{};
  ext.sType = ext_type;
  Outer outer{};
  outer.sType = outer_type;
  outer.pNext = &ext;
  query(&outer);
  return ext;
}

// The chosen device's properties, features and limits as the kernels use them.
void read_device_limits(Backend &be) {
  be.vk.vkGetPhysicalDeviceProperties(be.phys, &be.props);
  be.vk.vkGetPhysicalDeviceMemoryProperties(be.phys, &be.memprops);
  if (be.vk.vkGetPhysicalDeviceProperties2) {
    const auto sg = query_chained<VkPhysicalDeviceProperties2, VkPhysicalDeviceSubgroupProperties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
        [&](VkPhysicalDeviceProperties2 *p) { be.vk.vkGetPhysicalDeviceProperties2(be.phys, p); });
    be.subgroup_size = sg.subgroupSize;
    be.subgroup_ballot = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (sg.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
  }
  VkPhysicalDeviceFeatures feats{};
  be.vk.vkGetPhysicalDeviceFeatures(be.phys, &feats);
  be.has_f64 = feats.shaderFloat64 == VK_TRUE && !ctn_backend_util::env_flag("CHUTNEY_VULKAN_NO_F64");
  if (be.vk.vkGetPhysicalDeviceFeatures2) {
    const auto s16 = query_chained<VkPhysicalDeviceFeatures2, VkPhysicalDevice16BitStorageFeatures>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        [&](VkPhysicalDeviceFeatures2 *f) { be.vk.vkGetPhysicalDeviceFeatures2(be.phys, f); });
    be.has_16bit = s16.storageBuffer16BitAccess == VK_TRUE &&
                   !ctn_backend_util::env_flag("CHUTNEY_VULKAN_NO_16BIT");
  }
  const VkPhysicalDeviceLimits &lim = be.props.limits;
  be.max_invocations = lim.maxComputeWorkGroupInvocations;
  be.max_wg_x = lim.maxComputeWorkGroupSize[0];
  be.max_wg_y = lim.maxComputeWorkGroupSize[1];
  be.max_groups_x = std::min<uint32_t>(lim.maxComputeWorkGroupCount[0], 65535);
  be.max_groups_y = std::min<uint32_t>(lim.maxComputeWorkGroupCount[1], 65535);
  be.max_groups_z = std::min<uint32_t>(lim.maxComputeWorkGroupCount[2], 65535);
  // Raspberry Pi-class budget: never more than 16 KiB of shared memory, whatever is offered.
  be.max_shared = std::min<uint32_t>(lim.maxComputeSharedMemorySize, 16384);
  be.max_range = lim.maxStorageBufferRange;
  if (const char *mr = std::getenv("CHUTNEY_VULKAN_MAX_RANGE"); mr && *mr)  // tests: smaller windows
    be.max_range = std::min<uint64_t>(be.max_range, std::strtoull(mr, nullptr, 10));
  be.align = std::max<uint64_t>(lim.minStorageBufferOffsetAlignment, 4);
  uint32_t wg = 1;
  while (wg * 2 <= 256 && wg * 2 <= be.max_invocations && wg * 2 <= be.max_wg_x) wg *= 2;
  be.wg1d = wg;
}

// The logical device on a compute queue family (a compute-only one first: async compute on
// desktop GPUs), its device-level entry points and its queue.
std::string create_device(Backend &be) {
  uint32_t nq = 0;
  be.vk.vkGetPhysicalDeviceQueueFamilyProperties(be.phys, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  be.vk.vkGetPhysicalDeviceQueueFamilyProperties(be.phys, &nq, qf.data());
  int fam = -1;
  for (uint32_t i = 0; i < nq && fam < 0; ++i)
    if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
      fam = static_cast<int>(i);
  for (uint32_t i = 0; i < nq && fam < 0; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = static_cast<int>(i);
  be.qfamily = static_cast<uint32_t>(fam);
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = be.qfamily;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkPhysicalDeviceFeatures enable{};
  enable.shaderFloat64 = be.has_f64 ? VK_TRUE : VK_FALSE;
  VkPhysicalDevice16BitStorageFeatures s16{};  // enabled only when reported
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  s16.storageBuffer16BitAccess = be.has_16bit ? VK_TRUE : VK_FALSE;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  if (be.has_16bit) di.pNext = &s16;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.pEnabledFeatures = &enable;
  VkResult r = be.vk.vkCreateDevice(be.phys, &di, nullptr, &be.dev);
  if (r != VK_SUCCESS) return std::string("vkCreateDevice failed: ") + vk_result_name(r);
  if (std::string why; !vk_load_device(be.vk, be.dev, &why))
    return why.empty() ? "the device's entry points did not load" : why;
  be.vk.vkGetDeviceQueue(be.dev, be.qfamily, 0, &be.queue);
  return "";
}

std::string describe_device(const Backend &be) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s (%s, Vulkan %u.%u.%u), f64 %s, f16/bf16 storage %s, max storage range %" PRIu64
                " MiB, shared %u KiB, pipeline cache %s%s",
                be.props.deviceName, kind_name(be.props.deviceType),
                VK_API_VERSION_MAJOR(be.props.apiVersion),
                VK_API_VERSION_MINOR(be.props.apiVersion),
                VK_API_VERSION_PATCH(be.props.apiVersion), be.has_f64 ? "yes" : "no",
                be.has_16bit ? "yes" : "no",
                be.max_range >> 20, be.max_shared >> 10, be.cache_note.c_str(),
                be.validation ? ", validation on" : "");
  return buf;
}

ctn_status vk_init(const ctn_host_api *host, const ctn_backend_config *, void **out_state) {
  if (!host || !host->set_error) return CTN_ERR_INVALID_ARGUMENT;
  Backend *be = nullptr;
  try {
    if (!out_state) return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan init: NULL out_state");
    be = new Backend;
    be->host = host;
    std::string why;
    if (!vk_load_global(be->vk, &why)) return unavailable(host, be, why);
    if (why = create_instance(*be); !why.empty()) return unavailable(host, be, why);
    if (why = pick_device(*be); !why.empty()) return unavailable(host, be, why);
    read_device_limits(*be);
    if (why = create_device(*be); !why.empty()) return unavailable(host, be, why);
    VkCommandPoolCreateInfo pi{};
    pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = be->qfamily;
    VkResult r = be->vk.vkCreateCommandPool(be->dev, &pi, nullptr, &be->cmd_pool);
    if (r != VK_SUCCESS) {
      ctn_status st = vk_fail(*be, r, "vkCreateCommandPool");
      destroy(be);
      return st;
    }
    if (const char *st = std::getenv("CHUTNEY_VULKAN_STAGING"); st && std::strcmp(st, "1") == 0)
      be->force_staging = true;
    if (const char *v = std::getenv("CHUTNEY_VULKAN_PLACEMENT"); v && *v) {
      if (!ctn_backend_util::parse_placement(v, &be->policy.auto_mode) && host->log)
        host->log(CTN_LOG_WARN, "vulkan", "CHUTNEY_VULKAN_PLACEMENT must be always or auto");
    }
    if (ctn_status st = buffer_create(*be, 256, true, &be->dummy); st != CTN_OK) {
      destroy(be);
      return st;
    }
    std::memset(be->dummy->map, 0, 256);
    pipeline_cache_open(*be);
    be->description = describe_device(*be);
    *out_state = be;
    return CTN_OK;
  } catch (const std::bad_alloc &) {
    destroy(be);
    return host->set_error(CTN_ERR_OUT_OF_MEMORY, "vulkan init: out of memory");
  } catch (const std::exception &e) {
    destroy(be);
    return host->set_error(CTN_ERR_INTERNAL, "vulkan init: %s", e.what());
  }
}

void vk_shutdown(void *state) {
  try {
    destroy(static_cast<Backend *>(state));
  } catch (...) {
  }
}

ctn_status vk_buffer_alloc(void *state, uint64_t bytes, void **out_handle) {
  auto *be = static_cast<Backend *>(state);
  return ctn_backend_util::guarded(be->host, "vulkan", [&]() -> ctn_status {
    if (!out_handle) return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan: NULL out_handle");
    Buffer *b = nullptr;
    if (ctn_status st = buffer_create(*be, bytes, false, &b); st != CTN_OK) return st;
    *out_handle = b;
    return CTN_OK;
  });
}

void vk_buffer_free(void *state, void *handle) {
  auto *be = static_cast<Backend *>(state);
  if (!handle) return;
  try {
    // Submitted work may still read it.
    if (!be->inflight.empty() || !be->pending_segments.empty()) drain(*be);
    buffer_destroy(*be, static_cast<Buffer *>(handle));
  } catch (...) {
  }
}

// Copies through the staging buffer, in pieces of at most its size.
ctn_status staged_copy(Backend &be, Buffer *dev, uint64_t offset, const void *src, void *dst,
                       uint64_t bytes) {
  const uint64_t chunk = std::min<uint64_t>(bytes, 64u << 20);
  if (!be.staging || be.staging->size < chunk) {
    buffer_destroy(be, be.staging);
    be.staging = nullptr;
    if (ctn_status st = buffer_create(be, chunk, true, &be.staging); st != CTN_OK) return st;
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = std::min(chunk, bytes - done);
    if (src) std::memcpy(be.staging->map, static_cast<const char *>(src) + done, n);
    VkCommandBuffer cb;
    if (ctn_status st = begin_cb(be, &cb); st != CTN_OK) return st;
    cmd_barrier(be, cb, true);
    VkBufferCopy region{};
    region.size = n;
    if (src) {
      region.dstOffset = offset + done;
      be.vk.vkCmdCopyBuffer(cb, be.staging->buf, dev->buf, 1, &region);
    } else {
      region.srcOffset = offset + done;
      be.vk.vkCmdCopyBuffer(cb, dev->buf, be.staging->buf, 1, &region);
    }
    cmd_barrier(be, cb, true);
    be.vk.vkEndCommandBuffer(cb);
    if (ctn_status st = submit_transient(be, cb, VK_NULL_HANDLE); st != CTN_OK) return st;
    if (ctn_status st = drain(be); st != CTN_OK) return st;
    if (dst) std::memcpy(static_cast<char *>(dst) + done, be.staging->map, n);
    done += n;
  }
  return CTN_OK;
}

// upload (src) or download (dst): after the submitted work, through the mapping or the staging
// buffer.
ctn_status transfer(void *state, void *handle, uint64_t offset, const void *src, void *dst,
                    uint64_t bytes, const char *what) {
  auto *be = static_cast<Backend *>(state);
  return ctn_backend_util::guarded(be->host, what, [&]() -> ctn_status {
    auto *b = static_cast<Buffer *>(handle);
    if (!b || (!src && !dst && bytes) || offset + bytes > b->size)
      return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s: bad buffer or range", what);
    if (ctn_status st = drain(*be); st != CTN_OK) return st;
    if (!bytes) return CTN_OK;
    if (b->map) {
      if (src) std::memcpy(b->map + offset, src, bytes);
      else std::memcpy(dst, b->map + offset, bytes);
      return CTN_OK;
    }
    return staged_copy(*be, b, offset, src, dst, bytes);
  });
}

ctn_status vk_upload(void *state, void *handle, uint64_t offset, const void *src, uint64_t bytes) {
  return transfer(state, handle, offset, src, nullptr, bytes, "vulkan upload");
}

ctn_status vk_download(void *state, void *handle, uint64_t offset, void *dst, uint64_t bytes) {
  return transfer(state, handle, offset, nullptr, dst, bytes, "vulkan download");
}

ctn_status vk_synchronize(void *state) {
  auto *be = static_cast<Backend *>(state);
  try {
    return drain(*be);
  } catch (const std::exception &e) {
    return be->host->set_error(CTN_ERR_INTERNAL, "vulkan synchronize: %s", e.what());
  }
}

ctn_status vk_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  auto *be = static_cast<Backend *>(state);
  const ctn_host_api *host = be->host;
  return ctn_backend_util::guarded(host, "vulkan get_kernel", [&]() -> ctn_status {
    if (!sig || !out || !sig->op || !sig->output || !sig->attrs || (sig->n_inputs && !sig->inputs))
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan get_kernel: incomplete signature");
    if (sig->n_inputs > 8) return decline(*be, sig, "more than 8 inputs");
    for (uint32_t i = 0; i <= sig->n_inputs; ++i) {
      const ctn_tensor_desc &d = i < sig->n_inputs ? sig->inputs[i] : *sig->output;
      // Each op family declines the 16-bit floats and i8 where it lacks them (or the device lacks
      // storageBuffer16BitAccess).
      if (ctn_status st = check_operand_type(host, "vulkan", sig->op, i, d, true); st != CTN_OK) return st;
      for (uint32_t k = 0; k < d.ndim; ++k)
        if (d.shape[k] < 0)
          return host->set_error(CTN_ERR_SHAPE, "vulkan %s: operand %u has a negative dim", sig->op, i);
      // 32-bit indexing in the shaders.
      if (desc_numel(d) >= (int64_t(1) << 31))
        return decline(*be, sig, "operand %u has 2^31 elements or more", i);
    }
    // "auto": never slower than the CPU (the table is measured at the first op offered).
    if (be->policy.auto_mode) {
      if (!be->policy.ready()) policy_prepare(*be);
      if (std::string why = be->policy.decline_reason(sig); !why.empty())
        return decline(*be, sig, "%s", why.c_str());
    }
    bool handled = false;
    using Maker = ctn_status (*)(Backend &, const ctn_op_signature *, ctn_kernel *, bool *);
    for (Maker m : {make_elementwise_kernel, make_reduce_kernel, make_shape_kernel, make_matmul_kernel,
                     make_nn_kernel}) {
      ctn_status st = m(*be, sig, out, &handled);
      if (handled) return st;
    }
    return decline(*be, sig, "op not implemented by this backend");
  }, sig && sig->op ? sig->op : "?");
}

ctn_status vk_set_option(void *state, const char *key, const char *value) {
  auto *be = static_cast<Backend *>(state);
  const ctn_host_api *host = be->host;
  if (!key || !value) return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan set_option: NULL key or value");
  if (std::strcmp(key, "placement") == 0) {
    // "auto" declines the op classes the device measured slower at; "always" takes every op.
    if (!ctn_backend_util::parse_placement(value, &be->policy.auto_mode))
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan: placement must be 'always' or 'auto', got '%s'", value);
    return CTN_OK;
  }
  if (std::strcmp(key, "policy") == 0) {
    // prepare: load or measure now (chutney plugins --explain); remeasure: measure again.
    bool re = std::strcmp(value, "remeasure") == 0;
    if (!re && std::strcmp(value, "prepare") != 0)
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan: policy takes 'prepare' or 'remeasure', got '%s'", value);
    try {
      if (re || !be->policy.ready()) policy_prepare(*be, re);
    } catch (const std::exception &e) {
      return host->set_error(CTN_ERR_INTERNAL, "vulkan: measuring the placement policy: %s", e.what());
    }
    return CTN_OK;
  }
  if (std::strcmp(key, "record") == 0) {
    // "on": plan segments become one command buffer; "off": one submission per node (benchmarks).
    if (std::strcmp(value, "on") == 0) be->record = true;
    else if (std::strcmp(value, "off") == 0) be->record = false;
    else return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan: record must be 'on' or 'off', got '%s'", value);
    return CTN_OK;
  }
  if (std::strcmp(key, "validation_check") == 0) {
    // Tests assert "zero validation errors" through the public API with this key.
    if (!be->validation)
      return host->set_error(CTN_ERR_STATE, "vulkan: validation is off (set CHUTNEY_VULKAN_VALIDATION=1)");
    uint64_t n = be->validation_errors.load();
    if (n == 0) return CTN_OK;
    std::lock_guard<std::mutex> lk(be->validation_mu);
    return host->set_error(CTN_ERR_INTERNAL, "vulkan: %" PRIu64 " validation error(s); the first: %s", n,
                           be->first_validation_error.c_str());
  }
  return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                         "vulkan: unknown option '%s' (placement, policy, record, validation_check)", key);
}

uint64_t proc_validation_errors(void *state) { return static_cast<Backend *>(state)->validation_errors.load(); }
int proc_validation_enabled(void *state) { return static_cast<Backend *>(state)->validation ? 1 : 0; }
uint64_t proc_submits(void *state) { return static_cast<Backend *>(state)->n_submits; }
uint64_t proc_pipelines_created(void *state) { return static_cast<Backend *>(state)->n_pipelines_created; }
const char *proc_cache_note(void *state) { return static_cast<Backend *>(state)->cache_note.c_str(); }
const char *proc_cache_path(void *state) { return static_cast<Backend *>(state)->cache_path.c_str(); }
// The policy table as JSON (benchmarks), measuring it first if needed; and what it measured and
// decided for ctn_context_plugin_report (`chutney plugins --explain`), which never measures.
const char *proc_policy_report(void *state) {
  static thread_local std::string s;
  auto *be = static_cast<Backend *>(state);
  try {
    if (!be->policy.ready()) policy_prepare(*be);
    s = be->policy.report_json();
  } catch (...) {
    s.clear();
  }
  return s.c_str();
}
const char *proc_placement_explain(void *state) {
  return static_cast<Backend *>(state)->policy.explain_cstr("CHUTNEY_VULKAN_PLACEMENT");
}

CTN_GET_PROC_ADDRESS(vk_get_proc_address, interop_proc,
    CTN_PROC_ENTRY("ctn_vulkan_validation_errors", proc_validation_errors),
    CTN_PROC_ENTRY("ctn_vulkan_validation_enabled", proc_validation_enabled),
    CTN_PROC_ENTRY("ctn_vulkan_submits", proc_submits),
    CTN_PROC_ENTRY("ctn_vulkan_pipelines_created", proc_pipelines_created),
    CTN_PROC_ENTRY("ctn_vulkan_cache_note", proc_cache_note),
    CTN_PROC_ENTRY("ctn_vulkan_cache_path", proc_cache_path),
    CTN_PROC_ENTRY("ctn_vulkan_policy_report", proc_policy_report),
    CTN_PROC_ENTRY("ctn_placement_explain", proc_placement_explain))

// Constant-initialised: no code runs when the plugin is loaded.
constexpr ctn_backend_desc kDesc = CTN_BACKEND_DESC("vulkan", 0, vk, vk_synchronize, plan_prepare,
                                                    plan_run, plan_release);

}  // namespace
}  // namespace ctn_vk

CTN_BACKEND_PLUGIN_QUERY(ctn_vk::kDesc)
