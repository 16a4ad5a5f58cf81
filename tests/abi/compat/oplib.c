/* A third-party op library as written in the ABI 1.0 / 1.1 era, kept unchanged (the frozen
 * compatibility suite, docs/ABI.md "Compatibility policy"). Plain C99, positional initialisers
 * of ctn_op_def as the 1.0 and 1.1 headers allowed, only the 1.0 host API. Built (meson.build
 * beside this file) with -std=c99 -Wall -Wextra -pedantic -Werror against:
 *   the frozen 1.0 headers      -> ctn-compat-oplib-1-0.so   library "compat10"
 *   the frozen 1.1 headers      -> ctn-compat-oplib-1-1.so   library "compat11"
 *   the current headers         -> ctn-compat-oplib-src11.so library "compat11src"
 * The last one is the source-compatibility rule: this source must keep compiling, unchanged,
 * against every later 1.x header set.
 *
 * Ops (f32, cpu kernels):
 *   softsign     2 x / (1 + |x|)   gradient 2 dy / (1 + |x|)^2
 *     The library had it before chutney 1.2 added a built-in "softsign" (x / (1 + |x|)); the
 *     factor 2 is this library's own choice and tells the two apart in the tests.
 *   <name>_cube  x^3               gradient 3 x^2 dy
 */
#include <chutney/oplib.h>

#ifndef COMPAT_NAME
#error "define COMPAT_NAME"
#endif

static float fabs_f(float x) { return x < 0.0f ? -x : x; }

static ctn_status f32_same_shape(const ctn_host_api *host, uint32_t n_inputs,
                                 const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                                 ctn_tensor_desc *out) {
  uint32_t k;
  (void)attrs;
  if (n_inputs != 1 || inputs[0].dtype != CTN_F32)
    return host->set_error(CTN_ERR_DTYPE, COMPAT_NAME ": takes one f32 input");
  out->dtype = CTN_F32;
  out->ndim = inputs[0].ndim;
  for (k = 0; k < inputs[0].ndim; ++k) out->shape[k] = inputs[0].shape[k];
  return CTN_OK;
}

static int64_t numel(const ctn_tensor_desc *t) {
  int64_t n = 1;
  uint32_t k;
  for (k = 0; k < t->ndim; ++k) n *= t->shape[k];
  return n;
}

static ctn_status softsign_run(void *state, const ctn_kernel_args *a) {
  const float *x = (const float *)((const char *)a->inputs[0].data + a->inputs[0].offset);
  float *y = (float *)((char *)a->outputs[0].data + a->outputs[0].offset);
  int64_t i, n = numel(&a->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) y[i] = 2.0f * x[i] / (1.0f + fabs_f(x[i]));
  return CTN_OK;
}

static ctn_status cube_run(void *state, const ctn_kernel_args *a) {
  const float *x = (const float *)((const char *)a->inputs[0].data + a->inputs[0].offset);
  float *y = (float *)((char *)a->outputs[0].data + a->outputs[0].offset);
  int64_t i, n = numel(&a->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) y[i] = x[i] * x[i] * x[i];
  return CTN_OK;
}

static ctn_status make(ctn_kernel_fn fn, ctn_kernel *out) {
  out->fn = fn;
  out->state = NULL;
  out->release = NULL;
  out->workspace_size = 0;
  out->flags = 0;
  out->reserved = 0;
  return CTN_OK;
}

static ctn_status softsign_kernel(const ctn_host_api *host, uint32_t n, const ctn_tensor_desc *in,
                                  const ctn_tensor_desc *out, const ctn_attrs *attrs, ctn_kernel *k) {
  (void)host, (void)n, (void)in, (void)out, (void)attrs;
  return make(softsign_run, k);
}

static ctn_status cube_kernel(const ctn_host_api *host, uint32_t n, const ctn_tensor_desc *in,
                              const ctn_tensor_desc *out, const ctn_attrs *attrs, ctn_kernel *k) {
  (void)host, (void)n, (void)in, (void)out, (void)attrs;
  return make(cube_run, k);
}

/* d/dx 2x / (1 + |x|) = 2 / (1 + |x|)^2, from graph ops through the host. */
static ctn_status softsign_grad(const ctn_host_api *host, ctn_graph *g, uint32_t n_inputs,
                                const ctn_node *inputs, ctn_node output, ctn_node grad_out,
                                const ctn_attrs *attrs, ctn_node *grad_inputs) {
  ctn_node one, two, ax, d, d2, q, args[2];
  ctn_status s;
  (void)n_inputs, (void)output, (void)attrs;
  if ((s = host->graph_scalar(g, CTN_F32, 1.0, &one)) != CTN_OK) return s;
  if ((s = host->graph_scalar(g, CTN_F32, 2.0, &two)) != CTN_OK) return s;
  if ((s = host->graph_op(g, "abs", 1, &inputs[0], NULL, &ax)) != CTN_OK) return s;
  args[0] = ax, args[1] = one;
  if ((s = host->graph_op(g, "add", 2, args, NULL, &d)) != CTN_OK) return s;
  args[0] = d, args[1] = d;
  if ((s = host->graph_op(g, "mul", 2, args, NULL, &d2)) != CTN_OK) return s;
  args[0] = two, args[1] = d2;
  if ((s = host->graph_op(g, "div", 2, args, NULL, &q)) != CTN_OK) return s;
  args[0] = grad_out, args[1] = q;
  return host->graph_op(g, "mul", 2, args, NULL, &grad_inputs[0]);
}

/* d/dx x^3 = 3 x^2. */
static ctn_status cube_grad(const ctn_host_api *host, ctn_graph *g, uint32_t n_inputs,
                            const ctn_node *inputs, ctn_node output, ctn_node grad_out,
                            const ctn_attrs *attrs, ctn_node *grad_inputs) {
  ctn_node three, x2, t, args[2];
  ctn_status s;
  (void)n_inputs, (void)output, (void)attrs;
  if ((s = host->graph_scalar(g, CTN_F32, 3.0, &three)) != CTN_OK) return s;
  args[0] = inputs[0], args[1] = inputs[0];
  if ((s = host->graph_op(g, "mul", 2, args, NULL, &x2)) != CTN_OK) return s;
  args[0] = three, args[1] = x2;
  if ((s = host->graph_op(g, "mul", 2, args, NULL, &t)) != CTN_OK) return s;
  args[0] = grad_out, args[1] = t;
  return host->graph_op(g, "mul", 2, args, NULL, &grad_inputs[0]);
}

static const ctn_oplib_kernel softsign_kernels[] = {{"cpu", softsign_kernel}};
static const ctn_oplib_kernel cube_kernels[] = {{"cpu", cube_kernel}};

/* Positional, as every 1.0 / 1.1 example did. */
static const ctn_op_def compat_ops[] = {
    {sizeof(ctn_op_def), 1, "softsign", "2 x / (1 + |x|) (f32)", f32_same_shape, softsign_grad, 1,
     softsign_kernels},
    {sizeof(ctn_op_def), 1, COMPAT_NAME "_cube", "x^3 (f32)", f32_same_shape, cube_grad, 1,
     cube_kernels},
};

static const ctn_oplib_desc compat_desc = {
    {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, COMPAT_NAME},
    NULL, NULL, 2, compat_ops};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return &compat_desc.header;
}
