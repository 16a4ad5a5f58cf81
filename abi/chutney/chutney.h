/* chutney user API. C99.
 *
 * Conventions (apply to every function below unless its comment says otherwise):
 *  - Returns ctn_status: CTN_OK (0) or an error code; the message for the last failing call on
 *    the calling thread is returned by ctn_last_error(). Out-parameters are untouched on failure.
 *  - Handles are opaque. *_release functions return void and accept NULL.
 *  - Ownership: a function that returns a handle through an out-parameter transfers ownership
 *    to the caller, who releases it. Input handles are borrowed for the duration of the call.
 *  - Thread-safety: a ctn_context may be used from several threads at once: graphs, eager
 *    graphs and plans of one context may be built, compiled and run concurrently, with the
 *    results of running them one after another (bit for bit), and ctn_context_set_backends,
 *    _set_num_threads and _set_option may be called meanwhile. Exceptions: ctn_context_load_plugin
 *    (it changes the op registry) and ctn_context_release must not overlap other calls on the
 *    context. A ctn_graph, ctn_plan or ctn_tensor must not be used from two threads at once
 *    (distinct objects may); a tensor may be read by several threads at once, e.g. one feed
 *    given to several plans. Distinct contexts may be created and released on several threads
 *    at once (plugin initialisation and unloading are serialised inside the library).
 *  - No function aborts the process or lets a C++ exception escape.
 *  - Returned strings (since 1.2 stated once for all, in every header): a `const char *` the
 *    library hands out is owned by the library; never free or modify it. It stays valid until
 *    the object it came from is released (the context for names, descriptions and paths of
 *    backends and ops; the graph, plan, model, checkpoint... for theirs), except text built on
 *    request (ctn_context_plugin_report, ctn_graph_to_dot, ctn_plan_describe and the like),
 *    which stays valid only until the next call of the same function on the same object, and
 *    ctn_last_error(), valid until the next failing call on the calling thread. Strings with
 *    static storage (ctn_version_string, ctn_status_name, ctn_dtype_name) never expire. A
 *    function's comment names the owner when it is not obvious; copy a string to keep it longer.
 *  - "since 1.0" marks the ABI minor version that introduced a function.
 */
#ifndef CHUTNEY_CHUTNEY_H
#define CHUTNEY_CHUTNEY_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctn_context ctn_context;
typedef struct ctn_tensor ctn_tensor;
typedef struct ctn_plan ctn_plan;
typedef struct ctn_collective ctn_collective; /* collective.h, since 1.2 */

/* =============================================================================================
 * Versions and errors
 * =========================================================================================== */

/* The ABI version this library implements, as CTN_ABI_VERSION ((major << 16) | minor).
 * Never fails. since 1.0 */
CTN_API uint32_t ctn_abi_version(void);

/* The library version as "major.minor.patch"; static storage. Never fails. since 1.0 */
CTN_API const char *ctn_version_string(void);

/* The message of the last failing call on this thread, or "" when none failed yet. The pointer
 * stays valid until the next failing call on this thread. Never fails. since 1.0 */
CTN_API const char *ctn_last_error(void);

/* A short constant name for a status code ("CTN_ERR_SHAPE"). Never fails. since 1.0 */
CTN_API const char *ctn_status_name(ctn_status status);

/* Size in bytes of one element of `dtype`, or 0 for an unknown dtype. since 1.0 */
CTN_API size_t ctn_dtype_size(ctn_dtype dtype);

/* Lower-case name of `dtype` ("f32"), or "?" for an unknown dtype. since 1.0 */
CTN_API const char *ctn_dtype_name(ctn_dtype dtype);

/* =============================================================================================
 * Contexts, plugins and backends
 * =========================================================================================== */

/* Options for ctn_context_create. Set struct_size = sizeof(ctn_context_options); zero the rest
 * for defaults. Fields added in later minors are appended. */
typedef struct ctn_context_options {
  uint32_t struct_size;
  uint32_t flags;           /* CTN_CONTEXT_* */
  const char *plugin_path;  /* extra directories to search first, ':'-separated; may be NULL */
  const char *backends;     /* preferred backends, ','-separated, e.g. "cuda,cpu"; NULL: the
                               CHUTNEY_BACKEND environment variable, else the CPU first, then
                               every other available backend */
  int32_t num_threads;      /* worker threads of host backends, 1..1024; 0: CHUTNEY_NUM_THREADS
                               (an integer 1..1024, anything else fails ctn_context_create with
                               CTN_ERR_INVALID_ARGUMENT), else the number of cores (at most
                               1024). A host backend that cannot start them (thread or memory
                               limits) is unavailable, with the reason in the report. */
  int32_t reserved;
} ctn_context_options;

/* Do not search the default plugin locations (CHUTNEY_PLUGIN_PATH, the install directory, the
 * build tree); only plugins loaded with ctn_context_load_plugin (or found in
 * options.plugin_path) are used. */
#define CTN_CONTEXT_NO_AUTOLOAD 1u

/* Creates a context: searches for plugins (explicit plugin_path, CHUTNEY_PLUGIN_PATH, the
 * install directory, the build directory), loads and initialises each. A plugin that is
 * rejected or whose device is unavailable is recorded (see ctn_context_plugin_report) and does
 * not make this call fail (a candidate that is not a regular file, a FIFO say, is rejected
 * without being opened). `options` may be NULL for defaults. Since 1.3 every CHUTNEY_*
 * environment variable is checked first (README.md lists them): a value a variable does not
 * accept fails with CTN_ERR_INVALID_ARGUMENT naming it. since 1.0 */
CTN_API ctn_status ctn_context_create(const ctn_context_options *options, ctn_context **out);

/* Shuts down every backend (joining their threads), unloads plugins, frees the context.
 * Tensors, graphs and plans created from it must be released first. since 1.0 */
CTN_API void ctn_context_release(ctn_context *ctx);

/* Loads one plugin file explicitly (a backend or an op library). Fails with CTN_ERR_PLUGIN and
 * a message naming the file and the reason when it is rejected; the context keeps working.
 * Fails with CTN_ERR_UNAVAILABLE when a backend loads but its device is absent. since 1.0 */
CTN_API ctn_status ctn_context_load_plugin(ctn_context *ctx, const char *path);

/* A report of every plugin candidate seen so far, one per line: path, verdict (loaded /
 * rejected / unavailable) and the reason; then, for each device backend with an automatic
 * placement policy, lines "placement <backend>: ..." saying what it measured and decided (this
 * call measures nothing). The string is owned by the context and valid until the next call
 * that loads a plugin or calls this function. since 1.0 */
CTN_API ctn_status ctn_context_plugin_report(ctn_context *ctx, const char **out_text);

typedef struct ctn_backend_info {
  uint32_t struct_size;     /* set by the caller to sizeof(ctn_backend_info); since 1.2 an
                               older, smaller struct receives only the fields it has */
  uint32_t available;       /* 1 when initialised and usable */
  const char *name;         /* "cpu", "opencl"... owned by the context */
  const char *description;  /* device name or the reason it is unavailable; owned by context */
  const char *path;         /* the plugin file; owned by the context */
  uint32_t abi_major;       /* the ABI the plugin was built against */
  uint32_t abi_minor;
} ctn_backend_info;

/* Number of backends known to the context, available or not. since 1.0 */
CTN_API ctn_status ctn_context_backend_count(ctn_context *ctx, uint32_t *out_count);

/* Information about backend `index` (< count). since 1.0 */
CTN_API ctn_status ctn_context_backend_info(ctn_context *ctx, uint32_t index,
                                           ctn_backend_info *out);

/* Sets the preferred backends, ','-separated ("opencl,cpu"), for every later ctn_plan_compile
 * without options.backends and every later eager op; plans compiled before keep their
 * placement. An op that the first backend cannot run goes to the next listed that can; backends
 * not listed are not used (list "cpu" last to let the CPU take the rest). Fails with
 * CTN_ERR_UNAVAILABLE naming the backends when none of the names is available; since 1.3 a name
 * that is neither loaded nor a first-party backend (cpu, cuda, opencl, vulkan), or an empty item,
 * is CTN_ERR_INVALID_ARGUMENT naming it and the known backends (a first-party backend merely
 * absent here is skipped). The same rules apply to options.backends and CHUTNEY_BACKEND.
 * since 1.0 */
CTN_API ctn_status ctn_context_set_backends(ctn_context *ctx, const char *backends);

/* Sets the worker-thread count of every host backend (1..1024, else CTN_ERR_INVALID_ARGUMENT).
 * The threads start here: when they cannot (thread or memory limits) it fails with
 * CTN_ERR_UNAVAILABLE and the reason, and the count stays as it was. May be called while other
 * threads run plans: a kernel running meanwhile finishes on the old threads. since 1.0 */
CTN_API ctn_status ctn_context_set_num_threads(ctn_context *ctx, int32_t num_threads);

/* Sets a backend-specific option, e.g. ("cpu", "gemm", "openblas" | "own"). Unknown backend or
 * key: CTN_ERR_INVALID_ARGUMENT. since 1.0 */
CTN_API ctn_status ctn_context_set_option(ctn_context *ctx, const char *backend, const char *key,
                                          const char *value);

/* ---- since 1.2: op libraries in process, backend extras ------------------------------------ */

struct ctn_plugin_header; /* plugin.h */
struct ctn_host_api;      /* plugin.h */

/* Registers an op library from a function of this process instead of a file: `query` has the
 * type and contract of the ctn_plugin_query entry point a plugin exports (plugin.h, oplib.h) and
 * must return an op-library descriptor (CTN_PLUGIN_OPLIB). Admission is exactly that of
 * ctn_context_load_plugin: the same checks, the same CTN_ERR_PLUGIN messages (a library of the
 * same name already loaded, a major mismatch...; an op name that a built-in op or another
 * library also uses is never one: see op namespaces, docs/ABI.md), and a report line whose path is
 * "<in-process>". The descriptor and everything it points to (ops, kernels, user_data) must
 * stay valid until ctn_context_release; shutdown is called then, nothing is unloaded. Like
 * ctn_context_load_plugin, must not overlap other calls on the context. Lets a program in C,
 * Rust, Go or Python (ctypes) define ops without building a shared object. since 1.2 */
CTN_API ctn_status ctn_context_add_oplib(
    ctn_context *ctx,
    const struct ctn_plugin_header *(*query)(uint32_t host_abi_version,
                                             const struct ctn_host_api *host));

/* Looks up an extra of backend `backend` by name through its get_proc_address slot (backend.h;
 * e.g. "ctn_cpu_num_threads", "ctn_opencl_queue", "ctn_cuda_stream"; each backend's doc lists
 * its extras and their C types). *out_proc receives the function (cast it to its documented
 * type) and *out_state (may be NULL) the backend state that extras take as their first
 * argument; both stay valid until ctn_context_release. The host does not serialise calls to an
 * extra: its doc says what is thread-safe. Errors: an unknown backend or NULL argument
 * (CTN_ERR_INVALID_ARGUMENT), a backend that is unavailable (CTN_ERR_UNAVAILABLE, with the
 * reason), no extra of that name (CTN_ERR_UNSUPPORTED). since 1.2 */
CTN_API ctn_status ctn_context_backend_proc(ctn_context *ctx, const char *backend,
                                           const char *name, void **out_proc, void **out_state);

/* ---- since 1.2: the op registry -------------------------------------------------------------
 * Every op the context knows, built-in or from an op library, in a stable order (built-in ops
 * first, then each library's in loading order). Index i stays the same op until a library is
 * loaded or added, which appends. The op x backend matrix of docs/OPS.md is generated from
 * these calls (tools/abi/ops_matrix). */

typedef struct ctn_op_info {
  uint32_t struct_size;     /* set by the caller to sizeof(ctn_op_info); an older, smaller
                               struct receives only the fields it has */
  int32_t n_inputs;         /* exact number of inputs; -1: variadic (one or more) */
  const char *name;         /* what ctn_op takes: the plain name when it resolves to this op,
                               else the qualified one ("ctn::softsign" for a built-in that a
                               library's softsign shadows, "lib2::x" for a later library's x) */
  const char *attributes;   /* the ctn_attrs slots it reads ("f[0] slope"), "" when none or
                               unknown (op libraries: see doc) */
  const char *doc;          /* one line on what it computes; "" when none */
  const char *origin;       /* "builtin", or the name of the op library that defines it */
  const char *origin_path;  /* the library's file, "<in-process>" for ctn_context_add_oplib,
                               "" for built-in ops */
  uint32_t differentiable;  /* 1 when ctn_grad can differentiate through it */
  uint32_t flags;           /* CTN_OP_INFO_* */
} ctn_op_info;

#define CTN_OP_INFO_ELEMENTWISE 1u /* output element i depends on input elements i only */

/* Number of ops the context knows. since 1.2 */
CTN_API ctn_status ctn_context_op_count(ctn_context *ctx, uint32_t *out_count);

/* Information about op `index` (< count); the strings are owned by the context. Errors: an
 * index out of range or a struct_size smaller than 8 (CTN_ERR_INVALID_ARGUMENT). since 1.2 */
CTN_API ctn_status ctn_context_op_info(ctn_context *ctx, uint32_t index, ctn_op_info *out);

/* Does backend `backend` run op `op` for dtype `dtype`? The context builds a small probe node of
 * the op with `dtype` as its main input type (integer inputs such as labels and ids stay
 * integer) and asks the backend for a kernel (for each part, when the op is built from other
 * ops), as compiling a plan would, with the backend's
 * current options (a placement policy may decline: set "placement" "always" to ask about the
 * capability). *out_supported is 1 or 0; *out_reason (may be NULL) is "" when supported, else
 * why not: the op's own refusal of the dtype, or the backend's reason. The reason is owned by
 * the context and valid until the next ctn_context_op_support call on the calling thread.
 * Errors: unknown op or backend (CTN_ERR_INVALID_ARGUMENT), an unavailable backend
 * (CTN_ERR_UNAVAILABLE, with the reason), a backend failing otherwise than declining. since 1.2 */
CTN_API ctn_status ctn_context_op_support(ctn_context *ctx, const char *backend, const char *op,
                                         ctn_dtype dtype, int32_t *out_supported,
                                         const char **out_reason);

/* =============================================================================================
 * Tensors (host memory)
 *
 * A ctn_tensor is an n-d array in host memory with shape, strides (in elements) and an offset
 * into a reference-counted storage. Views share the storage of their source.
 * =========================================================================================== */

/* Creates a contiguous tensor and copies `data` (ndim <= CTN_MAX_DIMS, every dim >= 0) into it;
 * `data` NULL gives zeros. `shape` may be NULL when ndim is 0 (a scalar). since 1.0 */
CTN_API ctn_status ctn_tensor_create(ctn_dtype dtype, uint32_t ndim, const int64_t *shape,
                                     const void *data, ctn_tensor **out);

/* Releases the handle; the storage is freed with its last view. Accepts NULL. since 1.0 */
CTN_API void ctn_tensor_release(ctn_tensor *t);

/* The element type. since 1.0 */
CTN_API ctn_status ctn_tensor_dtype(const ctn_tensor *t, ctn_dtype *out);
/* Writes ndim to *out_ndim and, when `out_shape` is not NULL, ndim values to out_shape.
 * since 1.0 */
CTN_API ctn_status ctn_tensor_shape(const ctn_tensor *t, uint32_t *out_ndim, int64_t *out_shape);
/* Strides in elements (ndim values). since 1.0 */
CTN_API ctn_status ctn_tensor_strides(const ctn_tensor *t, int64_t *out_strides);
/* Number of elements (1 for a 0-d tensor). since 1.0 */
CTN_API ctn_status ctn_tensor_numel(const ctn_tensor *t, int64_t *out_numel);
/* 1 when the elements are laid out row-major with no gaps. since 1.0 */
CTN_API ctn_status ctn_tensor_is_contiguous(const ctn_tensor *t, int32_t *out);

/* Copies the elements in row-major order into `dst` of `bytes` bytes; CTN_ERR_INVALID_ARGUMENT
 * when bytes != numel * dtype size. Works for non-contiguous views. since 1.0 */
CTN_API ctn_status ctn_tensor_read(const ctn_tensor *t, void *dst, size_t bytes);
/* Copies `bytes` bytes from `src` (row-major) into the tensor's elements. since 1.0 */
CTN_API ctn_status ctn_tensor_write(ctn_tensor *t, const void *src, size_t bytes);
/* Direct pointer to the first element; only for contiguous tensors (CTN_ERR_STATE otherwise).
 * Valid while the tensor is alive. since 1.0 */
CTN_API ctn_status ctn_tensor_data(ctn_tensor *t, void **out);

/* Views, no copy. Slice of axis `axis` from start (inclusive) to stop (exclusive) with step > 0;
 * negative start/stop count from the end and are clamped as in numpy. since 1.0 */
CTN_API ctn_status ctn_tensor_slice(const ctn_tensor *t, int32_t axis, int64_t start,
                                    int64_t stop, int64_t step, ctn_tensor **out);
/* Permutes the axes: out.shape[i] = t.shape[perm[i]]. since 1.0 */
CTN_API ctn_status ctn_tensor_permute(const ctn_tensor *t, const int32_t *perm,
                                      ctn_tensor **out);
/* A view with a new shape (one dim may be -1) when the strides allow it, else a contiguous copy;
 * *out_copied (may be NULL) tells which. since 1.0 */
CTN_API ctn_status ctn_tensor_reshape(const ctn_tensor *t, uint32_t ndim, const int64_t *shape,
                                      ctn_tensor **out, int32_t *out_copied);
/* A contiguous copy. since 1.0 */
CTN_API ctn_status ctn_tensor_contiguous(const ctn_tensor *t, ctn_tensor **out);

/* =============================================================================================
 * Graphs
 *
 * A graph is a DAG of nodes. Each op call infers the output dtype and shape at once: a bad call
 * fails with CTN_ERR_SHAPE / CTN_ERR_DTYPE and a message naming the op and the operands.
 *
 * An eager graph (CTN_GRAPH_EAGER) executes every node as soon as it is added, on the
 * context's preferred backend, and keeps the value; ctn_grad works the same on it (the
 * backward nodes execute as they are added). A lazy graph (flags 0) is compiled into a plan.
 * =========================================================================================== */

#define CTN_GRAPH_EAGER 1u

/* Creates an empty graph. The context must outlive it. since 1.0 */
CTN_API ctn_status ctn_graph_create(ctn_context *ctx, uint32_t flags, ctn_graph **out);
CTN_API void ctn_graph_release(ctn_graph *g);

/* A placeholder fed at run time (lazy graphs only). `name` may be NULL. since 1.0 */
CTN_API ctn_status ctn_input(ctn_graph *g, const char *name, ctn_dtype dtype, uint32_t ndim,
                             const int64_t *shape, ctn_node *out);
/* A constant; the tensor's elements are copied. since 1.0 */
CTN_API ctn_status ctn_constant(ctn_graph *g, const ctn_tensor *value, ctn_node *out);
/* A scalar constant (0-d) of `dtype`. since 1.0 */
CTN_API ctn_status ctn_scalar(ctn_graph *g, ctn_dtype dtype, double value, ctn_node *out);
/* A variable: persistent state initialised from `init` (copied), updated by ctn_assign, kept
 * across runs of a plan. Variables are what ctn_grad usually differentiates with respect to.
 * since 1.0 */
CTN_API ctn_status ctn_variable(ctn_graph *g, const char *name, const ctn_tensor *init,
                                ctn_node *out);
/* After a run computes `value`, it is written into variable `var` (same dtype and shape).
 * Returns a node that can be fetched (it evaluates to the new value). All reads of `var` in the
 * same run see the old value. since 1.0 */
CTN_API ctn_status ctn_assign(ctn_graph *g, ctn_node var, ctn_node value, ctn_node *out);

/* Any op by name (built-in or from a loaded op library) with attributes (see ops.h); `attrs`
 * may be NULL when the op takes none. Names may be qualified: "ctn::softsign" is always the
 * built-in, "mylib::softsign" library mylib's op; a plain name is the op of the first loaded
 * library that defines it, else the built-in (op namespaces, docs/ABI.md). since 1.0 */
CTN_API ctn_status ctn_op(ctn_graph *g, const char *op, uint32_t n_inputs, const ctn_node *inputs,
                          const ctn_attrs *attrs, ctn_node *out);

/* Typed helpers for the built-in ops; each equals ctn_op with the name and attributes shown in
 * ops.h. Binary elementwise ops broadcast as numpy does. since 1.0 */
CTN_API ctn_status ctn_add(ctn_graph *g, ctn_node a, ctn_node b, ctn_node *out);
CTN_API ctn_status ctn_sub(ctn_graph *g, ctn_node a, ctn_node b, ctn_node *out);
CTN_API ctn_status ctn_mul(ctn_graph *g, ctn_node a, ctn_node b, ctn_node *out);
CTN_API ctn_status ctn_div(ctn_graph *g, ctn_node a, ctn_node b, ctn_node *out);
CTN_API ctn_status ctn_pow(ctn_graph *g, ctn_node a, ctn_node b, ctn_node *out);
CTN_API ctn_status ctn_neg(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_exp(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_log(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_sqrt(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_abs(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_tanh(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_sigmoid(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_relu(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_leaky_relu(ctn_graph *g, ctn_node a, double slope, ctn_node *out);
CTN_API ctn_status ctn_gelu(ctn_graph *g, ctn_node a, ctn_node *out);
CTN_API ctn_status ctn_clamp(ctn_graph *g, ctn_node a, double lo, double hi, ctn_node *out);
/* Batched matmul over the last two dims (leading dims broadcast); trans_a/trans_b transpose
 * the operand's last two dims. 1-d operands are not promoted: use reshape. since 1.0 */
CTN_API ctn_status ctn_matmul(ctn_graph *g, ctn_node a, ctn_node b, int32_t trans_a,
                              int32_t trans_b, ctn_node *out);
/* Reductions over `n_axes` axes (n_axes 0: all axes); negative axes count from the end.
 * since 1.0 */
CTN_API ctn_status ctn_sum(ctn_graph *g, ctn_node a, uint32_t n_axes, const int32_t *axes,
                           int32_t keepdims, ctn_node *out);
CTN_API ctn_status ctn_mean(ctn_graph *g, ctn_node a, uint32_t n_axes, const int32_t *axes,
                            int32_t keepdims, ctn_node *out);
CTN_API ctn_status ctn_max(ctn_graph *g, ctn_node a, uint32_t n_axes, const int32_t *axes,
                           int32_t keepdims, ctn_node *out);
/* One dim of `shape` may be -1. since 1.0 */
CTN_API ctn_status ctn_reshape(ctn_graph *g, ctn_node a, uint32_t ndim, const int64_t *shape,
                               ctn_node *out);
/* out.shape[i] = a.shape[perm[i]]; perm has ndim(a) entries. since 1.0 */
CTN_API ctn_status ctn_permute(ctn_graph *g, ctn_node a, const int32_t *perm, ctn_node *out);
/* Swaps the last two axes. since 1.0 */
CTN_API ctn_status ctn_transpose(ctn_graph *g, ctn_node a, ctn_node *out);
/* Elements start, start+step... below stop of `axis` (as ops.h's slice, bounds clamped and
 * negative ones counted from the end). since 1.0 */
CTN_API ctn_status ctn_slice(ctn_graph *g, ctn_node a, int32_t axis, int64_t start, int64_t stop,
                             int64_t step, ctn_node *out);
/* Joins n >= 1 nodes along `axis`; the other dims must agree. since 1.0 */
CTN_API ctn_status ctn_concat(ctn_graph *g, uint32_t n, const ctn_node *inputs, int32_t axis,
                              ctn_node *out);
/* Broadcasts (numpy rules) to `shape`. since 1.0 */
CTN_API ctn_status ctn_broadcast_to(ctn_graph *g, ctn_node a, uint32_t ndim,
                                    const int64_t *shape, ctn_node *out);
/* Comparisons give CTN_BOOL: op is one of "eq" "ne" "lt" "le" "gt" "ge". since 1.0 */
CTN_API ctn_status ctn_compare(ctn_graph *g, const char *op, ctn_node a, ctn_node b,
                               ctn_node *out);
/* where(cond, a, b): cond is CTN_BOOL; all three broadcast. since 1.0 */
CTN_API ctn_status ctn_where(ctn_graph *g, ctn_node cond, ctn_node a, ctn_node b, ctn_node *out);
/* softmax / log_softmax along `axis` (negative counts from the end). since 1.0 */
CTN_API ctn_status ctn_softmax(ctn_graph *g, ctn_node a, int32_t axis, ctn_node *out);
CTN_API ctn_status ctn_log_softmax(ctn_graph *g, ctn_node a, int32_t axis, ctn_node *out);
/* Mean cross-entropy of logits [N, C] against integer labels [N] (i32 or i64): a 0-d tensor.
 * since 1.0 */
CTN_API ctn_status ctn_cross_entropy(ctn_graph *g, ctn_node logits, ctn_node labels,
                                     ctn_node *out);
/* Converts to `dtype`. since 1.0 */
CTN_API ctn_status ctn_cast(ctn_graph *g, ctn_node a, ctn_dtype dtype, ctn_node *out);

/* dtype and shape of a node (shape may be NULL to ask only ndim). since 1.0 */
CTN_API ctn_status ctn_node_info(ctn_graph *g, ctn_node n, ctn_dtype *out_dtype,
                                 uint32_t *out_ndim, int64_t *out_shape);
/* Number of nodes in the graph. since 1.0 */
CTN_API ctn_status ctn_graph_node_count(ctn_graph *g, uint32_t *out_count);

/* Reverse-mode autodiff: appends to the graph the nodes computing d loss / d wrt[i] and writes
 * their ids to out_grads[i]. `loss` must be a floating 0-d node (or have one element). A wrt
 * node that loss does not depend on gets a zero gradient node. Gradients of a value used more
 * than once are summed. Subgradients: relu'(0) = 0, abs'(0) = 0, max picks every tied maximum
 * with equal share, clamp'(lo) = clamp'(hi) = 1. since 1.0 */
CTN_API ctn_status ctn_grad(ctn_graph *g, ctn_node loss, uint32_t n_wrt, const ctn_node *wrt,
                            ctn_node *out_grads);

/* Forward mode: appends to `g` the tangents of outputs[i] (written to out_tangents[i]) when
 * inputs[j] moves along tangents[j] (a node of the input's dtype and shape, e.g. an input fed
 * with the direction): the Jacobian-vector product J v, as ordinary nodes that compile and run
 * like any graph. Composes with ctn_grad: the JVP of gradients is a Hessian-vector product.
 * Inputs must be f32/f64; an output that does not depend on them gets a zero tangent. Ops with a
 * tangent rule: the elementwise ops, comparisons (zero), where, matmul, sum, mean, max,
 * reshape, permute, slice, concat, broadcast_to, softmax, log_softmax, cross_entropy, cast,
 * conv2d, conv_transpose2d, avg_pool2d, batch_norm, dropout, embedding (in its table). Any
 * op-library op whose library sets a tangent rule (ctn_op_def.jvp_ex, oplib.h). Any other op
 * on the way (max_pool2d, layer_norm, the *_grad ops, optimizer steps, library ops without a
 * rule) fails with CTN_ERR_UNSUPPORTED naming it, and the graph is left as it was. Graphs created
 * with flags 0 only (an eager graph: CTN_ERR_STATE). since 1.2 */
CTN_API ctn_status ctn_jvp(ctn_graph *g, uint32_t n_outputs, const ctn_node *outputs, uint32_t n_inputs,
                           const ctn_node *inputs, const ctn_node *tangents, ctn_node *out_tangents);

/* Eager graphs: a copy of the value of node `n`. since 1.0 */
CTN_API ctn_status ctn_graph_value(ctn_graph *g, ctn_node n, ctn_tensor **out);

/* Eager graphs: the name of the backend that computed node `n`, or "" for leaves (inputs,
 * constants, variables) and for lazy graphs. Lets tests assert where an eager op ran. The string
 * is owned by the context. since 1.0 */
CTN_API ctn_status ctn_graph_node_backend(ctn_graph *g, ctn_node n, const char **out_name);

/* Writes the graph as Graphviz DOT into a buffer owned by the graph, valid until
 * the next call on it. since 1.0 */
CTN_API ctn_status ctn_graph_to_dot(ctn_graph *g, const char **out_text);

/* =============================================================================================
 * Plans: compiled graphs
 * =========================================================================================== */

typedef struct ctn_compile_options {
  uint32_t struct_size;   /* sizeof(ctn_compile_options) */
  uint32_t disable;       /* CTN_PASS_* bits of passes to skip */
  const char *backends;   /* NULL: the context's preference */
  /* --- since 1.2: data-parallel training (collective.h, docs/DISTRIBUTED.md) --- */
  ctn_collective *data_parallel; /* non-NULL: every gradient made by ctn_grad is averaged over
                                    the communicator's ranks where the graph uses it after
                                    ctn_grad, in fused buckets, and the variables are broadcast
                                    from rank 0 once compiled */
  uint64_t dp_bucket_bytes;      /* fusion-bucket size; 0: CTN_DP_DEFAULT_BUCKET_BYTES (64 MiB) */
  /* --- since 1.2: memory budget --- */
  uint64_t memory_budget; /* 0: none; bytes for planned_peak_bytes, or CTN_MEMORY_BUDGET_AUTO;
                           * over it, activations are dropped and recomputed (docs/EXECUTION.md) */
  /* --- since 1.5: mixed precision (docs/EXECUTION.md, *Mixed precision*) --- */
  uint32_t precision;     /* CTN_PRECISION_*: 0 (f32) computes as the graph says. BF16 / F16: the
                           * compiler's autocast runs matmul, matmul_bias_act, conv2d,
                           * conv2d_bias_act, conv_transpose2d and the convolution gradients (conv2d_grad_input,
                           * conv2d_grad_weight; matmul's are matmuls) on f32 inputs in that dtype:
                           * inputs cast down (each value once), outputs cast back to f32 where an
                           * f32 op reads them. Everything else stays f32: elementwise ops,
                           * reductions, norms, softmax, losses, optimizer updates, and the
                           * variables (f32 master weights). A node that no preferred backend has
                           * a low kernel for stays f32. A caller built against 1.4 or earlier passes
                           * a smaller struct_size and gets f32. f16 training wants loss scaling
                           * (ctn_optimizer.loss_scale, nn.h). */
  /* --- since 1.7: overlapped data-parallel allreduce (collective.h, docs/DISTRIBUTED.md) --- */
  uint32_t dp_flags;      /* CTN_DP_*. 0: each bucket's allreduce starts as soon as backward has
                           * made its gradients and the step waits for it only where the
                           * optimizer reads them, when the collective plugin has allreduce_start
                           * (else blocking). A caller built against 1.6 or earlier passes a
                           * smaller struct_size and gets 0 */
  uint32_t dp_reserved;   /* zero */
} ctn_compile_options;

/* ctn_compile_options.dp_flags: every bucket's allreduce blocks where the optimizer first reads
 * it (the 1.6 schedule). since 1.7 */
#define CTN_DP_BLOCKING 1u

/* ctn_compile_options.precision. since 1.5 */
#define CTN_PRECISION_F32 0u
#define CTN_PRECISION_BF16 1u
#define CTN_PRECISION_F16 2u

/* memory_budget: as low as recomputation gets the planned peak. since 1.2 */
#define CTN_MEMORY_BUDGET_AUTO UINT64_MAX

#define CTN_PASS_DCE 1u
#define CTN_PASS_CONSTANT_FOLDING 2u
#define CTN_PASS_SIMPLIFY 4u
#define CTN_PASS_FUSION 8u
#define CTN_PASS_MEMORY_REUSE 16u /* without it every value gets its own buffer */
/* ---- since 1.7: channels-last convolutions (issue 25) ---- */
/* The compile stage "layout": in inference plans (no assignment, no ctn_grad gradient, f32),
 * regions of 4-d convolutions and the layout-agnostic ops between them run with NHWC activations
 * (the conv ops' layout attribute, ops.h) where the first preferred backend accepts it, with
 * permutes at the regions' edges (docs/EXECUTION.md). Set the bit to keep every value NCHW. */
#define CTN_PASS_LAYOUT 32u
/* ---- end of channels-last convolutions ---- */

/* Compiles the part of the graph needed for `outputs` (and every ctn_assign node, which always
 * runs) into a plan: passes, placement on backends, memory planning, kernel preparation.
 * `options` may be NULL. The graph may be changed or released afterwards. since 1.0 */
CTN_API ctn_status ctn_plan_compile(ctn_graph *g, uint32_t n_outputs, const ctn_node *outputs,
                                    const ctn_compile_options *options, ctn_plan **out);
CTN_API void ctn_plan_release(ctn_plan *p);

typedef struct ctn_plan_stats {
  uint32_t struct_size;      /* sizeof(ctn_plan_stats) */
  uint32_t n_nodes;          /* nodes in the graph before passes */
  uint32_t n_steps;          /* kernel calls per run after passes */
  uint32_t n_fused;          /* nodes removed by fusion */
  uint32_t n_folded;         /* nodes removed by constant folding / simplification */
  uint32_t n_inplace;        /* steps writing over their input */
  uint64_t planned_peak_bytes; /* arena size for intermediate values, all devices */
  uint64_t naive_bytes;      /* sum of every intermediate value's size (no reuse) */
  uint64_t persistent_bytes; /* variables and constants */
  /* --- since 1.1 --- */
  uint32_t n_assign_elided;  /* ctn_assign copies removed: the value was computed in place */
  uint32_t reserved;
} ctn_plan_stats;

/* Fills *out up to out->struct_size (a smaller, older struct gets only the fields it has).
 * since 1.0 */
CTN_API ctn_status ctn_plan_stats_get(ctn_plan *p, ctn_plan_stats *out);

/* What a memory budget (ctn_compile_options.memory_budget) did to the plan. Without a budget,
 * peak_bytes = peak_without_budget and nothing is recomputed. since 1.2 */
typedef struct ctn_plan_memory_report {
  uint32_t struct_size;          /* sizeof(ctn_plan_memory_report) */
  uint32_t n_recomputed;         /* steps added that recompute a dropped value */
  uint64_t budget;               /* bytes asked (auto: the minimum reached), 0: none */
  uint64_t peak_without_budget;  /* planned peak of the same plan without recomputation */
  uint64_t peak_bytes;           /* planned peak achieved (= ctn_plan_stats.planned_peak_bytes) */
  uint64_t minimum_bytes;        /* lowest peak recomputation reaches (0 without a budget) */
  uint64_t flops;                /* estimated floating-point operations per run, recomputation included */
  uint64_t extra_flops;          /* of which recomputation */
  const char *recomputed;        /* one line per recomputed step ("relu f32[32, 64]"); owned by the plan */
} ctn_plan_memory_report;

/* Fills *out up to out->struct_size (set it to sizeof(ctn_plan_memory_report)). since 1.2 */
CTN_API ctn_status ctn_plan_memory_report_get(ctn_plan *p, ctn_plan_memory_report *out);

/* A text listing of the schedule: step, op, backend, shape, arena offset. Owned by the plan,
 * valid until the next call on it. since 1.0 */
CTN_API ctn_status ctn_plan_describe(ctn_plan *p, const char **out_text);

/* How many steps of the plan run on backend `name` (0 if none). Lets tests assert which backend
 * ran an op: `op` may be NULL for all ops or an op name ("matmul"). since 1.0 */
CTN_API ctn_status ctn_plan_backend_steps(ctn_plan *p, const char *backend, const char *op,
                                          uint32_t *out_count);

/* Runs the plan once. feeds: values for every ctn_input the outputs depend on (dtype and shape
 * must match exactly: CTN_ERR_SHAPE / CTN_ERR_DTYPE otherwise, naming the input). Since 1.3 a
 * feed node that is not a node of the compiled graph, a node that is not a ctn_input (a
 * variable, a constant, an op), or the same input fed twice is CTN_ERR_INVALID_ARGUMENT naming
 * it; an input of the graph that these outputs do not need may be fed and is ignored. outputs[i]
 * receives output i of the compile call; it must have the right dtype and shape (create it with
 * ctn_plan_output_create) or be NULL to skip. Every argument is checked before the first step
 * runs: a call that fails on one leaves the variables as they were. No allocation happens in
 * the steady state. since 1.0
 * Since 1.6, a plan whose outputs depend on an op with a data-dependent shape (ops.h, "since 1.6:
 * data-dependent shapes") runs in stages: ctn_plan_output_create gives the upper bound, an output
 * tensor may then have any shape (its dtype must match), and the run gives it the actual shape (a
 * new storage when the shape differs). */
CTN_API ctn_status ctn_plan_run(ctn_plan *p, uint32_t n_feeds, const ctn_node *feed_nodes,
                                const ctn_tensor *const *feed_values, uint32_t n_outputs,
                                ctn_tensor *const *outputs);

/* ---- since 1.3: run options (cancellation, deadlines, numerics checks) ----------------------
 * A cancel token: any thread may request cancellation while another runs plans with it. */
typedef struct ctn_cancel ctn_cancel;
/* A new token, not cancelled. since 1.3 */
CTN_API ctn_status ctn_cancel_create(ctn_cancel **out);
/* Requests cancellation: every run using the token stops at its next check (between steps)
 * with CTN_ERR_CANCELLED, and so does every later run until ctn_cancel_reset. Safe from any
 * thread, concurrently with runs (an atomic store). since 1.3 */
CTN_API ctn_status ctn_cancel_request(ctn_cancel *c);
/* Clears a request, for reuse. since 1.3 */
CTN_API ctn_status ctn_cancel_reset(ctn_cancel *c);
/* 1 when cancellation was requested, else 0. since 1.3 */
CTN_API ctn_status ctn_cancel_requested(const ctn_cancel *c, int32_t *out);
/* Frees the token; no run may still use it. Accepts NULL. since 1.3 */
CTN_API void ctn_cancel_release(ctn_cancel *c);

#define CTN_RUN_CHECK_NUMERICS 1u /* after every step, check its f32/f64 output for NaN/inf */

/* Options of one run. Zero-fill it (`ctn_run_options o = {0};` or designated initialisers) and set
 * struct_size = sizeof o: later minors add fields at the end, read only up to struct_size. */
typedef struct ctn_run_options {
  uint32_t struct_size; /* sizeof(ctn_run_options) */
  uint32_t flags;       /* CTN_RUN_* bits */
  ctn_cancel *cancel;   /* NULL: not cancellable */
  uint64_t timeout_us;  /* 0: none; else the run is cancelled this long after it started */
} ctn_run_options;

/* ctn_plan_run with options (NULL: as ctn_plan_run). Cancellation and the deadline are checked
 * before every step up to the first step that writes a variable (in a training plan: the
 * optimizer's updates, after forward and backward); from there the run completes, so a
 * cancelled run returns CTN_ERR_CANCELLED with every variable as it was, and one that was
 * past that point when the request came returns CTN_OK (check ctn_cancel_requested). Steps a
 * backend records as one unit (a CUDA graph) are checked at the unit's edges.
 * CTN_RUN_CHECK_NUMERICS runs every step on its own, downloads each f32/f64 output and stops
 * at the first NaN or infinity with CTN_ERR_NUMERICS naming the step, op, node and which inputs
 * were already non-finite (slow: for finding where a NaN comes from, like PyTorch's anomaly
 * mode). Variables written before the failing step keep their new values. since 1.3 */
CTN_API ctn_status ctn_plan_run_with_options(ctn_plan *p, const ctn_run_options *options, uint32_t n_feeds,
                                             const ctn_node *feed_nodes, const ctn_tensor *const *feed_values,
                                             uint32_t n_outputs, ctn_tensor *const *outputs);

/* Creates a tensor of the dtype and shape of output `index`. since 1.0 */
CTN_API ctn_status ctn_plan_output_create(ctn_plan *p, uint32_t index, ctn_tensor **out);

/* Copies the current value of variable node `var` into a new tensor. since 1.0 */
CTN_API ctn_status ctn_plan_variable_read(ctn_plan *p, ctn_node var, ctn_tensor **out);
/* Overwrites variable `var` (dtype and shape must match). since 1.0 */
CTN_API ctn_status ctn_plan_variable_write(ctn_plan *p, ctn_node var, const ctn_tensor *value);

/* =============================================================================================
 * Neural-network ops (since 1.1)
 *
 * Typed helpers for the ops of ops.h's neural-network section; each equals ctn_op with the op
 * name and attribute slots documented there. Layout NCHW, f32 or f64. Like every graph call, a
 * bad shape, dtype or attribute fails at once with CTN_ERR_SHAPE / CTN_ERR_DTYPE /
 * CTN_ERR_INVALID_ARGUMENT and a message naming the op and the operands; *out is then untouched.
 * The nodes returned belong to `g` (nothing to release). Thread-safety as for any graph call.
 * =========================================================================================== */

/* 2-d convolution (cross-correlation, no bias) of x [N,C,H,W] with w [O,C/groups,KH,KW] ->
 * [N,O,Ho,Wo], Ho = (H + 2 pad_h - dil_h (KH-1) - 1) / stride_h + 1. stride, dil, groups >= 1,
 * pad >= 0; groups divides C and O. since 1.1 */
CTN_API ctn_status ctn_conv2d(ctn_graph *g, ctn_node x, ctn_node w, int32_t stride_h,
                              int32_t stride_w, int32_t pad_h, int32_t pad_w, int32_t dil_h,
                              int32_t dil_w, int32_t groups, ctn_node *out);
/* Transposed convolution (the adjoint of ctn_conv2d w.r.t. its input) of x [N,C,H,W] with
 * w [C,O/groups,KH,KW] -> [N,O,Ho,Wo], Ho = (H-1) stride_h - 2 pad_h + dil_h (KH-1) +
 * out_pad_h + 1; 0 <= out_pad < stride. since 1.1 */
CTN_API ctn_status ctn_conv_transpose2d(ctn_graph *g, ctn_node x, ctn_node w, int32_t stride_h,
                                        int32_t stride_w, int32_t pad_h, int32_t pad_w,
                                        int32_t dil_h, int32_t dil_w, int32_t groups,
                                        int32_t out_pad_h, int32_t out_pad_w, ctn_node *out);
/* Max pooling of x [N,C,H,W] with a kh x kw window, stride sh, sw (0: the window size) and
 * padding ph, pw (at most half the window; padding never wins). The gradient goes to the first
 * maximum of each window. since 1.1 */
CTN_API ctn_status ctn_max_pool2d(ctn_graph *g, ctn_node x, int32_t kh, int32_t kw, int32_t sh,
                                  int32_t sw, int32_t ph, int32_t pw, ctn_node *out);
/* Average pooling, as ctn_max_pool2d; count_include_pad 1 divides by kh * kw, 0 by the number
 * of input elements under the window. since 1.1 */
CTN_API ctn_status ctn_avg_pool2d(ctn_graph *g, ctn_node x, int32_t kh, int32_t kw, int32_t sh,
                                  int32_t sw, int32_t ph, int32_t pw, int32_t count_include_pad,
                                  ctn_node *out);
/* Batch normalisation, training mode: x [N,C,...] normalised with the mean and biased variance
 * over every axis except 1, then scaled by gamma [C] and shifted by beta [C]; eps >= 0. Running
 * statistics are not updated: compute them with ctn_mean and ctn_assign them. since 1.1 */
CTN_API ctn_status ctn_batch_norm(ctn_graph *g, ctn_node x, ctn_node gamma, ctn_node beta,
                                  double eps, ctn_node *out);
/* Batch normalisation with given statistics mean [C] and var [C] (inference mode). since 1.1 */
CTN_API ctn_status ctn_batch_norm_inference(ctn_graph *g, ctn_node x, ctn_node gamma,
                                            ctn_node beta, ctn_node mean, ctn_node var,
                                            double eps, ctn_node *out);
/* Layer normalisation over axes first_axis..ndim-1 (negative counts from the end); gamma and
 * beta have the shape of those axes. since 1.1 */
CTN_API ctn_status ctn_layer_norm(ctn_graph *g, ctn_node x, ctn_node gamma, ctn_node beta,
                                  int32_t first_axis, double eps, ctn_node *out);
/* Dropout: zeroes each element with probability p in [0, 1) and scales the rest by 1/(1-p).
 * The mask is a counter-based hash of (seed, the value of `step` (a one-element i64 node, fed or
 * a variable the training loop increments), element index), identical on every backend (see
 * ops.h), so runs are reproducible across backends and resumes. since 1.1 */
CTN_API ctn_status ctn_dropout(ctn_graph *g, ctn_node x, ctn_node step, double p, int64_t seed,
                               ctn_node *out);
/* Rows of table [V,D] picked by ids [...] (i32 or i64) -> [..., D]. An id outside [0, V) makes
 * the run fail with CTN_ERR_INVALID_ARGUMENT. since 1.1 */
CTN_API ctn_status ctn_embedding(ctn_graph *g, ctn_node table, ctn_node ids, ctn_node *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_CHUTNEY_H */
