/* A third-party op library as written in the ABI 1.2 era, kept unchanged (the frozen
 * compatibility suite, docs/ABI.md "Compatibility policy"). Plain C99 with designated
 * initialisers, the 1.2 callbacks (infer_ex, grad_ex, jvp_ex, kernels_ex with one shared run
 * function, user_data) and host->set_error_message. Built with -std=c99 -Wall -Wextra -pedantic
 * -Werror against:
 *   the frozen 1.2 headers  -> ctn-compat-oplib-1-2.so    library "compat12"
 *   the current headers     -> ctn-compat-oplib-src12.so  library "compat12src"
 *
 * Ops (f32, cpu kernels), as oplib.c's:
 *   softsign     2 x / (1 + |x|)   gradient 2 dy / (1 + |x|)^2, tangent the same times t
 *   <name>_cube  x^3               gradient 3 x^2 dy, tangent 3 x^2 t
 */
#include <chutney/oplib.h>

#ifndef COMPAT_NAME
#error "define COMPAT_NAME"
#endif

enum { OP_SOFTSIGN = 1, OP_CUBE = 2 };
static const int op_codes[] = {OP_SOFTSIGN, OP_CUBE};

static float fabs_f(float x) { return x < 0.0f ? -x : x; }

static const ctn_host_api *g_host;

static ctn_status infer(const ctn_host_api *host, const struct ctn_op_def *op, void *user_data,
                        uint32_t n_inputs, const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                        ctn_tensor_desc *out) {
  uint32_t k;
  (void)op, (void)user_data, (void)attrs;
  if (n_inputs != 1 || inputs[0].dtype != CTN_F32)
    return host->set_error_message(CTN_ERR_DTYPE, COMPAT_NAME ": takes one f32 input");
  out->dtype = CTN_F32;
  out->ndim = inputs[0].ndim;
  for (k = 0; k < inputs[0].ndim; ++k) out->shape[k] = inputs[0].shape[k];
  return CTN_OK;
}

static ctn_status make(const ctn_host_api *host, const struct ctn_op_def *op, void *user_data,
                       const char *backend, uint32_t n_inputs, const ctn_tensor_desc *inputs,
                       const ctn_tensor_desc *output, const ctn_attrs *attrs, ctn_kernel *out) {
  (void)host, (void)op, (void)backend, (void)n_inputs, (void)inputs, (void)output, (void)attrs;
  out->fn = NULL; /* run by the shared run function below */
  out->state = user_data;
  out->release = NULL;
  out->workspace_size = 0;
  out->flags = 0;
  out->reserved = 0;
  return CTN_OK;
}

static ctn_status run(const struct ctn_op_def *op, void *user_data, void *state,
                      const ctn_kernel_args *a) {
  const float *x = (const float *)((const char *)a->inputs[0].data + a->inputs[0].offset);
  float *y = (float *)((char *)a->outputs[0].data + a->outputs[0].offset);
  int64_t i, n = 1;
  uint32_t k;
  int code = *(const int *)state;
  (void)op, (void)user_data;
  for (k = 0; k < a->outputs[0].ndim; ++k) n *= a->outputs[0].shape[k];
  for (i = 0; i < n; ++i)
    y[i] = code == OP_SOFTSIGN ? 2.0f * x[i] / (1.0f + fabs_f(x[i])) : x[i] * x[i] * x[i];
  return CTN_OK;
}

/* The local derivative f'(x) as graph nodes. */
static ctn_status derivative(const ctn_host_api *host, int code, ctn_graph *g, ctn_node x,
                             ctn_node *out) {
  ctn_node c, ax, d, d2, args[2];
  ctn_status s;
  if (code == OP_SOFTSIGN) {
    ctn_node one;
    if ((s = host->graph_scalar(g, CTN_F32, 1.0, &one)) != CTN_OK) return s;
    if ((s = host->graph_scalar(g, CTN_F32, 2.0, &c)) != CTN_OK) return s;
    if ((s = host->graph_op(g, "abs", 1, &x, NULL, &ax)) != CTN_OK) return s;
    args[0] = ax, args[1] = one;
    if ((s = host->graph_op(g, "add", 2, args, NULL, &d)) != CTN_OK) return s;
    args[0] = d, args[1] = d;
    if ((s = host->graph_op(g, "mul", 2, args, NULL, &d2)) != CTN_OK) return s;
    args[0] = c, args[1] = d2;
    return host->graph_op(g, "div", 2, args, NULL, out);
  }
  if ((s = host->graph_scalar(g, CTN_F32, 3.0, &c)) != CTN_OK) return s;
  args[0] = x, args[1] = x;
  if ((s = host->graph_op(g, "mul", 2, args, NULL, &d2)) != CTN_OK) return s;
  args[0] = c, args[1] = d2;
  return host->graph_op(g, "mul", 2, args, NULL, out);
}

static ctn_status grad(const ctn_host_api *host, const struct ctn_op_def *op, void *user_data,
                       ctn_graph *g, uint32_t n_inputs, const ctn_node *inputs, ctn_node output,
                       ctn_node grad_out, const ctn_attrs *attrs, ctn_node *grad_inputs) {
  ctn_node d, args[2];
  ctn_status s;
  (void)op, (void)n_inputs, (void)output, (void)attrs;
  if ((s = derivative(host, *(const int *)user_data, g, inputs[0], &d)) != CTN_OK) return s;
  args[0] = grad_out, args[1] = d;
  return host->graph_op(g, "mul", 2, args, NULL, &grad_inputs[0]);
}

static ctn_status jvp(const ctn_host_api *host, const struct ctn_op_def *op, void *user_data,
                      ctn_graph *g, uint32_t n_inputs, const ctn_node *inputs, ctn_node output,
                      const ctn_node *tangents, const ctn_attrs *attrs, ctn_node *tangent_out) {
  ctn_node d, args[2];
  ctn_status s;
  (void)op, (void)n_inputs, (void)output, (void)attrs;
  if (tangents[0] == CTN_NODE_NONE) {
    *tangent_out = CTN_NODE_NONE;
    return CTN_OK;
  }
  if ((s = derivative(host, *(const int *)user_data, g, inputs[0], &d)) != CTN_OK) return s;
  args[0] = tangents[0], args[1] = d;
  return host->graph_op(g, "mul", 2, args, NULL, tangent_out);
}

static const ctn_op_kernel cpu_kernels[] = {
    {.struct_size = sizeof(ctn_op_kernel), .backend = "cpu", .make = make, .run = run},
};

static const ctn_op_def compat_ops[] = {
    {.struct_size = sizeof(ctn_op_def), .n_inputs = 1, .name = "softsign",
     .doc = "2 x / (1 + |x|) (f32)", .user_data = (void *)&op_codes[0], .infer_ex = infer,
     .grad_ex = grad, .n_kernels_ex = 1, .kernels_ex = cpu_kernels, .jvp_ex = jvp},
    {.struct_size = sizeof(ctn_op_def), .n_inputs = 1, .name = COMPAT_NAME "_cube",
     .doc = "x^3 (f32)", .user_data = (void *)&op_codes[1], .infer_ex = infer, .grad_ex = grad,
     .n_kernels_ex = 1, .kernels_ex = cpu_kernels, .jvp_ex = jvp},
};

static const ctn_oplib_desc compat_desc = {
    .header = {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0,
               COMPAT_NAME},
    .n_ops = 2,
    .ops = compat_ops,
};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  /* set_error_message is a 1.2 slot: decline an older host. */
  if (!CTN_STRUCT_HAS(ctn_host_api, host, set_error_message)) return NULL;
  g_host = host;
  return &compat_desc.header;
}
