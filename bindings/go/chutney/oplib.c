/* The C half of ops written in Go (oplib.go): an op library descriptor in C memory whose
 * callbacks are trampolines into exported Go functions. cgo cannot call C function pointers and
 * C cannot call Go closures, so every op of every library shares these few functions and finds
 * its Go definition through user_data (ABI 1.2: callbacks receive the op and its user_data). */
#include "shim.h"

#include <chutney/oplib.h>
#include <stddef.h>
#include <stdint.h>

#include "_cgo_export.h"
#include "oplib_shim.h"

/* ctn_context_add_oplib takes a query function with no user argument; the Go side holds a
 * package mutex around goctn_oplib_add, so one pending descriptor at a time is enough. */
static const ctn_oplib_desc *goctn_pending;

static const ctn_plugin_header *goctn_oplib_query(uint32_t host_abi_version, const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return goctn_pending != NULL ? &goctn_pending->header : NULL;
}

/* A Go callback's failure: its message (malloc'ed by Go, or NULL) goes to the host, which copies
 * it. */
static ctn_status goctn_fail(const ctn_host_api *host, ctn_status code, char *msg) {
  if (code == CTN_OK) code = CTN_ERR_INTERNAL;
  if (host != NULL && CTN_STRUCT_HAS(ctn_host_api, host, set_error_message)) {
    host->set_error_message(code, msg != NULL ? msg : "op written in Go failed");
  } else if (host != NULL) {
    host->set_error(code, "%s", msg != NULL ? msg : "op written in Go failed");
  }
  free(msg);
  return code;
}

static uintptr_t goctn_handle_of(void *user_data) { return *(const uintptr_t *)user_data; }

static ctn_status goctn_infer_tramp(const ctn_host_api *host, const struct ctn_op_def *op, void *user_data,
                                    uint32_t n_inputs, const ctn_tensor_desc *inputs,
                                    const ctn_attrs *attrs, ctn_tensor_desc *out) {
  (void)op;
  char *msg = NULL;
  ctn_status s = goctnOpInfer(goctn_handle_of(user_data), n_inputs, (ctn_tensor_desc *)inputs,
                              (ctn_attrs *)attrs, out, &msg);
  return s == CTN_OK ? CTN_OK : goctn_fail(host, s, msg);
}

static ctn_status goctn_grad_tramp(const ctn_host_api *host, const struct ctn_op_def *op, void *user_data,
                                   ctn_graph *g, uint32_t n_inputs, const ctn_node *inputs,
                                   ctn_node output, ctn_node grad_out, const ctn_attrs *attrs,
                                   ctn_node *grad_inputs) {
  (void)op;
  char *msg = NULL;
  ctn_status s = goctnOpGrad((ctn_host_api *)host, goctn_handle_of(user_data), g, n_inputs,
                             (ctn_node *)inputs, output, grad_out, (ctn_attrs *)attrs, grad_inputs, &msg);
  return s == CTN_OK ? CTN_OK : goctn_fail(host, s, msg);
}

static ctn_status goctn_kernel_make(const ctn_host_api *host, const struct ctn_op_def *op, void *user_data,
                                    const char *backend, uint32_t n_inputs, const ctn_tensor_desc *inputs,
                                    const ctn_tensor_desc *output, const ctn_attrs *attrs, ctn_kernel *out) {
  (void)op;
  (void)user_data;
  (void)backend;
  (void)n_inputs;
  (void)inputs;
  (void)output;
  (void)attrs;
  /* fn NULL: the host calls the ctn_op_kernel's run with user_data, which finds the Go kernel;
   * the state is the host table, through which run reports errors (nothing to release). */
  out->fn = NULL;
  out->state = (void *)host;
  out->release = NULL;
  out->workspace_size = 0;
  out->flags = 0;
  return CTN_OK;
}

static ctn_status goctn_kernel_run(const struct ctn_op_def *op, void *user_data, void *state,
                                   const ctn_kernel_args *args) {
  (void)op;
  char *msg = NULL;
  ctn_status s = goctnOpKernel(goctn_handle_of(user_data), (ctn_kernel_args *)args, &msg);
  return s == CTN_OK ? CTN_OK : goctn_fail((const ctn_host_api *)state, s, msg);
}

goctn_oplib *goctn_oplib_new(const char *name, uint32_t n_ops) {
  goctn_oplib *l = (goctn_oplib *)calloc(1, sizeof *l);
  if (l == NULL) return NULL;
  l->name = strdup(name);
  l->ops = (ctn_op_def *)calloc(n_ops, sizeof *l->ops);
  l->kernels = (ctn_op_kernel *)calloc(n_ops, sizeof *l->kernels);
  l->handles = (uintptr_t *)calloc(n_ops, sizeof *l->handles);
  l->strings = (char **)calloc(2 * (size_t)n_ops, sizeof *l->strings);
  l->n_ops = n_ops;
  if (l->name == NULL || l->ops == NULL || l->kernels == NULL || l->handles == NULL || l->strings == NULL) {
    goctn_oplib_free(l);
    return NULL;
  }
  l->desc.header.struct_size = sizeof l->desc;
  l->desc.header.abi_major = CTN_ABI_MAJOR;
  l->desc.header.abi_minor = 2; /* the user_data callbacks below are 1.2 */
  l->desc.header.kind = CTN_PLUGIN_OPLIB;
  l->desc.header.name = l->name;
  l->desc.n_ops = n_ops;
  l->desc.ops = l->ops;
  return l;
}

int goctn_oplib_set(goctn_oplib *l, uint32_t i, const char *name, const char *doc, uint32_t n_inputs,
                    uintptr_t handle, int differentiable) {
  char *n = strdup(name), *d = strdup(doc);
  if (n == NULL || d == NULL) {
    free(n);
    free(d);
    return 0;
  }
  l->strings[2 * i] = n;
  l->strings[2 * i + 1] = d;
  l->handles[i] = handle;
  ctn_op_kernel *k = &l->kernels[i];
  k->struct_size = sizeof *k;
  k->backend = "cpu";
  k->make = goctn_kernel_make;
  k->run = goctn_kernel_run;
  ctn_op_def *op = &l->ops[i];
  op->struct_size = sizeof *op;
  op->n_inputs = n_inputs;
  op->name = n;
  op->doc = d;
  op->user_data = &l->handles[i];
  op->infer_ex = goctn_infer_tramp;
  op->grad_ex = differentiable ? goctn_grad_tramp : NULL;
  op->n_kernels_ex = 1;
  op->kernels_ex = k;
  return 1;
}

goctn_ret goctn_oplib_add(void *ctx, goctn_oplib *l) {
  goctn_pending = &l->desc;
  goctn_ret r = goctn_result(ctn_context_add_oplib((ctn_context *)ctx, goctn_oplib_query));
  goctn_pending = NULL;
  return r;
}

void goctn_oplib_free(goctn_oplib *l) {
  if (l == NULL) return;
  if (l->strings != NULL) {
    for (uint32_t i = 0; i < 2 * l->n_ops; ++i) free(l->strings[i]);
  }
  free(l->strings);
  free(l->handles);
  free(l->kernels);
  free(l->ops);
  free(l->name);
  free(l);
}

ctn_status goctn_host_graph_op(const ctn_host_api *host, ctn_graph *g, const char *op, uint32_t n_inputs,
                               const ctn_node *inputs, const ctn_attrs *attrs, ctn_node *out) {
  return host->graph_op(g, op, n_inputs, inputs, attrs, out);
}

ctn_status goctn_host_graph_scalar(const ctn_host_api *host, ctn_graph *g, ctn_dtype dtype, double value,
                                   ctn_node *out) {
  return host->graph_scalar(g, dtype, value, out);
}

ctn_status goctn_host_graph_node_info(const ctn_host_api *host, ctn_graph *g, ctn_node n, ctn_dtype *dtype,
                                      uint32_t *ndim, int64_t *shape) {
  return host->graph_node_info(g, n, dtype, ndim, shape);
}

goctn_ret goctn_op_support(void *ctx, const char *backend, const char *op, ctn_dtype dtype, int32_t *supported,
                           char **reason) {
  const char *r = NULL;
  goctn_ret ret = goctn_result(ctn_context_op_support((ctn_context *)ctx, backend, op, dtype, supported, &r));
  *reason = (ret.status == CTN_OK && r != NULL) ? strdup(r) : NULL;
  return ret;
}
