// Internal declarations of the OpenCL backend. Nothing here crosses the ABI.
#ifndef CTN_OCL_BACKEND_H
#define CTN_OCL_BACKEND_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <chutney/backend.h>
#include <chutney/ops.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <string>
#include <vector>
#include "../common/kernel_util.h"
#include "../common/placement_policy.h"

namespace ctn_ocl {

// Shared descriptor helpers and kernel-maker scaffolding (backends/common/desc_util.h,
// kernel_util.h).
using namespace ctn_backend_util;

struct Backend {
  const ctn_host_api *host = nullptr;
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;
  bool fp64 = false;
  // cl_khr_fp16: the exact f16 ops run in native half (kernels/half_ops.cl); without it f16 is
  // storage only (vload_half / vstore_half, f32 arithmetic). Cleared again when the program does
  // not build with it.
  bool fp16 = false;
  size_t max_wg = 1;         // CL_DEVICE_MAX_WORK_GROUP_SIZE
  uint64_t local_mem = 0;    // CL_DEVICE_LOCAL_MEM_SIZE
  uint32_t base_align = 0;   // CL_DEVICE_MEM_BASE_ADDR_ALIGN (bits)
  cl_device_type type = 0;
  std::string device_name, driver_version, platform_name;
  std::string description;
  std::string cache_dir;
  std::string program_origin;  // "cache" or "compiled"
  double program_ms = 0;       // time to get the program (load or build)
  // Bad-label / bad-id reports of device kernels: [code, row, value, limit]; code 1
  // cross_entropy, 2 cross_entropy_grad, 3 embedding, 4 embedding_grad.
  cl_mem err = nullptr;
  bool err_armed = false;      // a kernel that may report has been enqueued since the last check
  // "auto" placement (backends/common/placement_policy.h); auto_mode false: "always".
  ctn_backend_util::PlacementPolicy policy;
};

// ---- helpers ------------------------------------------------------------------------------
const char *cl_error_name(cl_int e);

// ---- program ------------------------------------------------------------------------------
// The full OpenCL C source for this device (float template for f32 and, with fp64, f64; the
// 16-bit float kernels, with native half where fp16).
std::string program_source(bool fp64, bool fp16);
// Builds the program or loads it from the on-disk cache; fills be.program, program_origin/ms.
ctn_status program_load(Backend &be);
uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ull);
std::string device_key(const Backend &be);  // hex hash of device name + driver + platform

// ---- ops ----------------------------------------------------------------------------------
// Every kernel state is an Op: bind() sets the cl_kernel arguments for one call (buffers and
// offsets), enqueue() submits the work. A direct kernel call does both; a recorded plan segment
// binds each call once in plan_prepare and only enqueues in plan_run.
struct Op {
  Backend *be = nullptr;
  const char *op = "";  // the op's name (a string that outlives the kernel)
  virtual ~Op();
  virtual ctn_status bind(const ctn_kernel_args &args) = 0;
  virtual ctn_status enqueue() = 0;
  // Helpers
  cl_kernel make_kernel(const char *kname);  // nullptr + error recorded on failure
  ctn_status set_meta(const std::vector<int64_t> &values);  // uploads meta_ once
  ctn_status launch(cl_kernel k, int64_t items);             // grid-stride 1-D launch
  ctn_status launch_groups(cl_kernel k, int64_t groups, size_t local);  // one group per unit
  ctn_status launch_rows(cl_kernel k, int64_t units, size_t local);
  size_t group_size(cl_kernel k, size_t elem_bytes);         // power of two for local reductions
  ctn_status fail(cl_int e, const char *what);
  // bind()'s checks: every input, then outputs[0], sits at a whole element of a buffer.
  ctn_status check_args(const ctn_kernel_args &a);
  std::vector<cl_kernel> kernels;  // released with the op
  cl_mem meta = nullptr;
};

// An op whose one kernel `k` works along rows in work groups (reductions, softmax, the norms):
// its element dtype, the kernel's variant code and the work-group size.
struct RowOp : Op {
  cl_kernel k = nullptr;
  int32_t dt = CTN_F32;
  cl_int code = 0;
  size_t local = 1;
  // k = kernel `kname`, and `local` a power of two with `item_bytes` of local memory per item,
  // no wider than rows of `len` items need. false (error recorded) when the kernel cannot be made.
  bool make_row_kernel(const std::string &kname, size_t item_bytes, int64_t len) {
    k = make_kernel(kname.c_str());
    if (!k) return false;
    local = group_size(k, item_bytes);
    while (local > 1 && static_cast<int64_t>(local / 2) >= len) local /= 2;
    return true;
  }
};
// A RowOp state of type S for `op` on dtype `dt` with variant `code`.
template <class S>
std::unique_ptr<S> new_row_op(Backend *be, const char *op, int32_t dt, cl_int code) {
  auto st = new_state<S>(be, op);
  st->dt = dt;
  st->code = code;
  return st;
}

ctn_status op_kernel_fn(void *state, const ctn_kernel_args *args);
void op_release(void *state);
void op_set(ctn_kernel *out, Op *op, uint32_t flags = 0);
// A maker's last step: st->k becomes kernel `kname` of the program, and *out the op (flags);
// CTN_ERR_INTERNAL (error recorded) when the kernel cannot be made.
template <class S>
ctn_status op_finish(std::unique_ptr<S> st, const char *kname, ctn_kernel *out, uint32_t flags = 0) {
  st->k = st->make_kernel(kname);
  if (!st->k) return CTN_ERR_INTERNAL;
  op_set(out, st.release(), flags);
  return CTN_OK;
}

// get_kernel makers, one per op family: *handled = true when the op belongs to the family.
ctn_status make_elementwise(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                            bool *handled);
ctn_status make_reduce(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled);
ctn_status make_shape(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled);
ctn_status make_matmul(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled);
ctn_status make_optim(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled);
ctn_status make_nn(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled);

// ---- op library interop (interop.cpp, abi/chutney/opencl.h) -------------------------------
// The "ctn_opencl_interop" extra for get_proc_address; nullptr for other names.
void *interop_proc(const char *name);

// ---- placement policy ---------------------------------------------------------------------
// Loads the cached policy table or measures it now (remeasure: measures in any case).
void policy_prepare(Backend &be, bool remeasure = false);

// The element offset of a descriptor (byte offset / element size).
inline long elem_off(const ctn_tensor_desc &d) {
  size_t es = dtype_size(d.dtype);
  return static_cast<long>(d.offset / (es ? es : 1));
}
inline cl_mem mem_of(const ctn_tensor_desc &d) { return static_cast<cl_mem>(d.data); }

// Kernel argument setting: values by size, LocalMem as __local scratch of that many bytes.
struct LocalMem {
  size_t bytes;
};
inline cl_int set_arg(cl_kernel k, cl_uint i, const LocalMem &l) {
  return clSetKernelArg(k, i, l.bytes, nullptr);
}
template <class V>
inline cl_int set_arg(cl_kernel k, cl_uint i, const V &v) {
  return clSetKernelArg(k, i, sizeof(V), &v);
}
template <class... A>
cl_int set_args(cl_kernel k, const A &...a) {
  cl_uint i = 0;
  cl_int e = CL_SUCCESS;
  ((e = e == CL_SUCCESS ? set_arg(k, i++, a) : e), ...);
  return e;
}
// The suffix of the kernels for a dtype ("f32", "i64", "u8", "bool").
inline const char *kernel_suffix(int32_t dtype) { return dtype_name(dtype); }
// Element offset, with an error when the byte offset is not a multiple of the element size.
ctn_status check_offset(Backend *be, const char *op, const ctn_tensor_desc &d);

}  // namespace ctn_ocl

#endif
