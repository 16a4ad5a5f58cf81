// The OpenCL side of the "auto" placement policy (backends/common/placement_policy.h): how an op
// is timed on the device, and where the table is cached (next to the program binaries, keyed by
// device + driver + platform).
#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Times `reps` calls of the op on device buffers (median of 3 rounds, ms per call).
double time_device(Backend &be, const ctn_op_signature &sig, int reps) {
  const uint32_t n_in = sig.n_inputs;
  const ctn_tensor_desc *ins = sig.inputs;
  ctn_kernel k{};
  bool handled = false;
  ctn_status st = CTN_OK;
  for (auto m : {make_elementwise, make_reduce, make_matmul})
    if (st = m(&be, &sig, &k, &handled); handled) break;
  if (!handled || st != CTN_OK) return -1;
  std::vector<cl_mem> bufs;
  std::vector<ctn_tensor_desc> din(ins, ins + n_in);
  ctn_tensor_desc dout = *sig.output;
  auto alloc = [&](ctn_tensor_desc &d) {
    size_t bytes = static_cast<size_t>(std::max<int64_t>(desc_numel(d), 1)) * 4;
    cl_int e = CL_SUCCESS;
    cl_mem m = clCreateBuffer(be.context, CL_MEM_READ_WRITE, bytes, nullptr, &e);
    if (e != CL_SUCCESS) return false;
    const cl_float one = 0.5f;
    clEnqueueFillBuffer(be.queue, m, &one, sizeof one, 0, bytes, 0, nullptr, nullptr);
    bufs.push_back(m);
    d.data = m;
    return true;
  };
  bool ok = true;
  for (auto &d : din) ok = ok && alloc(d);
  ok = ok && alloc(dout);
  double best = -1;
  if (ok) {
    ctn_kernel_args args{};
    args.n_inputs = n_in;
    args.n_outputs = 1;
    args.inputs = din.data();
    args.outputs = &dout;
    args.attrs = sig.attrs;
    ok = k.fn(k.state, &args) == CTN_OK && clFinish(be.queue) == CL_SUCCESS;  // warm-up
    std::vector<double> t;
    for (int round = 0; ok && round < 3; ++round) {
      auto t0 = Clock::now();
      for (int r = 0; ok && r < reps; ++r) ok = k.fn(k.state, &args) == CTN_OK;
      ok = ok && clFinish(be.queue) == CL_SUCCESS;
      t.push_back(ms_since(t0) / reps);
    }
    if (ok) {
      std::sort(t.begin(), t.end());
      best = t[1];
    }
  }
  for (cl_mem m : bufs) clReleaseMemObject(m);
  if (k.release) k.release(k.state);
  return best;
}

}  // namespace

void policy_prepare(Backend &be, bool remeasure) {
  remeasure = remeasure || ctn_backend_util::env_flag("CHUTNEY_OPENCL_REMEASURE");
  be.policy.prepare(be.cache_dir.empty() ? std::string() : be.cache_dir + "/opencl-policy-" + device_key(be) + ".txt",
                    [&be](const ctn_op_signature &sig, int reps) { return time_device(be, sig, reps); },
                    remeasure);
}

}  // namespace ctn_ocl
