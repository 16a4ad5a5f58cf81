// Kernel-maker scaffolding shared by the backend plugins, built as a hidden-visibility static
// library (ctn_backend_common) that each plugin links: nothing here is exported, and plugins
// still never link libchutney. get_kernel only sees signatures the host's infer accepted
// (abi/chutney/ops.h), so these helpers read shapes and attributes without re-validating them;
// a backend checks only what it supports (dtype, rank limits, buffer sizes).
#pragma once

#include <chutney/ops.h>
#include <chutney/backend.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "desc_util.h"

// Defines a backend plugin's one exported symbol: the descriptor `desc`'s header, for a host of
// the same ABI major (any minor), nullptr otherwise.
#define CTN_BACKEND_PLUGIN_QUERY(desc)                                                      \
  CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,   \
                                                              const ctn_host_api *) {       \
    return CTN_ABI_VERSION_MAJOR(host_abi_version) == CTN_ABI_MAJOR ? &(desc).header : nullptr; \
  }

// A constant-initialised backend descriptor (designated initialisers, so nothing runs when the
// plugin is loaded): `p` is the backend's function prefix (p##_init ... p##_get_proc_address),
// describe returns Backend::description; the optional slots (synchronize and the 1.1 plan
// segments) are given explicitly, nullptr where the backend has none.
#define CTN_BACKEND_DESC(name_, flags_, p, sync, plan_prepare_, plan_run_, plan_release_) \
  ctn_backend_desc {                                                                     \
    .header = {.struct_size = sizeof(ctn_backend_desc),                                  \
               .abi_major = CTN_ABI_MAJOR,                                               \
               .abi_minor = CTN_ABI_MINOR,                                               \
               .kind = CTN_PLUGIN_BACKEND,                                               \
               .reserved = 0,                                                            \
               .name = name_},                                                           \
    .flags = flags_, .reserved = 0, .init = p##_init, .shutdown = p##_shutdown,          \
    .describe = ctn_backend_util::describe<Backend>, .buffer_alloc = p##_buffer_alloc,   \
    .buffer_free = p##_buffer_free, .upload = p##_upload, .download = p##_download,      \
    .get_kernel = p##_get_kernel, .synchronize = sync, .set_option = p##_set_option,     \
    .get_proc_address = p##_get_proc_address, .plan_prepare = plan_prepare_,             \
    .plan_run = plan_run_, .plan_release = plan_release_,                                \
  }

namespace ctn_backend_util {

// The describe slot of every first-party backend: its state's `description` string.
template <class B>
const char *describe(void *state) {
  return static_cast<B *>(state)->description.c_str();
}

// A kernel state of type S (members `be` and `op`) for backend `be` and op `op`, a string that
// outlives the kernel (the signature's op name or a constant). The OpenCL and CUDA kernel makers'.
template <class S, class B>
std::unique_ptr<S> new_state(B *be, const char *op) {
  auto st = std::make_unique<S>();
  st->be = be;
  st->op = op;
  return st;
}

// Runs body() (which returns a ctn_status) for a C ABI entry point: std::bad_alloc becomes
// CTN_ERR_OUT_OF_MEMORY "<what>[(<arg>)]: out of memory", any other std::exception
// CTN_ERR_INTERNAL "<what>: <e.what()>".
template <class F>
ctn_status guarded(const ctn_host_api *host, const char *what, F &&body, const char *arg = nullptr) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    if (arg) return host->set_error(CTN_ERR_OUT_OF_MEMORY, "%s(%s): out of memory", what, arg);
    return host->set_error(CTN_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
  } catch (const std::exception &e) {
    return host->set_error(CTN_ERR_INTERNAL, "%s: %s", what, e.what());
  }
}

// The entry of `table` (structs with a `const char *name`) named `name`, or nullptr: how the
// kernel makers find their op in their table of ops.
template <class Entry, size_t N>
const Entry *find_entry(const Entry (&table)[N], const char *name) {
  for (const Entry &e : table)
    if (!std::strcmp(e.name, name)) return &e;
  return nullptr;
}

// A backend's init entry point: CTN_ERR_INVALID_ARGUMENT for a host that cannot record errors,
// "<backend> init: NULL config or out_state" without those, else body() under guarded().
template <class F>
ctn_status guarded_init(const ctn_host_api *host, const char *backend,
                        const ctn_backend_config *config, void **out_state, F &&body) {
  if (!host || !host->set_error) return CTN_ERR_INVALID_ARGUMENT;
  char what[64];
  std::snprintf(what, sizeof what, "%s init", backend);
  return guarded(host, what, [&]() -> ctn_status {
    if (!config || !out_state)
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s: NULL config or out_state", what);
    return body();
  });
}

// A backend's set_option entry point: "<backend> set_option: NULL key or value" without them,
// else body() under guarded().
template <class F>
ctn_status guarded_set_option(const ctn_host_api *host, const char *backend, const char *key, const char *value,
                              F &&body) {
  char what[64];
  std::snprintf(what, sizeof what, "%s set_option", backend);
  return guarded(host, what, [&]() -> ctn_status {
    if (!key || !value) return host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s: NULL key or value", what);
    return body();
  });
}

// Operand i's dtype and rank: CTN_ERR_INVALID_ARGUMENT for an unknown dtype or ndim past
// CTN_MAX_DIMS; CTN_ERR_UNSUPPORTED for a dtype added after 1.0 (f16, bf16, i8: types.h) unless
// the backend computes in them (reduced_dtypes), so the host places the node elsewhere.
inline ctn_status check_operand_type(const ctn_host_api *host, const char *backend, const char *op,
                                     uint32_t i, const ctn_tensor_desc &d, bool reduced_dtypes) {
  if (d.ndim > CTN_MAX_DIMS || dtype_size(d.dtype) == 0)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s %s: operand %u has ndim %u / dtype %d out of range",
                           backend, op, i, d.ndim, static_cast<int>(d.dtype));
  if (d.dtype >= CTN_DTYPE_COUNT_V1 && !reduced_dtypes)
    return host->set_error(CTN_ERR_UNSUPPORTED, "%s %s: the %s backend does not compute in %s yet", backend, op,
                           backend, dtype_name(d.dtype));
  return CTN_OK;
}

// get_kernel's first checks, in order: a complete signature ("<backend> get_kernel: incomplete
// signature"); then per operand i (the inputs, then the output as operand n_inputs)
// check_operand_type, with negative_dims no negative dim (CTN_ERR_SHAPE), and last each(i, d),
// the backend's own check of it (CTN_OK to go on).
template <class Each>
ctn_status check_signature(const ctn_host_api *host, const char *backend,
                           const ctn_op_signature *sig, const ctn_kernel *out, bool negative_dims,
                           Each &&each, bool reduced_dtypes = false) {
  if (!sig || !out || !sig->op || !sig->output || !sig->attrs || (sig->n_inputs && !sig->inputs))
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s get_kernel: incomplete signature",
                           backend);
  for (uint32_t i = 0; i <= sig->n_inputs; ++i) {
    const ctn_tensor_desc &d = i < sig->n_inputs ? sig->inputs[i] : *sig->output;
    if (ctn_status st = check_operand_type(host, backend, sig->op, i, d, reduced_dtypes); st != CTN_OK) return st;
    for (uint32_t k = 0; negative_dims && k < d.ndim; ++k)
      if (d.shape[k] < 0)
        return host->set_error(CTN_ERR_SHAPE, "%s %s: operand %u has a negative dim", backend,
                               sig->op, i);
    if (ctn_status st = each(i, d); st != CTN_OK) return st;
  }
  return CTN_OK;
}
// The same with every check on and no check of the backend's own.
inline ctn_status check_signature(const ctn_host_api *host, const char *backend,
                                  const ctn_op_signature *sig, const ctn_kernel *out,
                                  bool reduced_dtypes = false) {
  return check_signature(
      host, backend, sig, out, true, [](uint32_t, const ctn_tensor_desc &) -> ctn_status { return CTN_OK; },
      reduced_dtypes);
}

// A backend's get_kernel body after its own preparation: check_signature, then before() (a
// ctn_status, CTN_OK to go on), then the makers in order until one says it handled the op (its
// status is the answer); none did: CTN_ERR_UNSUPPORTED "<backend> backend: op '<op>' is not
// implemented". Exceptions become statuses (guarded).
template <class B, class Before>
ctn_status get_kernel_by_makers(
    B *be, const char *backend, const ctn_op_signature *sig, ctn_kernel *out, bool reduced_dtypes, Before &&before,
    std::initializer_list<ctn_status (*)(B *, const ctn_op_signature *, ctn_kernel *, bool *)> makers) {
  const ctn_host_api *host = be->host;
  char what[64];
  std::snprintf(what, sizeof what, "%s get_kernel", backend);
  return guarded(host, what, [&]() -> ctn_status {
    if (ctn_status st = check_signature(host, backend, sig, out, reduced_dtypes); st != CTN_OK) return st;
    if (ctn_status st = before(); st != CTN_OK) return st;
    bool handled = false;
    for (auto *m : makers) {
      ctn_status st = m(be, sig, out, &handled);
      if (handled) return st;
    }
    return host->set_error(CTN_ERR_UNSUPPORTED, "%s backend: op '%s' is not implemented", backend, sig->op);
  }, sig && sig->op ? sig->op : "?");
}

// A get_proc_address table: name -> function.
struct ProcEntry {
  const char *name;
  void *fn;
};
#define CTN_PROC_ENTRY(name, fn) ::ctn_backend_util::ProcEntry{name, reinterpret_cast<void *>(&(fn))}
// The entry named `name` in `table`, nullptr when none is.
template <size_t N>
void *proc_lookup(const ProcEntry (&table)[N], const char *name) {
  if (!name) return nullptr;
  for (const ProcEntry &e : table)
    if (std::strcmp(e.name, name) == 0) return e.fn;
  return nullptr;
}

// Defines the get_proc_address slot `fn`: the entries (CTN_PROC_ENTRY(name, function), ...) by
// name, then fallback(name) (interop_proc, or no_proc).
#define CTN_GET_PROC_ADDRESS(fn, fallback, ...)                               \
  void *fn(void *, const char *name) {                                        \
    static const ::ctn_backend_util::ProcEntry table[] = {__VA_ARGS__};       \
    if (void *found = ::ctn_backend_util::proc_lookup(table, name)) return found; \
    return fallback(name);                                                    \
  }
inline void *no_proc(const char *) { return nullptr; }

// The interop extras (abi/chutney/{opencl,vulkan,cuda}.h). get_proc_address's answer: `fill`
// when `name` is the extra's `proc` name, nullptr otherwise.
template <class Fn>
void *interop_proc_entry(const char *name, const char *proc, Fn fill) {
  return name && std::strcmp(name, proc) == 0 ? reinterpret_cast<void *>(fill) : nullptr;
}
// The extra's fill function: CTN_ERR_INVALID_ARGUMENT unless `state` and `out` are set and the
// caller's out->struct_size covers Io; otherwise fill(io) fills a zeroed Io whose struct_size
// (the caller's) and version are set, and only when it returns CTN_OK is *out overwritten (later
// versions fill only what fits: struct_size).
template <class Io, class Fill>
ctn_status interop_answer(void *state, Io *out, uint32_t version, Fill &&fill) {
  if (!state || !out || out->struct_size < sizeof(Io)) return CTN_ERR_INVALID_ARGUMENT;
  Io io{};
  io.struct_size = out->struct_size;
  io.version = version;
  if (ctn_status st = fill(io); st != CTN_OK) return st;
  std::memcpy(out, &io, sizeof io);
  return CTN_OK;
}

// The "placement" option and CHUTNEY_<BACKEND>_PLACEMENT: "always" (false) or "auto" (true) into
// *auto_mode; false for any other value (then *auto_mode is unchanged).
// The on-disk cache directory of the GPU backends (compiled programs, pipeline caches, placement
// policies): $CHUTNEY_CACHE_DIR (created when needed), else $XDG_CACHE_HOME/chutney, else
// ~/.cache/chutney, where XDG_CACHE_HOME or HOME is an existing directory; "" (no disk cache)
// when none is: nothing is created under a HOME that does not exist.
std::string cache_directory();

// A CHUTNEY_* on/off variable: on only for "1" (libchutney refuses any value but 0 and 1 when a
// context is made, so "0" and unset both mean off).
inline bool env_flag(const char *name) {
  const char *v = std::getenv(name);
  return v != nullptr && v[0] == '1' && v[1] == '\0';
}

inline bool parse_placement(const char *value, bool *auto_mode) {
  if (std::strcmp(value, "always") == 0) *auto_mode = false;
  else if (std::strcmp(value, "auto") == 0) *auto_mode = true;
  else return false;
  return true;
}

// Fills get_kernel's answer: fn(state), freed by release(state), with flags (CTN_KERNEL_*) and
// workspace bytes.
inline void kernel_fill(ctn_kernel *out, ctn_kernel_fn fn, void *state, void (*release)(void *),
                        uint32_t flags, uint64_t workspace) {
  *out = ctn_kernel{fn, state, release, workspace, flags, 0};
}

// CTN_ERR_UNSUPPORTED "<backend> <op>: dtype <dt> is not supported (f32, f64 only)" unless `dt`
// is f32 or f64; CTN_OK otherwise.
ctn_status need_float(const ctn_host_api *host, const char *backend, const char *op, int32_t dt);

// ---- elementwise with broadcasting ----------------------------------------------------------
// The output walk of an elementwise op of up to kEwMaxIn inputs: `n` output elements; mode[j] 0
// when input j has the output's element count (same index), 1 when it is one element, 2 when it
// needs the strided walk (general). For the general walk, the output's dims with size-1 dims
// dropped and neighbours whose strides chain for every input merged (at least one dim), and per
// input its element strides (0 on broadcast axes).
constexpr int kEwMaxIn = 3;
struct EwWalk {
  int64_t n = 0;
  int nin = 0;
  int mode[kEwMaxIn] = {};
  bool general = false;
  int nd = 0;
  int64_t shape[CTN_MAX_DIMS] = {};
  int64_t str[kEwMaxIn][CTN_MAX_DIMS] = {};
};
EwWalk ew_walk(const ctn_op_signature *sig);

// ---- matmul / matmul_bias_act ------------------------------------------------------------------
// Whether `op` is one of the two (the matmul makers' first question); *fused: matmul_bias_act.
inline bool is_matmul_op(const char *op, bool *fused) {
  *fused = !std::strcmp(op, CTN_OP_MATMUL_BIAS_ACT);
  return *fused || !std::strcmp(op, CTN_OP_MATMUL);
}

struct MatmulDims {
  bool ta = false, tb = false;  // attrs i[0], i[1]
  int64_t m = 0, n = 0, k = 0;
  int act = 0;                  // matmul_bias_act: attrs i[2] (CTN_ACT_*)
  ctn_tensor_desc a_batch{}, b_batch{}, y_batch{};  // the leading (batch) dims
  int64_t batches = 1;          // elements of y_batch
  // Strides of a's and b's matrices over y_batch's dims, in matrices (0: broadcast).
  int64_t sa[CTN_MAX_DIMS] = {}, sb[CTN_MAX_DIMS] = {};
  // Per batch of y: the offsets of a's and b's matrices, in elements; filled by batch_tables
  // only, for backends that hand the kernel a table. Memory proportional to the batch count:
  // the CPU backend computes offsets() as each batch runs instead (a [1, 2^39, 2, 2] operand
  // made an 8 TB table, found by fuzz_graph).
  std::vector<int64_t> a_off, b_off;
  // The element offsets of a's and b's matrices of batch i of y.
  void offsets(int64_t i, int64_t *oa, int64_t *ob) const {
    int64_t ra = 0, rb = 0;
    for (int d = static_cast<int>(y_batch.ndim) - 1; d >= 0 && i; --d) {
      const int64_t idx = i % y_batch.shape[d];
      i /= y_batch.shape[d];
      ra += idx * sa[d];
      rb += idx * sb[d];
    }
    *oa = ra * m * k;
    *ob = rb * k * n;
  }
};
MatmulDims matmul_dims(const ctn_op_signature *sig);
// [B, M, K] @ [K, N] with one shared right operand: one GEMM of B*M rows is faster than B small
// ones. Folds the batches into m when that holds (not for a transposed a); true when it did.
// Afterwards batches == 1 and the batch dims are gone.
bool fold_batches(MatmulDims &d);
// Fills d.a_off and d.b_off (d.batches entries each).
void batch_tables(MatmulDims &d);

// ---- shape ops (reshape, permute, slice, slice_grad, concat, broadcast_to) ---------------------
enum class ShapeKind { kNone, kReshape, kPermute, kSlice, kSliceGrad, kConcat, kBroadcast };
ShapeKind shape_kind(const char *op);

// permute, slice, slice_grad and broadcast_to as one strided walk: element i of `n` (in the order
// of the walked tensor: the output, or dy for slice_grad) is element base + walk(i) of the other
// one (source; for slice_grad the destination, which is cleared first).
struct ShapeWalk {
  int64_t n = 0;
  int64_t base = 0;
  DimWalk walk;          // coalesced; a scalar or empty walk is [1] with stride 0
  bool scatter = false;  // slice_grad
  int64_t full = 0;      // slice_grad: elements of the output to clear
};
ShapeWalk shape_walk(const ctn_op_signature *sig, ShapeKind kind);

// concat along attrs i[0]: outer rows, each holding chunk[i] elements of input i in turn.
struct ConcatPlan {
  int64_t outer = 1;
  int64_t row = 0;             // elements of one output row
  std::vector<int64_t> chunk;  // elements of one row of each input
};
ConcatPlan concat_plan(const ctn_op_signature *sig);

// ---- reductions, softmax family, cross-entropy -----------------------------------------------
// The family of a reduce-like op and its code within it: reduce (0 sum, 1 mean, 2 max), softmax
// (0 softmax, 1 log_softmax, 2 softmax_grad, 3 log_softmax_grad), cross-entropy (0 forward,
// 1 grad); kNone for any other op.
enum class ReduceFamily { kNone, kReduce, kSoftmax, kCrossEntropy };
ReduceFamily reduce_family(const char *op, int *code);

// get_kernel's dispatch over the family: reduce(code), softmax(code) or cross_entropy(grad);
// *handled false (and CTN_OK) for any other op.
template <class Reduce, class Softmax, class CrossEntropy>
ctn_status dispatch_reduce(const char *op, bool *handled, Reduce reduce, Softmax softmax,
                           CrossEntropy cross_entropy) {
  int code = 0;
  const ReduceFamily f = reduce_family(op, &code);
  *handled = f != ReduceFamily::kNone;
  if (f == ReduceFamily::kReduce) return reduce(code);
  if (f == ReduceFamily::kSoftmax) return softmax(code);
  return f == ReduceFamily::kCrossEntropy ? cross_entropy(code == 1) : CTN_OK;
}

// sum / mean / max: the number of input elements reduced into each output element (attrs i[0]
// is the mask of reduced axes).
int64_t reduce_count(const ctn_op_signature *sig);

// softmax family over axis attrs i[0] of x: outer x len x inner.
struct AxisDims {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisDims axis_dims(const ctn_tensor_desc &x, int64_t axis);

}  // namespace ctn_backend_util
