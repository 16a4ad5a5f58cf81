// since 1.2: the "ctn_opencl_interop" extra (abi/chutney/opencl.h): the backend's native handles
// and the OpenCL entry points of its ICD loader, for op libraries that enqueue their own kernels.
#include <chutney/opencl.h>

#include <cstddef>
#include <cstring>

#include "ocl_backend.h"

namespace ctn_ocl {
namespace {

// The OpenCL 1.2 core entry points an op library may ask for (docs/OPENCL.md lists them).
struct Entry {
  const char *name;
  ctn_opencl_fn fn;
};
#define CTN_OCL_ENTRY(f) {#f, reinterpret_cast<ctn_opencl_fn>(&f)}
const Entry kEntries[] = {
    CTN_OCL_ENTRY(clGetPlatformInfo),       CTN_OCL_ENTRY(clGetDeviceInfo),
    CTN_OCL_ENTRY(clGetContextInfo),        CTN_OCL_ENTRY(clGetCommandQueueInfo),
    CTN_OCL_ENTRY(clCreateBuffer),          CTN_OCL_ENTRY(clCreateSubBuffer),
    CTN_OCL_ENTRY(clRetainMemObject),       CTN_OCL_ENTRY(clReleaseMemObject),
    CTN_OCL_ENTRY(clGetMemObjectInfo),      CTN_OCL_ENTRY(clCreateProgramWithSource),
    CTN_OCL_ENTRY(clCreateProgramWithBinary), CTN_OCL_ENTRY(clBuildProgram),
    CTN_OCL_ENTRY(clGetProgramInfo),        CTN_OCL_ENTRY(clGetProgramBuildInfo),
    CTN_OCL_ENTRY(clRetainProgram),         CTN_OCL_ENTRY(clReleaseProgram),
    CTN_OCL_ENTRY(clCreateKernel),          CTN_OCL_ENTRY(clRetainKernel),
    CTN_OCL_ENTRY(clReleaseKernel),         CTN_OCL_ENTRY(clSetKernelArg),
    CTN_OCL_ENTRY(clGetKernelInfo),         CTN_OCL_ENTRY(clGetKernelWorkGroupInfo),
    CTN_OCL_ENTRY(clEnqueueNDRangeKernel),  CTN_OCL_ENTRY(clEnqueueReadBuffer),
    CTN_OCL_ENTRY(clEnqueueWriteBuffer),    CTN_OCL_ENTRY(clEnqueueCopyBuffer),
    CTN_OCL_ENTRY(clEnqueueFillBuffer),     CTN_OCL_ENTRY(clWaitForEvents),
    CTN_OCL_ENTRY(clReleaseEvent),          CTN_OCL_ENTRY(clFlush),
    CTN_OCL_ENTRY(clFinish),
};
#undef CTN_OCL_ENTRY

ctn_opencl_fn get_function(const char *name) {
  if (!name) return nullptr;
  for (const Entry &e : kEntries)
    if (!std::strcmp(e.name, name)) return e.fn;
  return nullptr;
}

ctn_status fill_interop(void *state, ctn_opencl_interop *out) {
  return ctn_backend_util::interop_answer(
      state, out, CTN_OPENCL_INTEROP_VERSION, [&](ctn_opencl_interop &io) -> ctn_status {
    const auto *be = static_cast<const Backend *>(state);
    // Version 1 is the whole struct of 1.2; later versions fill only what fits (struct_size).
    io.platform = be->platform;
    io.device = be->device;
    io.context = be->context;
    io.queue = be->queue;
    io.get_function = get_function;
    io.fp64 = be->fp64 ? 1u : 0u;
    return CTN_OK;
  });
}

}  // namespace

void *interop_proc(const char *name) {
  return ctn_backend_util::interop_proc_entry(name, CTN_OPENCL_INTEROP_PROC,
                                              static_cast<ctn_opencl_interop_fn>(fill_interop));
}

}  // namespace ctn_ocl
