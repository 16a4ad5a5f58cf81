// The Vulkan side of the "auto" placement policy (backends/common/placement_policy.h): an op is
// timed the way a compiled plan runs it (its calls recorded into one command buffer and
// replayed), and the table is cached per device and driver next to the pipeline cache.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "vk_backend.h"

namespace ctn_vk {
namespace {

using Clock = std::chrono::steady_clock;

// A device buffer of `bytes` filled with 0.5f (finite, not denormal: values must not change the
// speed of the kernels being timed); nullptr on failure.
Buffer *filled_buffer(Backend &be, uint64_t bytes) {
  Buffer *b = nullptr;
  if (buffer_create(be, std::max<uint64_t>(bytes, 4), false, &b) != CTN_OK) return nullptr;
  VkCommandBuffer cb;
  if (begin_cb(be, &cb) != CTN_OK) {
    buffer_destroy(be, b);
    return nullptr;
  }
  be.vk.vkCmdFillBuffer(cb, b->buf, 0, VK_WHOLE_SIZE, 0x3f000000u);
  cmd_barrier(be, cb, true);
  be.vk.vkEndCommandBuffer(cb);
  if (submit_transient(be, cb, VK_NULL_HANDLE) != CTN_OK || drain(be) != CTN_OK) {
    buffer_destroy(be, b);
    return nullptr;
  }
  return b;
}

double time_device(Backend &be, const ctn_op_signature &sig, int reps) {
  ctn_kernel k{};
  bool handled = false;
  ctn_status st = CTN_OK;
  using Maker = ctn_status (*)(Backend &, const ctn_op_signature *, ctn_kernel *, bool *);
  for (Maker m : {make_elementwise_kernel, make_reduce_kernel, make_matmul_kernel})
    if (st = m(be, &sig, &k, &handled); handled) break;
  if (!handled || st != CTN_OK) return -1;
  std::vector<ctn_tensor_desc> ins(sig.inputs, sig.inputs + sig.n_inputs);
  ctn_tensor_desc out = *sig.output;
  std::vector<Buffer *> bufs;
  bool ok = true;
  for (ctn_tensor_desc *d = ins.data(); ok && d <= ins.data() + ins.size(); ++d) {
    ctn_tensor_desc &t = d < ins.data() + ins.size() ? *d : out;
    Buffer *b = filled_buffer(be, desc_bytes(t));
    ok = b != nullptr;
    if (ok) bufs.push_back(b), t.data = b;
  }
  Buffer *work = nullptr;
  if (ok && k.workspace_size) ok = buffer_create(be, k.workspace_size, false, &work) == CTN_OK;
  double ms = -1;
  void *seg = nullptr;
  if (ok) {
    ctn_kernel_args args{};
    args.n_inputs = sig.n_inputs;
    args.n_outputs = 1;
    args.inputs = ins.data();
    args.outputs = &out;
    args.attrs = sig.attrs;
    args.workspace = work;
    std::vector<ctn_plan_call> calls(static_cast<size_t>(reps), ctn_plan_call{&k, &args});
    ok = plan_prepare(&be, static_cast<uint32_t>(reps), calls.data(), &seg) == CTN_OK;
    // Warm-up (pipeline creation, first touch), then the median of three replays.
    ok = ok && plan_run(&be, seg) == CTN_OK && drain(be) == CTN_OK;
    std::vector<double> t;
    for (int round = 0; ok && round < 3; ++round) {
      auto t0 = Clock::now();
      ok = plan_run(&be, seg) == CTN_OK && drain(be) == CTN_OK;
      t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / reps);
    }
    if (ok) {
      std::sort(t.begin(), t.end());
      ms = t[1];
    }
  }
  if (seg) plan_release(&be, seg);
  if (k.release) k.release(k.state);
  buffer_destroy(be, work);
  for (Buffer *b : bufs) buffer_destroy(be, b);
  return ms;
}

}  // namespace

void policy_prepare(Backend &be, bool remeasure) {
  remeasure = remeasure || ctn_backend_util::env_flag("CHUTNEY_VULKAN_REMEASURE");
  std::string dir = cache_dir(), path;
  if (!dir.empty()) {
    char name[96];
    std::snprintf(name, sizeof name, "/vulkan-policy-%04x-%04x-%08x.txt", be.props.vendorID,
                  be.props.deviceID, be.props.driverVersion);
    path = dir + name;
  }
  be.policy.prepare(
      path, [&be](const ctn_op_signature &sig, int reps) { return time_device(be, sig, reps); },
      remeasure);
}

}  // namespace ctn_vk
