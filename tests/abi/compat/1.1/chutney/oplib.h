/* chutney custom-op library interface. C99.
 *
 * An op library exports ctn_plugin_query (plugin.h) returning a ctn_oplib_desc whose
 * header.kind is CTN_PLUGIN_OPLIB. Each op it declares gets a schema (shape inference), an
 * optional gradient rule built from graph ops through the host API, and kernels per backend
 * name. Ops from libraries are used exactly like built-in ones: ctn_op(g, "swish", ...).
 *
 * Op names must not collide with built-in ops or ops of other loaded libraries (the second is
 * rejected with CTN_ERR_PLUGIN naming both).
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

/* A kernel maker for one backend; same contract as ctn_backend_desc.get_kernel. */
typedef struct ctn_oplib_kernel {
  const char *backend;          /* backend name the kernel is for; "cpu" kernels get host ptrs */
  ctn_status (*get_kernel)(const ctn_host_api *host, uint32_t n_inputs,
                           const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                           const ctn_attrs *attrs, ctn_kernel *out);
} ctn_oplib_kernel;

typedef struct ctn_op_def {
  uint32_t struct_size;         /* sizeof(ctn_op_def) */
  uint32_t n_inputs;            /* exact number of inputs */
  const char *name;             /* op name used in ctn_op */
  const char *doc;              /* one line: what it computes, attributes */
  ctn_infer_fn infer;           /* required */
  ctn_grad_fn grad;             /* (optional) NULL: the op is not differentiable */
  uint32_t n_kernels;
  const ctn_oplib_kernel *kernels;
} ctn_op_def;

typedef struct ctn_oplib_desc {
  ctn_plugin_header header;     /* frozen prefix; header.kind == CTN_PLUGIN_OPLIB */

  /* --- since 1.0 --- */
  /* (optional) Called once after the header is accepted. NULL: nothing to set up. */
  ctn_status (*init)(const ctn_host_api *host);
  /* (optional) Called before unloading. */
  void (*shutdown)(void);
  uint32_t n_ops;
  const ctn_op_def *ops;        /* n_ops definitions, static storage */
} ctn_oplib_desc;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_OPLIB_H */
