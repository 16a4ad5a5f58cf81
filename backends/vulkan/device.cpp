// Device setup and teardown, buffers, transfers, submission tracking and the on-disk pipeline
// cache.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "vk_backend.h"

namespace ctn_vk {

ctn_status vk_fail(Backend &be, VkResult r, const char *what) {
  ctn_status code = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                        ? CTN_ERR_OUT_OF_MEMORY
                        : CTN_ERR_INTERNAL;
  return be.host->set_error(code, "vulkan: %s failed: %s", what, vk_result_name(r));
}

namespace {

int find_memory_type(const Backend &be, uint32_t bits, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < be.memprops.memoryTypeCount; ++i)
    if ((bits >> i & 1u) && (be.memprops.memoryTypes[i].propertyFlags & want) == want)
      return static_cast<int>(i);
  return -1;
}

}  // namespace

ctn_status buffer_create(Backend &be, uint64_t bytes, bool host_visible, Buffer **out) {
  auto b = new (std::nothrow) Buffer;
  if (!b) return be.host->set_error(CTN_ERR_OUT_OF_MEMORY, "vulkan: out of memory");
  // Whole 256-byte blocks: shaders move 32-bit words, and a descriptor range never ends
  // mid-word.
  b->size = (bytes + 255) / 256 * 256;
  if (b->size == 0) b->size = 256;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = b->size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = be.vk.vkCreateBuffer(be.dev, &bi, nullptr, &b->buf);
  if (r != VK_SUCCESS) {
    delete b;
    return vk_fail(be, r, "vkCreateBuffer");
  }
  VkMemoryRequirements req{};
  be.vk.vkGetBufferMemoryRequirements(be.dev, b->buf, &req);
  int type = -1;
  bool mappable = false;
  if (host_visible) {
    type = find_memory_type(be, req.memoryTypeBits,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    mappable = true;
  } else {
    type = find_memory_type(be, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type < 0) type = find_memory_type(be, req.memoryTypeBits, 0);
    VkMemoryPropertyFlags f = type >= 0 ? be.memprops.memoryTypes[type].propertyFlags : 0;
    mappable = !be.force_staging && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
               (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  }
  if (type < 0) {
    be.vk.vkDestroyBuffer(be.dev, b->buf, nullptr);
    delete b;
    return be.host->set_error(CTN_ERR_INTERNAL, "vulkan: no memory type for a buffer");
  }
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = static_cast<uint32_t>(type);
  r = be.vk.vkAllocateMemory(be.dev, &ai, nullptr, &b->mem);
  if (r != VK_SUCCESS) {
    be.vk.vkDestroyBuffer(be.dev, b->buf, nullptr);
    delete b;
    return be.host->set_error(CTN_ERR_OUT_OF_MEMORY,
                              "vulkan: cannot allocate %" PRIu64 " bytes of device memory (%s)",
                              bytes, vk_result_name(r));
  }
  be.vk.vkBindBufferMemory(be.dev, b->buf, b->mem, 0);
  if (mappable) {
    void *p = nullptr;
    if (be.vk.vkMapMemory(be.dev, b->mem, 0, VK_WHOLE_SIZE, 0, &p) == VK_SUCCESS)
      b->map = static_cast<char *>(p);
  }
  *out = b;
  return CTN_OK;
}

void buffer_destroy(Backend &be, Buffer *b) {
  if (!b) return;
  if (b->map) be.vk.vkUnmapMemory(be.dev, b->mem);
  be.vk.vkDestroyBuffer(be.dev, b->buf, nullptr);
  be.vk.vkFreeMemory(be.dev, b->mem, nullptr);
  delete b;
}

ctn_status submit_transient(Backend &be, VkCommandBuffer cb, VkDescriptorPool pool) {
  Inflight f;
  f.cb = cb;
  f.pool = pool;
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkResult r = be.vk.vkCreateFence(be.dev, &fi, nullptr, &f.fence);
  if (r == VK_SUCCESS) {
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    r = be.vk.vkQueueSubmit(be.queue, 1, &si, f.fence);
    if (r != VK_SUCCESS) be.vk.vkDestroyFence(be.dev, f.fence, nullptr);
  }
  if (r != VK_SUCCESS) {
    be.vk.vkFreeCommandBuffers(be.dev, be.cmd_pool, 1, &cb);
    if (pool) be.vk.vkDestroyDescriptorPool(be.dev, pool, nullptr);
    return vk_fail(be, r, "vkQueueSubmit");
  }
  ++be.n_submits;
  be.inflight.push_back(f);
  // Keep the number of outstanding command buffers bounded during long eager runs.
  while (be.inflight.size() > 64) {
    Inflight &o = be.inflight.front();
    be.vk.vkWaitForFences(be.dev, 1, &o.fence, VK_TRUE, UINT64_MAX);
    be.vk.vkDestroyFence(be.dev, o.fence, nullptr);
    be.vk.vkFreeCommandBuffers(be.dev, be.cmd_pool, 1, &o.cb);
    if (o.pool) be.vk.vkDestroyDescriptorPool(be.dev, o.pool, nullptr);
    be.inflight.pop_front();
  }
  return CTN_OK;
}

ctn_status drain(Backend &be) {
  VkResult worst = VK_SUCCESS;
  while (!be.inflight.empty()) {
    Inflight &o = be.inflight.front();
    VkResult r = be.vk.vkWaitForFences(be.dev, 1, &o.fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) worst = r;
    be.vk.vkDestroyFence(be.dev, o.fence, nullptr);
    be.vk.vkFreeCommandBuffers(be.dev, be.cmd_pool, 1, &o.cb);
    if (o.pool) be.vk.vkDestroyDescriptorPool(be.dev, o.pool, nullptr);
    be.inflight.pop_front();
  }
  for (Segment *s : be.pending_segments) {
    VkResult r = be.vk.vkWaitForFences(be.dev, 1, &s->fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) worst = r;
    s->pending = false;
  }
  be.pending_segments.clear();
  if (worst != VK_SUCCESS) return vk_fail(be, worst, "waiting for the device");
  // Errors kernels found on the device (labels out of range).
  for (Kernel *k : be.checked_kernels) {
    auto *flag = reinterpret_cast<uint32_t *>(k->params->map) + 8;
    if (uint32_t row = *flag) {
      *flag = 0;
      if (k->error_kind == Kernel::kErrId)
        return be.host->set_error(CTN_ERR_INVALID_ARGUMENT,
                                  "vulkan %s: the id at position %u is outside [0, %llu)", k->op.c_str(),
                                  ~row, static_cast<unsigned long long>(k->error_limit));
      return be.host->set_error(CTN_ERR_INVALID_ARGUMENT,
                                "vulkan %s: the label of row %u is outside [0, C)", k->op.c_str(),
                                row - 1);
    }
  }
  if (be.validation && be.validation_errors.load() > 0) {
    std::lock_guard<std::mutex> lk(be.validation_mu);
    return be.host->set_error(CTN_ERR_INTERNAL,
                              "vulkan: %" PRIu64 " validation error(s); the first: %s",
                              be.validation_errors.load(), be.first_validation_error.c_str());
  }
  return CTN_OK;
}

// ---- pipeline cache on disk ------------------------------------------------------------------------

std::string cache_dir() { return ctn_backend_util::cache_directory(); }

namespace {

void mkdirs(const std::string &path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
}

}  // namespace

// Reads the cache file when its header names this device and driver (VkPipelineCacheHeader
// version one: length, version, vendor, device, UUID); anything else is ignored, as the spec
// lets drivers reject data but a corrupt file must not reach them.
void pipeline_cache_open(Backend &be) {
  std::string dir = cache_dir();
  std::vector<char> data;
  if (!dir.empty()) {
    char name[128];
    std::snprintf(name, sizeof name, "/vulkan-%04x-%04x.bin", be.props.vendorID,
                  be.props.deviceID);
    be.cache_path = dir + name;
    if (std::FILE *f = std::fopen(be.cache_path.c_str(), "rb")) {
      char buf[65536];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
      std::fclose(f);
      uint32_t hdr[4] = {};
      bool ok = data.size() >= 16 + VK_UUID_SIZE;
      if (ok) std::memcpy(hdr, data.data(), 16);
      ok = ok && hdr[0] >= 16 + VK_UUID_SIZE && hdr[0] <= data.size() &&
           hdr[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && hdr[2] == be.props.vendorID &&
           hdr[3] == be.props.deviceID &&
           std::memcmp(data.data() + 16, be.props.pipelineCacheUUID, VK_UUID_SIZE) == 0;
      if (ok) {
        be.cache_note = "loaded";
        be.cache_loaded_bytes = data.size();
      } else {
        be.cache_note = "ignored (header does not match this device)";
        data.clear();
      }
    } else {
      be.cache_note = "none yet";
    }
  } else {
    be.cache_note = "disabled (no cache directory)";
  }
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  ci.initialDataSize = data.size();
  ci.pInitialData = data.empty() ? nullptr : data.data();
  if (be.vk.vkCreatePipelineCache(be.dev, &ci, nullptr, &be.pcache) != VK_SUCCESS) {
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    be.cache_note = "ignored (rejected by the driver)";
    be.cache_loaded_bytes = 0;
    if (be.vk.vkCreatePipelineCache(be.dev, &ci, nullptr, &be.pcache) != VK_SUCCESS)
      be.pcache = VK_NULL_HANDLE;
  }
}

// Written to a temporary file and renamed, so a concurrent reader never sees half a file.
void pipeline_cache_save(Backend &be) {
  if (!be.pcache || be.cache_path.empty() || be.n_pipelines_created == 0) return;
  size_t size = 0;
  if (be.vk.vkGetPipelineCacheData(be.dev, be.pcache, &size, nullptr) != VK_SUCCESS || !size)
    return;
  std::vector<char> data(size);
  if (be.vk.vkGetPipelineCacheData(be.dev, be.pcache, &size, data.data()) != VK_SUCCESS) return;
  mkdirs(be.cache_path.substr(0, be.cache_path.rfind('/')));
  std::string tmp = be.cache_path + ".tmp." + std::to_string(getpid());
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) return;
  bool ok = std::fwrite(data.data(), 1, size, f) == size;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), be.cache_path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace ctn_vk
