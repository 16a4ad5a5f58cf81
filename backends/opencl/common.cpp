// Helpers shared by the op families and the Op base: kernel creation, launches sized from the
// device's limits (never assumed), the meta buffer of index tables.
#include <algorithm>

#include "ocl_backend.h"

namespace ctn_ocl {




const char *cl_error_name(cl_int e) {
  switch (e) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL error";
  }
}


Op::~Op() {
  for (cl_kernel k : kernels)
    if (k) clReleaseKernel(k);
  if (meta) clReleaseMemObject(meta);
}

ctn_status Op::fail(cl_int e, const char *what) {
  return be->host->set_error(e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES
                                 ? CTN_ERR_OUT_OF_MEMORY
                                 : CTN_ERR_INTERNAL,
                             "opencl %s: %s: %s", op, what, cl_error_name(e));
}

cl_kernel Op::make_kernel(const char *kname) {
  cl_int e = CL_SUCCESS;
  cl_kernel k = clCreateKernel(be->program, kname, &e);
  if (e != CL_SUCCESS) {
    be->host->set_error(CTN_ERR_INTERNAL, "opencl %s: clCreateKernel(%s): %s", op, kname,
                        cl_error_name(e));
    return nullptr;
  }
  kernels.push_back(k);
  return k;
}

ctn_status Op::set_meta(const std::vector<int64_t> &values) {
  std::vector<cl_long> v(values.begin(), values.end());
  if (v.empty()) v.push_back(0);
  cl_int e = CL_SUCCESS;
  meta = clCreateBuffer(be->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                        v.size() * sizeof(cl_long), v.data(), &e);
  if (e != CL_SUCCESS) return fail(e, "index table");
  return CTN_OK;
}

namespace {
size_t kernel_wg(const Backend &be, cl_kernel k) {
  size_t wg = 0;
  if (clGetKernelWorkGroupInfo(k, be.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, nullptr) !=
          CL_SUCCESS ||
      wg == 0)
    wg = 1;
  return std::min(wg, be.max_wg ? be.max_wg : 1);
}
}  // namespace

ctn_status Op::launch(cl_kernel k, int64_t items) {
  if (items <= 0) return CTN_OK;
  size_t local = std::min<size_t>(kernel_wg(*be, k), 128);
  size_t groups = (static_cast<size_t>(items) + local - 1) / local;
  // Grid-stride kernels: cap the grid; every work-item loops over the rest.
  groups = std::min<size_t>(groups, 4096);
  size_t global = groups * local;
  cl_int e = clEnqueueNDRangeKernel(be->queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr);
  if (e != CL_SUCCESS) return fail(e, "clEnqueueNDRangeKernel");
  return CTN_OK;
}

size_t Op::group_size(cl_kernel k, size_t elem_bytes) {
  size_t limit = std::min<size_t>(kernel_wg(*be, k), 256);
  // Local scratch stays within 16 KiB (embedded GPUs) and the device's own limit.
  uint64_t lm = std::min<uint64_t>(be->local_mem ? be->local_mem : 16384, 16384);
  while (limit > 1 && limit * elem_bytes > lm) limit /= 2;
  size_t p = 1;
  while (p * 2 <= limit) p *= 2;
  return p;
}

ctn_status Op::launch_groups(cl_kernel k, int64_t units, size_t local) {
  if (units <= 0) return CTN_OK;
  size_t groups = std::min<size_t>(static_cast<size_t>(units), 65536);
  size_t global = groups * local;
  cl_int e = clEnqueueNDRangeKernel(be->queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr);
  if (e != CL_SUCCESS) return fail(e, "clEnqueueNDRangeKernel");
  return CTN_OK;
}

ctn_status Op::launch_rows(cl_kernel k, int64_t units, size_t local) {
  if (units <= 0) return CTN_OK;
  // One work-group per unit, no grid-stride loop: a barrier inside a loop miscompiles on PoCL
  // (rare lanes read a stale reduction). Two grid dimensions cover more than 65535 units.
  size_t gx = static_cast<size_t>(std::min<int64_t>(units, 65535));
  size_t gy = static_cast<size_t>((units + static_cast<int64_t>(gx) - 1) / static_cast<int64_t>(gx));
  size_t global[2] = {gx * local, gy}, loc[2] = {local, 1};
  cl_int e = clEnqueueNDRangeKernel(be->queue, k, 2, nullptr, global, loc, 0, nullptr, nullptr);
  if (e != CL_SUCCESS) return fail(e, "clEnqueueNDRangeKernel");
  return CTN_OK;
}

ctn_status op_kernel_fn(void *state, const ctn_kernel_args *args) {
  Op *op = static_cast<Op *>(state);
  try {
    if (ctn_status st = op->bind(*args); st != CTN_OK) return st;
    return op->enqueue();
  } catch (const std::exception &e) {
    return op->be->host->set_error(CTN_ERR_INTERNAL, "opencl %s: %s", op->op, e.what());
  }
}

void op_release(void *state) { delete static_cast<Op *>(state); }

void op_set(ctn_kernel *out, Op *op, uint32_t flags) {
  kernel_fill(out, op_kernel_fn, op, op_release, flags, 0);
}

}  // namespace ctn_ocl

namespace ctn_ocl {
ctn_status check_offset(Backend *be, const char *op, const ctn_tensor_desc &d) {
  size_t es = dtype_size(d.dtype);
  if (!d.data || (es && d.offset % es))
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "opencl %s: buffer %p offset %llu is not a multiple of %zu", op,
                               d.data, static_cast<unsigned long long>(d.offset), es);
  return CTN_OK;
}

ctn_status Op::check_args(const ctn_kernel_args &a) {
  for (uint32_t i = 0; i < a.n_inputs; ++i)
    if (ctn_status s = check_offset(be, op, a.inputs[i]); s) return s;
  return check_offset(be, op, a.outputs[0]);
}
}  // namespace ctn_ocl
