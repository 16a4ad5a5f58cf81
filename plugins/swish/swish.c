/* ctn-swish: an example chutney op library, in plain C99.
 *
 * Declares two ops that are then used exactly like built-in ones (ctn_op(g, "swish", ...)):
 *   swish      (x)     -> x * sigmoid(x)                         f32 / f64, any shape
 *   swish_grad (x, dy) -> dy * (s + x * s * (1 - s)), s = sigmoid(x)
 * swish's gradient rule emits a swish_grad node, so ctn_grad differentiates through it and the
 * backward pass runs on the same kernels as any other node. Kernels: "cpu" here, "opencl" in
 * swish_opencl.c, "vulkan" in swish_vulkan.c where the build had the Vulkan headers and glslc
 * (the device's handles come through host->backend_proc, ABI 1.2).
 *
 * This file is the template for third-party op libraries (see README.md): it includes only the
 * public headers, never links libchutney, exports nothing but ctn_plugin_query (version script),
 * and does no work at load time.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <chutney/desc.h> /* header-only descriptor helpers: ctn_desc_numel, ... */
#include <chutney/oplib.h>

#include "swish_device.h"

/* ---------------------------------------------------------------------------------------------
 * Math. Sigmoid is computed from exp(-|x|) so that neither branch overflows.
 * ------------------------------------------------------------------------------------------- */

static double sigmoid_f64(double x) {
  double e = exp(-fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

static float sigmoid_f32(float x) {
  float e = expf(-fabsf(x));
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

/* ---------------------------------------------------------------------------------------------
 * Kernel-maker helpers, shared with the device kernels (swish_device.h).
 * ------------------------------------------------------------------------------------------- */

void swish_fill_kernel(ctn_kernel *out, ctn_kernel_fn fn, void *state, void (*release)(void *)) {
  out->fn = fn;
  out->state = state;
  out->release = release;
  out->workspace_size = 0;
  out->flags = CTN_KERNEL_INPLACE_OK;
  out->reserved = 0;
}

ctn_status swish_device_checks(const ctn_host_api *host, const char *name, const char *backend,
                               const char *proc_name, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               void **proc, void **bstate) {
  uint32_t i;
  if (!CTN_STRUCT_HAS(ctn_host_api, host, backend_proc) || !host->backend_proc)
    return host->set_error(CTN_ERR_UNSUPPORTED,
                           "%s (%s): the host predates ABI 1.2 (no backend_proc)", name, backend);
  if (host->backend_proc(backend, proc_name, proc, bstate) != CTN_OK)
    return CTN_ERR_UNSUPPORTED; /* the host recorded why */
  if (output->dtype != CTN_F32 && output->dtype != CTN_F64)
    return host->set_error(CTN_ERR_UNSUPPORTED, "%s (%s): no kernel for %s", name, backend,
                           ctn_desc_dtype_name(output->dtype));
  for (i = 0; i < n_inputs; ++i)
    if (inputs[i].dtype != output->dtype)
      return host->set_error(CTN_ERR_INVALID_ARGUMENT, "%s (%s): inconsistent signature", name,
                             backend);
  return CTN_OK;
}

/* A host kernel: `f32` or `f64` by `dtype`, no state. */
static ctn_status host_kernel(const ctn_host_api *host, const char *op, ctn_dtype dtype,
                              ctn_kernel_fn f32, ctn_kernel_fn f64, ctn_kernel *out) {
  if (dtype != CTN_F32 && dtype != CTN_F64)
    return host->set_error(CTN_ERR_UNSUPPORTED, "%s: no cpu kernel for %s", op,
                           ctn_desc_dtype_name(dtype));
  swish_fill_kernel(out, dtype == CTN_F32 ? f32 : f64, NULL, NULL);
  return CTN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * swish (x) -> x * sigmoid(x)
 * ------------------------------------------------------------------------------------------- */

static ctn_status swish_infer(const ctn_host_api *host, uint32_t n_inputs,
                              const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                              ctn_tensor_desc *out) {
  (void)attrs;
  if (n_inputs != 1)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "swish: expected 1 input, got %u",
                           (unsigned)n_inputs);
  if (!ctn_desc_is_float(inputs[0].dtype))
    return host->set_error(CTN_ERR_DTYPE, "swish: input x must be f32 or f64, got %s",
                           ctn_desc_dtype_name(inputs[0].dtype));
  ctn_desc_copy_layout(&inputs[0], out);
  return CTN_OK;
}

static ctn_status swish_f32(void *state, const ctn_kernel_args *args) {
  const float *x = (const float *)ctn_desc_host_ptr(&args->inputs[0]);
  float *y = (float *)ctn_desc_host_ptr(&args->outputs[0]);
  int64_t i, n = ctn_desc_numel(&args->outputs[0]);
  (void)state;
  /* Reads x[i] before writing y[i]: safe when the planner aliases y onto x. */
  for (i = 0; i < n; ++i) y[i] = x[i] * sigmoid_f32(x[i]);
  return CTN_OK;
}

static ctn_status swish_f64(void *state, const ctn_kernel_args *args) {
  const double *x = (const double *)ctn_desc_host_ptr(&args->inputs[0]);
  double *y = (double *)ctn_desc_host_ptr(&args->outputs[0]);
  int64_t i, n = ctn_desc_numel(&args->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) y[i] = x[i] * sigmoid_f64(x[i]);
  return CTN_OK;
}

static ctn_status swish_cpu_kernel(const ctn_host_api *host, uint32_t n_inputs,
                                   const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                                   const ctn_attrs *attrs, ctn_kernel *out) {
  (void)attrs;
  if (n_inputs != 1 || inputs[0].dtype != output->dtype)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "swish: inconsistent kernel signature");
  return host_kernel(host, "swish", output->dtype, swish_f32, swish_f64, out);
}

/* d swish / dx = s + x s (1 - s): one swish_grad node computes dy times that. */
static ctn_status swish_grad_rule(const ctn_host_api *host, ctn_graph *g, uint32_t n_inputs,
                                  const ctn_node *inputs, ctn_node output, ctn_node grad_out,
                                  const ctn_attrs *attrs, ctn_node *grad_inputs) {
  ctn_node args[2];
  (void)output;
  (void)attrs;
  if (n_inputs != 1)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "swish: expected 1 input, got %u",
                           (unsigned)n_inputs);
  args[0] = inputs[0];
  args[1] = grad_out;
  return host->graph_op(g, "swish_grad", 2, args, NULL, &grad_inputs[0]);
}

/* Tangent rule (forward mode, ctn_jvp): swish is elementwise, so its Jacobian is diagonal and
 * J t = J^T t = swish_grad(x, t). */
static ctn_status swish_jvp_rule(const ctn_host_api *host, const ctn_op_def *op, void *user_data,
                                 ctn_graph *g, uint32_t n_inputs, const ctn_node *inputs,
                                 ctn_node output, const ctn_node *tangents, const ctn_attrs *attrs,
                                 ctn_node *tangent_out) {
  ctn_node args[2];
  (void)op;
  (void)user_data;
  (void)output;
  (void)attrs;
  if (n_inputs != 1)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "swish: expected 1 input, got %u",
                           (unsigned)n_inputs);
  if (tangents[0] == CTN_NODE_NONE) {
    *tangent_out = CTN_NODE_NONE;
    return CTN_OK;
  }
  args[0] = inputs[0];
  args[1] = tangents[0];
  return host->graph_op(g, "swish_grad", 2, args, NULL, tangent_out);
}

/* ---------------------------------------------------------------------------------------------
 * swish_grad (x, dy) -> dy * (s + x s (1 - s))
 * ------------------------------------------------------------------------------------------- */

static ctn_status swish_grad_infer(const ctn_host_api *host, uint32_t n_inputs,
                                   const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                                   ctn_tensor_desc *out) {
  char sa[200], sb[200];
  (void)attrs;
  if (n_inputs != 2)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                           "swish_grad: expected 2 inputs (x, dy), got %u", (unsigned)n_inputs);
  if (!ctn_desc_is_float(inputs[0].dtype))
    return host->set_error(CTN_ERR_DTYPE, "swish_grad: input x must be f32 or f64, got %s",
                           ctn_desc_dtype_name(inputs[0].dtype));
  if (inputs[1].dtype != inputs[0].dtype)
    return host->set_error(CTN_ERR_DTYPE, "swish_grad: dy must have the dtype of x (%s), got %s",
                           ctn_desc_dtype_name(inputs[0].dtype), ctn_desc_dtype_name(inputs[1].dtype));
  /* No broadcasting: the gradient always has the shape of the forward input. */
  if (!ctn_desc_same_shape(&inputs[0], &inputs[1]))
    return host->set_error(CTN_ERR_SHAPE, "swish_grad: x %s and dy %s must have the same shape",
                           ctn_desc_shape_str(&inputs[0], sa, sizeof sa),
                           ctn_desc_shape_str(&inputs[1], sb, sizeof sb));
  ctn_desc_copy_layout(&inputs[0], out);
  return CTN_OK;
}

static ctn_status swish_grad_f32(void *state, const ctn_kernel_args *args) {
  const float *x = (const float *)ctn_desc_host_ptr(&args->inputs[0]);
  const float *dy = (const float *)ctn_desc_host_ptr(&args->inputs[1]);
  float *dx = (float *)ctn_desc_host_ptr(&args->outputs[0]);
  int64_t i, n = ctn_desc_numel(&args->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) {
    float s = sigmoid_f32(x[i]);
    dx[i] = dy[i] * (s + x[i] * s * (1.0f - s));
  }
  return CTN_OK;
}

static ctn_status swish_grad_f64(void *state, const ctn_kernel_args *args) {
  const double *x = (const double *)ctn_desc_host_ptr(&args->inputs[0]);
  const double *dy = (const double *)ctn_desc_host_ptr(&args->inputs[1]);
  double *dx = (double *)ctn_desc_host_ptr(&args->outputs[0]);
  int64_t i, n = ctn_desc_numel(&args->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) {
    double s = sigmoid_f64(x[i]);
    dx[i] = dy[i] * (s + x[i] * s * (1.0 - s));
  }
  return CTN_OK;
}

static ctn_status swish_grad_cpu_kernel(const ctn_host_api *host, uint32_t n_inputs,
                                        const ctn_tensor_desc *inputs,
                                        const ctn_tensor_desc *output, const ctn_attrs *attrs,
                                        ctn_kernel *out) {
  (void)attrs;
  if (n_inputs != 2 || inputs[0].dtype != output->dtype || inputs[1].dtype != output->dtype)
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "swish_grad: inconsistent kernel signature");
  return host_kernel(host, "swish_grad", output->dtype, swish_grad_f32, swish_grad_f64, out);
}

/* ---------------------------------------------------------------------------------------------
 * The descriptor: static, constant, built at compile time (nothing runs at dlopen).
 * ------------------------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------------------------
 * Device kernels (swish_opencl.c): the backend's native handles arrive through host->backend_proc
 * (plugin.h) and the backend's interop extra (opencl.h).
 * ------------------------------------------------------------------------------------------- */

static ctn_status swish_opencl(const ctn_host_api *host, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               const ctn_attrs *attrs, ctn_kernel *out) {
  (void)attrs;
  return swish_opencl_kernel(host, SWISH_FWD, n_inputs, inputs, output, out);
}

static ctn_status swish_grad_opencl(const ctn_host_api *host, uint32_t n_inputs,
                                    const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                                    const ctn_attrs *attrs, ctn_kernel *out) {
  (void)attrs;
  return swish_opencl_kernel(host, SWISH_GRAD, n_inputs, inputs, output, out);
}

#ifdef SWISH_HAVE_VULKAN
static ctn_status swish_vulkan(const ctn_host_api *host, uint32_t n_inputs,
                               const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                               const ctn_attrs *attrs, ctn_kernel *out) {
  (void)attrs;
  return swish_vulkan_kernel(host, SWISH_FWD, n_inputs, inputs, output, out);
}

static ctn_status swish_grad_vulkan(const ctn_host_api *host, uint32_t n_inputs,
                                    const ctn_tensor_desc *inputs, const ctn_tensor_desc *output,
                                    const ctn_attrs *attrs, ctn_kernel *out) {
  (void)attrs;
  return swish_vulkan_kernel(host, SWISH_GRAD, n_inputs, inputs, output, out);
}
#define SWISH_VULKAN_ENTRY(fn) , {"vulkan", fn}
#define SWISH_N_KERNELS 3
#else
#define SWISH_VULKAN_ENTRY(fn)
#define SWISH_N_KERNELS 2
#endif

static const ctn_oplib_kernel swish_kernels[] = {
    {"cpu", swish_cpu_kernel}, {"opencl", swish_opencl} SWISH_VULKAN_ENTRY(swish_vulkan)};
static const ctn_oplib_kernel swish_grad_kernels[] = {
    {"cpu", swish_grad_cpu_kernel},
    {"opencl", swish_grad_opencl} SWISH_VULKAN_ENTRY(swish_grad_vulkan)};

/* Designated initialisers: slots appended by later minors (1.2: user_data, infer_ex...) are
 * zero, and the array is strided by struct_size (oplib.h). */
static const ctn_op_def swish_ops[] = {
    {.struct_size = sizeof(ctn_op_def), .n_inputs = 1, .name = "swish",
     .doc = "x * sigmoid(x); f32/f64; no attributes", .infer = swish_infer,
     .grad = swish_grad_rule, .n_kernels = SWISH_N_KERNELS, .kernels = swish_kernels,
     .jvp_ex = swish_jvp_rule},
    {.struct_size = sizeof(ctn_op_def), .n_inputs = 2, .name = "swish_grad",
     .doc = "(x, dy) -> dy * (s + x s (1 - s)), s = sigmoid(x); same shapes; no attributes",
     .infer = swish_grad_infer, .grad = NULL, .n_kernels = SWISH_N_KERNELS, .kernels = swish_grad_kernels},
};

static const ctn_oplib_desc swish_desc = {
    {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, "swish-ops"},
    NULL, /* init: nothing to set up */
    NULL, /* shutdown */
    (uint32_t)(sizeof swish_ops / sizeof swish_ops[0]),
    swish_ops,
};

/* Returns the descriptor whatever the host's version: the host compares majors itself and
 * reports a mismatch with both numbers, which is more useful than a bare NULL. */
CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return &swish_desc.header;
}
