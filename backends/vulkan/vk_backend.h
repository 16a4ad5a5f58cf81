// Internal declarations of the Vulkan backend. Nothing here crosses the ABI.
#ifndef CTN_VK_BACKEND_H
#define CTN_VK_BACKEND_H

#include <chutney/backend.h>
#include <chutney/ops.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "loader.h"
#include "../common/kernel_util.h"
#include "../common/placement_policy.h"

namespace ctn_vk {

// Shared descriptor helpers and kernel-maker scaffolding (backends/common/desc_util.h,
// kernel_util.h).
using namespace ctn_backend_util;

// A device buffer: what buffer_alloc hands out as the handle kernels receive in desc.data.
struct Buffer {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  uint64_t size = 0;
  char *map = nullptr;  // persistently mapped when the memory is host-visible
};

struct Pipeline {
  VkPipeline pipe = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  uint32_t nbind = 0;
};

// Operands a dispatch binds: inputs 0..7, the output, the kernel's parameter block, the
// workspace, or a dummy buffer for bindings an op does not use.
enum Operand : int8_t { kOut = 8, kParams = 9, kWork = 10, kNone = 11 };

struct Bind {
  int8_t opnd = kNone;
  uint32_t unit = 4;    // bytes per shader element: the push-constant offset is in these units
  uint64_t rel = 0;     // bytes from the operand's first byte
  uint64_t range = 4;   // bytes the dispatch may touch from there
};

constexpr int kMaxBind = 8;

struct Cmd {
  enum Kind { kDispatch, kFill, kCopy } kind = kDispatch;
  // dispatch
  const Pipeline *pipe = nullptr;
  uint32_t nb = 0;
  Bind b[kMaxBind];
  uint32_t base = 0, count = 0, e2 = 0, e3 = 0;
  uint32_t gx = 1, gy = 1, gz = 1;
  // fill (value over [rel, rel + size) of dst) and copy (regions relative to src and dst)
  int8_t src = kNone, dst = kNone;
  uint64_t rel = 0, size = 0;
  uint32_t value = 0;
  std::vector<VkBufferCopy> regions;
};

struct Backend;

// The state of one ctn_kernel: the commands of the op, specialised for its shapes.
struct Kernel {
  Backend *be = nullptr;
  std::string op;
  std::vector<Cmd> cmds;
  Buffer *params = nullptr;
  bool checks_error = false;  // params word 8 is an error flag written by the shader
  // What the flag means: kErrLabel: row + 1 of a cross-entropy label outside [0, C);
  // kErrId: ~position of the first embedding id outside [0, error_limit).
  enum ErrorKind { kErrLabel, kErrId } error_kind = kErrLabel;
  uint64_t error_limit = 0;
  uint32_t n_dispatch() const {
    uint32_t n = 0;
    for (const Cmd &c : cmds) n += c.kind == Cmd::kDispatch;
    return n;
  }
};

// Submitted work not yet known to be complete; its transient objects go when it is.
struct Inflight {
  VkFence fence = VK_NULL_HANDLE;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
};

// A recorded plan segment (plan_prepare).
struct Segment {
  bool recorded = true;  // false: per-node submission (option record=off)
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  bool pending = false;
  std::vector<ctn_plan_call> calls;
  std::vector<VkDescriptorPool> foreign_pools;  // op libraries' kernels' pools (interop.cpp)
};

struct Backend {
  const ctn_host_api *host = nullptr;
  Vk vk;
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkDevice dev = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t qfamily = 0;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties memprops{};
  bool has_f64 = false;
  // storageBuffer16BitAccess (VK_KHR_16bit_storage, core in 1.1), enabled at device creation
  // when reported: the f16/bf16 shaders (16-bit storage, f32 arithmetic). Off with
  // CHUTNEY_VULKAN_NO_16BIT=1.
  bool has_16bit = false;
  // Subgroups (Vulkan 1.1): size and whether compute shaders have the ballot operations.
  uint32_t subgroup_size = 0;
  bool subgroup_ballot = false;
  // Limits the kernels respect.
  uint32_t max_invocations = 128, max_wg_x = 128, max_wg_y = 128, max_groups_x = 65535,
           max_groups_y = 65535, max_groups_z = 65535, max_shared = 16384;
  uint64_t max_range = 1u << 27, align = 256;
  uint32_t wg1d = 128;  // workgroup size of 1-D kernels
  uint32_t mem_device = 0, mem_host = 0;
  bool device_mappable = false;
  VkCommandPool cmd_pool = VK_NULL_HANDLE;
  VkPipelineCache pcache = VK_NULL_HANDLE;
  std::string cache_path;
  std::string cache_note;  // what happened to the cache file at start (for describe/tests)
  uint64_t cache_loaded_bytes = 0;
  std::map<std::string, VkShaderModule> modules;
  std::map<std::string, Pipeline *> pipelines;
  VkDescriptorSetLayout dsl[kMaxBind + 1] = {};
  VkPipelineLayout playout[kMaxBind + 1] = {};
  Buffer *dummy = nullptr;
  Buffer *staging = nullptr;
  std::deque<Inflight> inflight;
  std::set<Segment *> pending_segments;
  std::set<Kernel *> checked_kernels;
  // Validation (CHUTNEY_VULKAN_VALIDATION=1).
  bool validation = false;
  std::atomic<uint64_t> validation_errors{0};
  std::mutex validation_mu;
  std::string first_validation_error;
  // Options.
  // "auto" placement (backends/common/placement_policy.h; default): ops of a class where the
  // device measured slower than the host are declined. auto_mode false: "always".
  ctn_backend_util::PlacementPolicy policy;
  bool record = true;
  bool force_staging = false;
  // Counters for tests and benchmarks.
  uint64_t n_submits = 0, n_pipelines_created = 0;
  std::string description;
};

// ---- device.cpp ---------------------------------------------------------------------------------
ctn_status buffer_create(Backend &be, uint64_t bytes, bool host_visible, Buffer **out);
void buffer_destroy(Backend &be, Buffer *b);
// Waits for every submission; reports kernel errors (bad labels) and validation errors.
ctn_status drain(Backend &be);
// Submits `cb`; fence and transient objects are tracked in be.inflight.
ctn_status submit_transient(Backend &be, VkCommandBuffer cb, VkDescriptorPool pool);
ctn_status vk_fail(Backend &be, VkResult r, const char *what);
void pipeline_cache_save(Backend &be);
// CHUTNEY_CACHE_DIR, else $XDG_CACHE_HOME/chutney, else ~/.cache/chutney ("" without HOME).
std::string cache_dir();

// ---- policy.cpp ---------------------------------------------------------------------------------
// Loads the cached placement policy of this device + driver or measures it now.
void policy_prepare(Backend &be, bool remeasure = false);

// ---- pipelines.cpp ------------------------------------------------------------------------------
// The pipeline of shader `name` (see meson.build) with specialisation constants spec[0..] at
// constant ids 0.. (0 and 1 are the workgroup size); created once, through the pipeline cache.
ctn_status get_pipeline(Backend &be, const char *name, const std::vector<int32_t> &spec,
                        uint32_t nbind, const Pipeline **out);
bool have_shader(const char *name);
void pipelines_destroy(Backend &be);

// ---- record.cpp ---------------------------------------------------------------------------------
void cmd_barrier(Backend &be, VkCommandBuffer cb, bool from_host_or_all);
ctn_status record_kernel(Backend &be, VkCommandBuffer cb, VkDescriptorPool pool,
                         const Kernel &k, const ctn_kernel_args &args);
// A pool of n_sets storage-buffer descriptor sets holding n_desc descriptors (0: n_sets * kMaxBind)
// in all; VK_NULL_HANDLE for no sets. `what` names the call in the error.
ctn_status create_descriptor_pool(Backend &be, uint32_t n_sets, VkDescriptorPool *out,
                                  uint32_t n_desc = 0, const char *what = "vkCreateDescriptorPool");
ctn_status begin_cb(Backend &be, VkCommandBuffer *out);
ctn_kernel_fn kernel_entry();
void kernel_release(void *state);
ctn_status plan_prepare(void *state, uint32_t n, const ctn_plan_call *calls, void **out);
ctn_status plan_run(void *state, void *segment);
void plan_release(void *state, void *segment);

// ---- interop.cpp (abi/chutney/vulkan.h) ---------------------------------------------------------
// The "ctn_vulkan_interop" extra for get_proc_address; nullptr for other names.
void *interop_proc(const char *name);
// Records an op library's kernel into a segment's command buffer (its fn records through the
// hook, which hands out `cb`); descriptor pools it asks for are appended to `pools`.
ctn_status record_foreign(Backend &be, VkCommandBuffer cb, std::vector<VkDescriptorPool> &pools,
                          const ctn_plan_call &call);
// ---- kernels ------------------------------------------------------------------------------------
uint64_t desc_bytes(const ctn_tensor_desc &d);

// A new kernel with a parameter block holding `params` (host-visible, written once).
ctn_status kernel_new(Backend &be, const char *op, const std::vector<uint32_t> &params,
                      Kernel **out);
void kernel_delete(Kernel *k);
// Sets `out` to run `k` (takes ownership).
void kernel_publish(Kernel *k, ctn_kernel *out, uint32_t flags = 0, uint64_t workspace = 0);
// Grid for `items` invocations of `wg` each (x capped at the device's group count, y beyond).
bool grid_1d(const Backend &be, uint64_t items, uint32_t wg, uint32_t *gx, uint32_t *gy);
// Declines a node: CTN_ERR_UNSUPPORTED with "vulkan <op>: <why>".
ctn_status decline(Backend &be, const ctn_op_signature *sig, const char *fmt, ...);
// Appends dispatch `c` of `items` 1-d invocations to `k`; when the grid cannot hold them, deletes
// `k` and declines the node.
inline ctn_status push_1d(Backend &be, const ctn_op_signature *sig, Kernel *k, Cmd &c, uint64_t items) {
  if (!grid_1d(be, items, be.wg1d, &c.gx, &c.gy)) {
    kernel_delete(k);
    return decline(be, sig, "too many elements for one dispatch");
  }
  k->cmds.push_back(std::move(c));
  return CTN_OK;
}
// f64 needs shaderFloat64, f16/bf16 storageBuffer16BitAccess: the standard reason when it is
// absent. half_ok: the op has 16-bit shaders (else f32 and f64 only).
bool float_ok(Backend &be, const ctn_op_signature *sig, int32_t dtype, ctn_status *st,
              bool half_ok = false);

ctn_status make_elementwise_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out,
                                   bool *handled);
ctn_status make_reduce_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out,
                              bool *handled);
ctn_status make_shape_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out,
                             bool *handled);
ctn_status make_matmul_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out,
                              bool *handled);
ctn_status make_nn_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled);

}  // namespace ctn_vk

#endif
