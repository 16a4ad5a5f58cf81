/* chutney device-backend plugin interface. C99.
 *
 * A backend plugin exports ctn_plugin_query (plugin.h) returning a ctn_backend_desc whose
 * header.kind is CTN_PLUGIN_BACKEND. The host:
 *   1. checks header (major must equal CTN_ABI_MAJOR; any minor is accepted, see version.h);
 *   2. calls init once; CTN_ERR_UNAVAILABLE with a reason ("unavailable: no OpenCL platform")
 *      marks the backend unavailable and the rest of the runtime keeps working;
 *   3. at compile time asks get_kernel for each node placed on the backend (CTN_ERR_UNSUPPORTED
 *      with a reason lets the node go to the next backend), allocates arenas with buffer_alloc,
 *      and at run time calls kernels in schedule order;
 *   4. calls shutdown (which must join the backend's threads) before dlclose.
 *
 * Every slot returning ctn_status records its message with host->set_error on failure. Slots
 * marked (optional) may be NULL; the comment says what the host does then.
 *
 * Threading: a context may be used from several threads at once (chutney.h), so the host may
 * call a backend from several threads. Unless the backend sets CTN_BACKEND_CONCURRENT, the host
 * serialises every call on one backend state (slots, kernels, plan segments and kernel
 * releases), one call at a time, though calls of different plans may interleave between calls.
 * init, describe and shutdown are never called concurrently with anything on that state.
 */
#ifndef CHUTNEY_BACKEND_H
#define CHUTNEY_BACKEND_H

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Backend flags (ctn_backend_desc.flags). */
#define CTN_BACKEND_HOST_MEMORY 1u /* buffers are host pointers: kernels of op libraries for
                                      "cpu" may run on them, and no copy is needed to the CPU */
/* The backend may be called from several threads at once: every slot except init and shutdown,
 * its kernels (one kernel state may run on several threads at once with different args: the
 * host's eager cache shares kernels between graphs) and plan segments. Without it the host
 * serialises the calls. since 1.2 */
#define CTN_BACKEND_CONCURRENT 2u

/* Configuration handed to init. */
typedef struct ctn_backend_config {
  uint32_t struct_size;
  int32_t num_threads; /* worker threads for host backends; >= 1 */
} ctn_backend_config;

/* What get_kernel is asked for: one node, its input and output layouts (data is NULL).
 * struct_size tells a host's version apart: read a field appended after 1.0 only where
 * struct_size covers it (ctn_sig_const_inputs does for const_inputs). */
typedef struct ctn_op_signature {
  uint32_t struct_size;
  uint32_t n_inputs;
  const char *op;                 /* op name, see ops.h */
  const ctn_tensor_desc *inputs;  /* n_inputs descriptors */
  const ctn_tensor_desc *output;  /* one output */
  const ctn_attrs *attrs;         /* never NULL */
  /* ---- since 1.7: constant inputs (issue 27 part 4) ---- */
  /* Bit i (i < 64) set: input i is a constant of the plan: every call of this kernel gets the
   * same data pointer and offset for it, holding the same contents, for as long as the kernel
   * lives, so the kernel may derive data from it once (pack weights, sum rows) and reuse it,
   * keyed by the pointer. A hint: 0 is always allowed (eager graphs, inputs, variables, a host
   * older than 1.7), and a kernel must still accept any pointer it is given. */
  uint64_t const_inputs;
  /* ---- end of constant inputs ---- */
} ctn_op_signature;

/* One kernel call of a plan segment (see plan_prepare). Frozen array element. since 1.1 */
typedef struct ctn_plan_call {
  const ctn_kernel *kernel;
  const ctn_kernel_args *args;
} ctn_plan_call;

typedef struct ctn_backend_desc {
  ctn_plugin_header header; /* frozen prefix; header.kind == CTN_PLUGIN_BACKEND */

  /* --- since 1.0 --- */
  uint32_t flags;           /* CTN_BACKEND_* */
  uint32_t reserved;

  /* Probes the device and sets up state. Must not abort when a driver is missing: return
   * host->set_error(CTN_ERR_UNAVAILABLE, "reason"). On success *out_state is passed to every
   * other slot. */
  ctn_status (*init)(const ctn_host_api *host, const ctn_backend_config *config,
                     void **out_state);

  /* Frees everything and joins threads. Accepts the state of a successful init only. */
  void (*shutdown)(void *state);

  /* A human-readable device description ("AMD EPYC, 2 threads, OpenBLAS 0.3.21"), owned by the
   * backend and valid until shutdown. */
  const char *(*describe)(void *state);

  /* Device memory. *out_handle is what kernels receive in ctn_tensor_desc.data (a host pointer
   * for CTN_BACKEND_HOST_MEMORY backends). Alignment: at least 64 bytes. */
  ctn_status (*buffer_alloc)(void *state, uint64_t bytes, void **out_handle);
  void (*buffer_free)(void *state, void *handle);

  /* Host <-> device copies of `bytes` bytes at byte `offset` of a buffer; complete on return. */
  ctn_status (*upload)(void *state, void *handle, uint64_t offset, const void *src,
                       uint64_t bytes);
  ctn_status (*download)(void *state, void *handle, uint64_t offset, void *dst, uint64_t bytes);

  /* A kernel for one node. CTN_ERR_UNSUPPORTED (with a reason) when the backend cannot run it.
   * The kernel may be specialised for the shapes given. Called at compile time only. */
  ctn_status (*get_kernel)(void *state, const ctn_op_signature *sig, ctn_kernel *out);

  /* Waits until every kernel submitted so far has finished. (optional) NULL: kernels are
   * synchronous. */
  ctn_status (*synchronize)(void *state);

  /* Sets a backend option by key ("num_threads" "4", "gemm" "own"). (optional) NULL: the backend
   * takes no options. Unknown keys: CTN_ERR_INVALID_ARGUMENT. */
  ctn_status (*set_option)(void *state, const char *key, const char *value);

  /* Backend-specific extras looked up by name (e.g. "cpu_thread_pool"). (optional) NULL: none.
   * Returns NULL for an unknown name. */
  void *(*get_proc_address)(void *state, const char *name);

  /* --- since 1.1 --- */

  /* Plan segments. (optional, all three or none) At compile time the host hands the backend each
   * run of consecutive steps of a plan that execute on it. The backend may record them once (a
   * command buffer, a CUDA graph) and replay the recording in plan_run, instead of the host
   * calling every kernel in turn. The calls, their kernels and args (and every descriptor they
   * point to) stay valid and unchanged until plan_release; data in the buffers changes between
   * runs. plan_run may return before the work completes (the host calls synchronize before
   * reading results). NULL: the host calls the kernels one by one. */
  ctn_status (*plan_prepare)(void *state, uint32_t n_calls, const ctn_plan_call *calls,
                             void **out_segment);
  ctn_status (*plan_run)(void *state, void *segment);
  void (*plan_release)(void *state, void *segment);
} ctn_backend_desc;

/* sig->const_inputs where the host's struct_size covers the field, else 0 (a 1.6 host or older
 * says nothing about constants). since 1.7 */
static inline uint64_t ctn_sig_const_inputs(const ctn_op_signature *sig) {
  const uint32_t end = (uint32_t)(offsetof(ctn_op_signature, const_inputs) + sizeof(uint64_t));
  return sig->struct_size >= end ? sig->const_inputs : 0;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_BACKEND_H */
