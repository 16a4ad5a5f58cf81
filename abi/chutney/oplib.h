/* chutney custom-op library interface. C99.
 *
 * An op library exports ctn_plugin_query (plugin.h) returning a ctn_oplib_desc whose
 * header.kind is CTN_PLUGIN_OPLIB. Each op it declares gets a schema (shape inference), an
 * optional gradient rule built from graph ops through the host API, and kernels per backend
 * name. Ops from libraries are used exactly like built-in ones: ctn_op(g, "swish", ...).
 *
 * Op names are namespaced (docs/ABI.md, "Op namespaces"): an op's qualified name is
 * "<domain>::<name>", the domain being the library's header.name unless ctn_op_def.name declares
 * one ("com.example::myop"; "ctn" is the built-ins' and reserved). A plain name that a built-in
 * op or another library also uses never rejects the library: the plain name resolves to the
 * first loaded library's op (shadowing a built-in of that name), and the collision is reported
 * (ctn_context_plugin_report, the log).
 *
 * Threading: a context may be used from several threads at once (chutney.h), so the callbacks
 * may run concurrently: infer and grad while graphs are built (each call on its own graph),
 * get_kernel while plans compile. Kernels for a backend that sets CTN_BACKEND_CONCURRENT
 * (backend.h; the CPU backend does) may run on several threads at once, one kernel state
 * included (eager graphs share cached kernels): keep the state read-only after get_kernel and
 * put per-call memory in the workspace (ctn_kernel.workspace_size). For any other backend the
 * host serialises get_kernel, kernel calls and kernel releases with that backend's own calls.
 * init and shutdown run once per context that loads the library, never concurrently with that
 * context's other calls; contexts share the library's static storage.
 */
#ifndef CHUTNEY_OPLIB_H
#define CHUTNEY_OPLIB_H

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Output shape and dtype of an op, given its inputs' (data pointers are NULL). Sets out->dtype,
 * out->ndim and out->shape; errors via host->set_error (CTN_ERR_SHAPE / CTN_ERR_DTYPE). */
typedef ctn_status (*ctn_infer_fn)(const ctn_host_api *host, uint32_t n_inputs,
                                   const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                                   ctn_tensor_desc *out);

/* Gradient rule: given the forward node's inputs, its output and the gradient flowing into its
 * output (`grad_out`), adds nodes to `g` through host->graph_op and writes into grad_inputs[i]
 * the node holding d loss / d inputs[i], or CTN_NODE_NONE for an input with no gradient. */
typedef ctn_status (*ctn_grad_fn)(const ctn_host_api *host, ctn_graph *g, uint32_t n_inputs,
                                  const ctn_node *inputs, ctn_node output, ctn_node grad_out,
                                  const ctn_attrs *attrs, ctn_node *grad_inputs);

/* A kernel maker for one backend; same contract as ctn_backend_desc.get_kernel. Frozen (no
 * struct_size, array element): 2 pointers, never extended. 1.2 kernel makers use ctn_op_kernel. */
typedef struct ctn_oplib_kernel {
  const char *backend;          /* backend name the kernel is for; "cpu" kernels get host ptrs */
  ctn_status (*get_kernel)(const ctn_host_api *host, uint32_t n_inputs,
                           const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                           const ctn_attrs *attrs, ctn_kernel *out);
} ctn_oplib_kernel;

/* ---- since 1.2: callbacks that receive the op definition and its user_data -------------------
 * One function can then serve many ops: a trampoline into Rust, Go or Python finds the op from
 * `op` (the element of the library's ops array, or of the array given to ctn_context_add_oplib:
 * the same address every call) or from `user_data` (op->user_data, passed for convenience).
 * The host reads these slots only from libraries whose header declares ABI minor >= 2. */
struct ctn_op_def;

/* As ctn_infer_fn. since 1.2 */
typedef ctn_status (*ctn_op_infer_fn)(const ctn_host_api *host, const struct ctn_op_def *op,
                                      void *user_data, uint32_t n_inputs,
                                      const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                                      ctn_tensor_desc *out);
/* As ctn_grad_fn. since 1.2 */
typedef ctn_status (*ctn_op_grad_fn)(const ctn_host_api *host, const struct ctn_op_def *op,
                                     void *user_data, ctn_graph *g, uint32_t n_inputs,
                                     const ctn_node *inputs, ctn_node output, ctn_node grad_out,
                                     const ctn_attrs *attrs, ctn_node *grad_inputs);
/* Tangent rule for forward mode (ctn_jvp, chutney.h): given the forward node's inputs, its
 * output and the tangents of its inputs (tangents[i] has inputs[i]'s dtype and shape, or is
 * CTN_NODE_NONE for a zero tangent), adds nodes to `g` through host->graph_op and writes into
 * *tangent_out the node holding the output's tangent (the output's dtype and shape), or
 * CTN_NODE_NONE when it is zero. The host checks the shape. Without a rule, ctn_jvp through the
 * op fails with CTN_ERR_UNSUPPORTED naming it. since 1.2 */
typedef ctn_status (*ctn_op_jvp_fn)(const ctn_host_api *host, const struct ctn_op_def *op,
                                    void *user_data, ctn_graph *g, uint32_t n_inputs,
                                    const ctn_node *inputs, ctn_node output,
                                    const ctn_node *tangents, const ctn_attrs *attrs,
                                    ctn_node *tangent_out);
/* As ctn_oplib_kernel.get_kernel; `backend` is the name of the backend the kernel will run on
 * (for a "cpu" entry: any host-memory backend, see backend.h). since 1.2 */
typedef ctn_status (*ctn_op_kernel_make_fn)(const ctn_host_api *host, const struct ctn_op_def *op,
                                            void *user_data, const char *backend,
                                            uint32_t n_inputs, const ctn_tensor_desc *inputs,
                                            const ctn_tensor_desc *output,
                                            const ctn_attrs *attrs, ctn_kernel *out);
/* Runs a kernel made by a ctn_op_kernel whose make left out->fn NULL: `state` is out->state
 * (released by out->release as usual). since 1.2 */
typedef ctn_status (*ctn_op_kernel_run_fn)(const struct ctn_op_def *op, void *user_data,
                                           void *state, const ctn_kernel_args *args);

/* A 1.2 kernel maker for one backend. Array element strided by struct_size: the host reads
 * element i at (const char *)kernels_ex + i * kernels_ex[0].struct_size, and every element
 * must carry the same struct_size. since 1.2 */
typedef struct ctn_op_kernel {
  uint32_t struct_size;         /* sizeof(ctn_op_kernel) */
  uint32_t reserved;            /* zero */
  const char *backend;          /* as ctn_oplib_kernel.backend */
  ctn_op_kernel_make_fn make;   /* required */
  /* (optional) When make leaves out->fn NULL, the host runs the kernel by calling
   * run(op, user_data, out->state, args): one run function can serve every op. */
  ctn_op_kernel_run_fn run;
} ctn_op_kernel;

/* One op of a library. Array element strided by struct_size: the host reads element i at
 * (const char *)ops + i * ops[0].struct_size (1.0 and 1.1 libraries declare the 56-byte 1.1
 * struct on LP64), and every element must carry the same struct_size. */
typedef struct ctn_op_def {
  uint32_t struct_size;         /* sizeof(ctn_op_def) */
  uint32_t n_inputs;            /* exact number of inputs */
  const char *name;             /* op name used in ctn_op; "domain::name" declares its domain */
  const char *doc;              /* one line: what it computes, attributes */
  ctn_infer_fn infer;           /* required unless infer_ex (1.2) is set */
  ctn_grad_fn grad;             /* (optional) NULL (and no grad_ex): not differentiable */
  uint32_t n_kernels;
  const ctn_oplib_kernel *kernels;

  /* --- since 1.2 (read only from libraries declaring minor >= 2) --- */
  void *user_data;              /* handed to the callbacks below; owned by the library */
  ctn_op_infer_fn infer_ex;     /* when set, called instead of infer */
  ctn_op_grad_fn grad_ex;       /* when set, called instead of grad */
  uint32_t n_kernels_ex;
  uint32_t reserved;            /* zero */
  /* Kernel makers searched before `kernels` (exact backend match first in either list, then a
   * "cpu" entry on a host-memory backend). */
  const ctn_op_kernel *kernels_ex;
  /* (optional) Forward-mode tangent rule; read when struct_size covers it (a 1.2 library built
   * before this slot existed declares a smaller struct and simply has none). since 1.2 */
  ctn_op_jvp_fn jvp_ex;
} ctn_op_def;

typedef struct ctn_oplib_desc {
  ctn_plugin_header header;     /* frozen prefix; header.kind == CTN_PLUGIN_OPLIB */

  /* --- since 1.0 --- */
  /* (optional) Called once after the header is accepted. NULL: nothing to set up. */
  ctn_status (*init)(const ctn_host_api *host);
  /* (optional) Called before unloading. */
  void (*shutdown)(void);
  uint32_t n_ops;
  const ctn_op_def *ops;        /* n_ops definitions (strided by ops[0].struct_size), static
                                   storage, or storage that outlives the context for
                                   ctn_context_add_oplib */
} ctn_oplib_desc;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_OPLIB_H */
