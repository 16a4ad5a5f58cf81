/* Declarations shared by oplib.c and oplib.go (the preamble of a file with //export may only
 * declare). */
#ifndef CHUTNEY_GO_OPLIB_SHIM_H
#define CHUTNEY_GO_OPLIB_SHIM_H

#include <chutney/oplib.h>
#include <stdint.h>

/* One library of ops written in Go, all in C memory: the descriptor, the op definitions, their
 * kernel makers, and the cgo.Handle of each op's Go definition (what user_data points at). It
 * must outlive the context it is added to. */
typedef struct goctn_oplib {
  ctn_oplib_desc desc;
  ctn_op_def *ops;
  ctn_op_kernel *kernels;
  uintptr_t *handles;
  char **strings; /* each op's name and doc */
  char *name;
  uint32_t n_ops;
} goctn_oplib;

goctn_oplib *goctn_oplib_new(const char *name, uint32_t n_ops);
int goctn_oplib_set(goctn_oplib *l, uint32_t i, const char *name, const char *doc, uint32_t n_inputs,
                    uintptr_t handle, int differentiable);
goctn_ret goctn_oplib_add(void *ctx, goctn_oplib *l);
void goctn_oplib_free(goctn_oplib *l);
ctn_status goctn_host_graph_op(const ctn_host_api *host, ctn_graph *g, const char *op, uint32_t n_inputs,
                               const ctn_node *inputs, const ctn_attrs *attrs, ctn_node *out);
ctn_status goctn_host_graph_scalar(const ctn_host_api *host, ctn_graph *g, ctn_dtype dtype, double value,
                                   ctn_node *out);
ctn_status goctn_host_graph_node_info(const ctn_host_api *host, ctn_graph *g, ctn_node n, ctn_dtype *dtype,
                                      uint32_t *ndim, int64_t *shape);
/* ctn_context_op_support with the reason copied (malloc'ed, NULL when none) in the same C call. */
goctn_ret goctn_op_support(void *ctx, const char *backend, const char *op, ctn_dtype dtype, int32_t *supported,
                           char **reason);

#endif
