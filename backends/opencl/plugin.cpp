// The OpenCL backend's descriptor and its backend-level slots: device discovery, buffers,
// copies, the error channel of device kernels, options and recorded plan segments. Op kernels
// live in k_*.cpp, the program (source, build, disk cache) in program.cpp.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

// A string query of clGetDeviceInfo / clGetPlatformInfo (`get`) without its trailing NULs and
// spaces; "" when the query fails.
template <class Get, class Obj, class Info>
std::string info_string(Get get, Obj obj, Info what) {
  size_t n = 0;
  if (get(obj, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  if (get(obj, what, n, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}
std::string device_string(cl_device_id d, cl_device_info what) {
  return info_string(clGetDeviceInfo, d, what);
}
std::string platform_string(cl_platform_id p, cl_platform_info what) {
  return info_string(clGetPlatformInfo, p, what);
}

void release_all(Backend &be) {
  if (be.err) clReleaseMemObject(be.err);
  if (be.program) clReleaseProgram(be.program);
  if (be.queue) {
    clFinish(be.queue);
    clReleaseCommandQueue(be.queue);
  }
  if (be.context) clReleaseContext(be.context);
  be.err = nullptr;
  be.program = nullptr;
  be.queue = nullptr;
  be.context = nullptr;
}

// Picks a GPU/accelerator first, any device otherwise; every OpenCL 1.2 device qualifies.
ctn_status pick_device(Backend &be, std::string *why) {
  cl_uint np = 0;
  cl_int e = clGetPlatformIDs(0, nullptr, &np);
  if (e != CL_SUCCESS || np == 0) {
    *why = "no OpenCL platform (the ICD loader found none: " +
           std::string(e == CL_SUCCESS ? "0 platforms" : cl_error_name(e)) + ")";
    return CTN_ERR_UNAVAILABLE;
  }
  std::vector<cl_platform_id> ps(np);
  clGetPlatformIDs(np, ps.data(), nullptr);
  for (cl_device_type want : {cl_device_type(CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR), cl_device_type(CL_DEVICE_TYPE_ALL)}) {
    for (cl_platform_id p : ps) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, want, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> ds(nd);
      clGetDeviceIDs(p, want, nd, ds.data(), nullptr);
      for (cl_device_id d : ds) {
        cl_bool avail = CL_FALSE, compiler = CL_FALSE;
        clGetDeviceInfo(d, CL_DEVICE_AVAILABLE, sizeof avail, &avail, nullptr);
        clGetDeviceInfo(d, CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, nullptr);
        if (!avail || !compiler) continue;
        be.platform = p;
        be.device = d;
        return CTN_OK;
      }
    }
  }
  *why = "no usable OpenCL device (" + std::to_string(np) +
         " platform(s), no available device with a compiler)";
  return CTN_ERR_UNAVAILABLE;
}

void update_description(Backend &be) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.1f ms", be.program_ms);
  be.description = be.device_name + " (" + be.platform_name + ", driver " + be.driver_version +
                   (be.fp64 ? ", fp64" : ", no fp64") +
                   (be.fp16 ? ", fp16 arithmetic" : ", f16 storage only") + "), program from " +
                   be.program_origin + " in " + buf + ", placement " +
                   (be.policy.auto_mode ? "auto" : "always");
}

ctn_status ocl_init(const ctn_host_api *host, const ctn_backend_config *config,
                    void **out_state) {
  return ctn_backend_util::guarded_init(host, "opencl", config, out_state, [&]() -> ctn_status {
    auto be = std::make_unique<Backend>();
    be->host = host;
    std::string why;
    if (pick_device(*be, &why) != CTN_OK)
      return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: %s", why.c_str());
    be->device_name = device_string(be->device, CL_DEVICE_NAME);
    be->driver_version = device_string(be->device, CL_DRIVER_VERSION);
    be->platform_name = platform_string(be->platform, CL_PLATFORM_NAME);
    std::string ext = device_string(be->device, CL_DEVICE_EXTENSIONS);
    be->fp64 = ext.find("cl_khr_fp64") != std::string::npos;
    if (const char *v = std::getenv("CHUTNEY_OPENCL_NO_FP64"); v && *v == '1') be->fp64 = false;
    be->fp16 = ext.find("cl_khr_fp16") != std::string::npos;
    clGetDeviceInfo(be->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof be->max_wg, &be->max_wg,
                    nullptr);
    cl_ulong lm = 0;
    clGetDeviceInfo(be->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lm, &lm, nullptr);
    be->local_mem = lm;
    clGetDeviceInfo(be->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof be->base_align,
                    &be->base_align, nullptr);
    clGetDeviceInfo(be->device, CL_DEVICE_TYPE, sizeof be->type, &be->type, nullptr);
    cl_int e = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                     reinterpret_cast<cl_context_properties>(be->platform), 0};
    be->context = clCreateContext(props, 1, &be->device, nullptr, nullptr, &e);
    if (e != CL_SUCCESS)
      return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: clCreateContext failed (%s)",
                             cl_error_name(e));
    be->queue = clCreateCommandQueue(be->context, be->device, 0, &e);
    if (e != CL_SUCCESS) {
      release_all(*be);
      return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: clCreateCommandQueue failed (%s)",
                             cl_error_name(e));
    }
    be->cache_dir = ctn_backend_util::cache_directory();
    if (ctn_status st = program_load(*be); st != CTN_OK) {
      release_all(*be);
      return st;
    }
    be->err = clCreateBuffer(be->context, CL_MEM_READ_WRITE, 4 * sizeof(cl_long), nullptr, &e);
    if (e == CL_SUCCESS) {
      cl_long zero[4] = {0, 0, 0, 0};
      e = clEnqueueWriteBuffer(be->queue, be->err, CL_TRUE, 0, sizeof zero, zero, 0, nullptr,
                               nullptr);
    }
    if (e != CL_SUCCESS) {
      release_all(*be);
      return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: cannot allocate on %s (%s)",
                             be->device_name.c_str(), cl_error_name(e));
    }
    if (const char *v = std::getenv("CHUTNEY_OPENCL_PLACEMENT"); v && *v) {
      if (!ctn_backend_util::parse_placement(v, &be->policy.auto_mode) && host->log)
        host->log(CTN_LOG_WARN, "opencl", "CHUTNEY_OPENCL_PLACEMENT must be always or auto");
    }
    update_description(*be);
    *out_state = be.release();
    return CTN_OK;
  });
}

void ocl_shutdown(void *state) {
  auto *be = static_cast<Backend *>(state);
  if (!be) return;
  release_all(*be);
  delete be;
}

ctn_status ocl_buffer_alloc(void *state, uint64_t bytes, void **out_handle) {
  auto *be = static_cast<Backend *>(state);
  if (!out_handle) return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl: NULL out_handle");
  // OpenCL rejects empty buffers; an empty value still needs a distinct handle.
  size_t n = static_cast<size_t>(bytes < 64 ? 64 : (bytes + 63) / 64 * 64);
  cl_int e = CL_SUCCESS;
  cl_mem m = clCreateBuffer(be->context, CL_MEM_READ_WRITE, n, nullptr, &e);
  if (e != CL_SUCCESS || !m)
    return be->host->set_error(CTN_ERR_OUT_OF_MEMORY, "opencl: cannot allocate %" PRIu64 " bytes (%s)",
                               bytes, cl_error_name(e));
  *out_handle = m;
  return CTN_OK;
}

void ocl_buffer_free(void *state, void *handle) {
  auto *be = static_cast<Backend *>(state);
  if (!handle) return;
  // Kernels still queued may use the buffer: OpenCL keeps it alive until they finish.
  (void)be;
  clReleaseMemObject(static_cast<cl_mem>(handle));
}

// upload (src) or download (dst): one blocking write or read.
ctn_status transfer(Backend *be, void *handle, uint64_t offset, const void *src, void *dst,
                    uint64_t bytes, const char *what) {
  if (!handle || (!src && !dst && bytes))
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s: NULL pointer", what);
  if (!bytes) return CTN_OK;
  cl_mem m = static_cast<cl_mem>(handle);
  cl_int e = src ? clEnqueueWriteBuffer(be->queue, m, CL_TRUE, offset, bytes, src, 0, nullptr,
                                        nullptr)
                 : clEnqueueReadBuffer(be->queue, m, CL_TRUE, offset, bytes, dst, 0, nullptr,
                                       nullptr);
  if (e != CL_SUCCESS)
    return be->host->set_error(CTN_ERR_INTERNAL, "%s of %" PRIu64 " bytes: %s", what, bytes,
                               cl_error_name(e));
  return CTN_OK;
}

ctn_status ocl_upload(void *state, void *handle, uint64_t offset, const void *src,
                      uint64_t bytes) {
  return transfer(static_cast<Backend *>(state), handle, offset, src, nullptr, bytes,
                  "opencl upload");
}

ctn_status check_errors(Backend &be);

ctn_status ocl_download(void *state, void *handle, uint64_t offset, void *dst, uint64_t bytes) {
  auto *be = static_cast<Backend *>(state);
  if (ctn_status st = transfer(be, handle, offset, nullptr, dst, bytes, "opencl download"); st)
    return st;
  if (!bytes) return CTN_OK;
  return check_errors(*be);
}

// Device kernels cannot return a status: those that validate data (labels) write a report into
// be.err, read back here at the next synchronisation point.
ctn_status check_errors(Backend &be) {
  if (!be.err_armed) return CTN_OK;
  be.err_armed = false;
  cl_long rep[4] = {0, 0, 0, 0};
  cl_int e = clEnqueueReadBuffer(be.queue, be.err, CL_TRUE, 0, sizeof rep, rep, 0, nullptr, nullptr);
  if (e != CL_SUCCESS)
    return be.host->set_error(CTN_ERR_INTERNAL, "opencl: reading the kernel error report: %s",
                              cl_error_name(e));
  if (rep[0] == 0) return CTN_OK;
  cl_long zero[4] = {0, 0, 0, 0};
  clEnqueueWriteBuffer(be.queue, be.err, CL_TRUE, 0, sizeof zero, zero, 0, nullptr, nullptr);
  if (rep[0] == 3 || rep[0] == 4)
    return be.host->set_error(CTN_ERR_INVALID_ARGUMENT,
                              "opencl %s: id %lld at position %lld is outside [0, %lld)",
                              rep[0] == 3 ? CTN_OP_EMBEDDING : CTN_OP_EMBEDDING_GRAD,
                              static_cast<long long>(rep[2]), static_cast<long long>(rep[1]),
                              static_cast<long long>(rep[3]));
  return be.host->set_error(CTN_ERR_INVALID_ARGUMENT, "opencl %s: label %lld of row %lld is out of range",
                            rep[0] == 1 ? CTN_OP_CROSS_ENTROPY : CTN_OP_CROSS_ENTROPY_GRAD,
                            static_cast<long long>(rep[2]), static_cast<long long>(rep[1]));
}

ctn_status ocl_synchronize(void *state) {
  auto *be = static_cast<Backend *>(state);
  cl_int e = clFinish(be->queue);
  if (e != CL_SUCCESS)
    return be->host->set_error(CTN_ERR_INTERNAL, "opencl: clFinish: %s", cl_error_name(e));
  return check_errors(*be);
}

ctn_status ocl_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  auto *be = static_cast<Backend *>(state);
  const ctn_host_api *host = be->host;
  return ctn_backend_util::guarded(host, "opencl get_kernel", [&]() -> ctn_status {
    if (ctn_status st = ctn_backend_util::check_signature(
            host, "opencl", sig, out, false,
            [&](uint32_t, const ctn_tensor_desc &d) -> ctn_status {
              if (d.dtype == CTN_F64 && !be->fp64)
                return host->set_error(CTN_ERR_UNSUPPORTED,
                                       "opencl %s: f64 needs cl_khr_fp64, which %s does not offer",
                                       sig->op, be->device_name.c_str());
              return CTN_OK;
            },
            /*reduced_dtypes=*/true);  // each op family declines the 16-bit floats and i8 it lacks
        st != CTN_OK)
      return st;
    if (be->policy.auto_mode) {
      if (!be->policy.ready()) policy_prepare(*be);
      if (std::string why = be->policy.decline_reason(sig); !why.empty())
        return host->set_error(CTN_ERR_UNSUPPORTED, "%s", why.c_str());
    }
    bool handled = false;
    using Maker = ctn_status (*)(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);
    for (Maker m : {make_elementwise, make_reduce, make_shape, make_matmul, make_optim, make_nn}) {
      ctn_status st = m(be, sig, out, &handled);
      if (handled) return st;
    }
    return host->set_error(CTN_ERR_UNSUPPORTED, "opencl backend: op '%s' is not implemented",
                           sig->op);
  }, sig && sig->op ? sig->op : "?");
}

ctn_status ocl_set_option(void *state, const char *key, const char *value) {
  auto *be = static_cast<Backend *>(state);
  const ctn_host_api *host = be->host;
  return ctn_backend_util::guarded_set_option(host, "opencl", key, value, [&]() -> ctn_status {
    if (!std::strcmp(key, "placement")) {
      if (!ctn_backend_util::parse_placement(value, &be->policy.auto_mode))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "opencl: placement must be 'always' or 'auto', got '%s'", value);
      update_description(*be);
      return CTN_OK;
    }
    if (!std::strcmp(key, "policy")) {
      // prepare: load or measure now (chutney plugins --explain); remeasure: measure again.
      bool re = !std::strcmp(value, "remeasure");
      if (!re && std::strcmp(value, "prepare") != 0)
        return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "opencl: policy takes 'prepare' or 'remeasure', got '%s'", value);
      if (re || !be->policy.ready()) policy_prepare(*be, re);
      return CTN_OK;
    }
    return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                           "opencl: unknown option '%s' (placement, policy)", key);
  });
}

// ---- plan segments: bind every call once, replay = enqueues only ---------------------------
// A call is one of ours (op) or an op library's kernel that enqueues on our queue itself
// (abi/chutney/opencl.h): called as is at every run, in order, on the same in-order queue.
struct Segment {
  struct Call {
    Op *op;
    const ctn_kernel *foreign;
    const ctn_kernel_args *args;
  };
  std::vector<Call> calls;
};

ctn_status ocl_plan_prepare(void *state, uint32_t n, const ctn_plan_call *calls, void **out) {
  auto *be = static_cast<Backend *>(state);
  return ctn_backend_util::guarded(be->host, "opencl plan_prepare", [&]() -> ctn_status {
    auto seg = std::make_unique<Segment>();
    for (uint32_t i = 0; i < n; ++i) {
      const ctn_kernel *k = calls[i].kernel;
      if (k->fn != op_kernel_fn) {
        seg->calls.push_back({nullptr, k, calls[i].args});  // an op library's kernel
        continue;
      }
      Op *op = static_cast<Op *>(k->state);
      if (ctn_status st = op->bind(*calls[i].args); st != CTN_OK) return st;
      seg->calls.push_back({op, nullptr, nullptr});
    }
    *out = seg.release();
    return CTN_OK;
  });
}

ctn_status ocl_plan_run(void *, void *segment) {
  for (const Segment::Call &c : static_cast<Segment *>(segment)->calls) {
    ctn_status st = c.op ? c.op->enqueue() : c.foreign->fn(c.foreign->state, c.args);
    if (st != CTN_OK) return st;
  }
  return CTN_OK;
}

void ocl_plan_release(void *, void *segment) { delete static_cast<Segment *>(segment); }

const char *proc_policy(void *state) {
  static thread_local std::string s;
  auto *be = static_cast<Backend *>(state);
  if (!be->policy.ready()) policy_prepare(*be);
  s = be->policy.report_json();
  return s.c_str();
}
// What the policy measured and decided (ctn_context_plugin_report, `chutney plugins --explain`);
// never measures.
const char *proc_placement_explain(void *state) {
  return static_cast<Backend *>(state)->policy.explain_cstr("CHUTNEY_OPENCL_PLACEMENT");
}
cl_command_queue proc_queue(void *state) { return static_cast<Backend *>(state)->queue; }
cl_context proc_context(void *state) { return static_cast<Backend *>(state)->context; }

CTN_GET_PROC_ADDRESS(ocl_get_proc_address, interop_proc,
    CTN_PROC_ENTRY("ctn_opencl_policy_report", proc_policy),
    CTN_PROC_ENTRY("ctn_placement_explain", proc_placement_explain),
    CTN_PROC_ENTRY("ctn_opencl_queue", proc_queue),
    CTN_PROC_ENTRY("ctn_opencl_context", proc_context))

// Constant-initialised: nothing runs when the plugin is loaded (libOpenCL is touched in init).
constexpr ctn_backend_desc kDesc = CTN_BACKEND_DESC("opencl", 0, ocl, ocl_synchronize, ocl_plan_prepare,
                                                    ocl_plan_run, ocl_plan_release);

}  // namespace
}  // namespace ctn_ocl

CTN_BACKEND_PLUGIN_QUERY(ctn_ocl::kDesc)
