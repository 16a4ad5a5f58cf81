/* An op library as one built against ABI 1.0 or 1.1 was (OLD_MINOR), before ctn_op_def grew
 * its 1.2 slots: its ops array holds the 56-byte 1.1 struct, declared here by hand, so the host
 * must stride the array by struct_size, not by its own sizeof(ctn_op_def). Two ops, so that a
 * host striding wrongly reads garbage for the second; the bytes after the array are poisoned.
 *   <prefix>_twice (x) -> 2 x      gradient 2 dy      (f32)
 *   <prefix>_plus1 (x) -> x + 1    gradient dy        (f32)
 * Built as ctn-test-oplib-1-0.so (prefix "old10") and ctn-test-oplib-1-1.so ("old11"). */
#include <stddef.h>
#include <stdint.h>

#include <chutney/oplib.h>

#ifndef OLD_MINOR
#define OLD_MINOR 1
#endif
#ifndef OLD_PREFIX
#define OLD_PREFIX "old11"
#endif

/* ctn_op_def exactly as 1.0 and 1.1 declared it. */
typedef struct old_op_def {
  uint32_t struct_size;
  uint32_t n_inputs;
  const char *name;
  const char *doc;
  ctn_infer_fn infer;
  ctn_grad_fn grad;
  uint32_t n_kernels;
  const ctn_oplib_kernel *kernels;
} old_op_def;

/* The old struct must be a true prefix of today's, and shorter. */
_Static_assert(offsetof(old_op_def, kernels) == offsetof(ctn_op_def, kernels), "prefix");
_Static_assert(offsetof(old_op_def, infer) == offsetof(ctn_op_def, infer), "prefix");
_Static_assert(sizeof(old_op_def) < sizeof(ctn_op_def), "1.2 appended slots to ctn_op_def");

static ctn_status same_infer(const ctn_host_api *host, uint32_t n_inputs,
                             const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                             ctn_tensor_desc *out) {
  uint32_t k;
  (void)attrs;
  if (n_inputs != 1 || inputs[0].dtype != CTN_F32)
    return host->set_error(CTN_ERR_DTYPE, OLD_PREFIX ": expected one f32 input");
  out->dtype = inputs[0].dtype;
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

static ctn_status twice_run(void *state, const ctn_kernel_args *a) {
  const float *x = (const float *)((const char *)a->inputs[0].data + a->inputs[0].offset);
  float *y = (float *)((char *)a->outputs[0].data + a->outputs[0].offset);
  int64_t i, n = numel(&a->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) y[i] = 2.0f * x[i];
  return CTN_OK;
}

static ctn_status plus1_run(void *state, const ctn_kernel_args *a) {
  const float *x = (const float *)((const char *)a->inputs[0].data + a->inputs[0].offset);
  float *y = (float *)((char *)a->outputs[0].data + a->outputs[0].offset);
  int64_t i, n = numel(&a->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) y[i] = x[i] + 1.0f;
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

static ctn_status twice_kernel(const ctn_host_api *host, uint32_t n, const ctn_tensor_desc *in,
                               const ctn_tensor_desc *out_desc, const ctn_attrs *attrs,
                               ctn_kernel *out) {
  (void)host, (void)n, (void)in, (void)out_desc, (void)attrs;
  return make(twice_run, out);
}

static ctn_status plus1_kernel(const ctn_host_api *host, uint32_t n, const ctn_tensor_desc *in,
                               const ctn_tensor_desc *out_desc, const ctn_attrs *attrs,
                               ctn_kernel *out) {
  (void)host, (void)n, (void)in, (void)out_desc, (void)attrs;
  return make(plus1_run, out);
}

static ctn_status twice_grad(const ctn_host_api *host, ctn_graph *g, uint32_t n_inputs,
                             const ctn_node *inputs, ctn_node output, ctn_node grad_out,
                             const ctn_attrs *attrs, ctn_node *grad_inputs) {
  ctn_node two, args[2];
  ctn_status st;
  (void)n_inputs, (void)inputs, (void)output, (void)attrs;
  st = host->graph_scalar(g, CTN_F32, 2.0, &two);
  if (st != CTN_OK) return st;
  args[0] = grad_out;
  args[1] = two;
  return host->graph_op(g, "mul", 2, args, NULL, &grad_inputs[0]);
}

static ctn_status plus1_grad(const ctn_host_api *host, ctn_graph *g, uint32_t n_inputs,
                             const ctn_node *inputs, ctn_node output, ctn_node grad_out,
                             const ctn_attrs *attrs, ctn_node *grad_inputs) {
  (void)host, (void)g, (void)n_inputs, (void)inputs, (void)output, (void)attrs;
  grad_inputs[0] = grad_out;
  return CTN_OK;
}

static const ctn_oplib_kernel twice_kernels[] = {{"cpu", twice_kernel}};
static const ctn_oplib_kernel plus1_kernels[] = {{"cpu", plus1_kernel}};

static const struct {
  old_op_def ops[2];
  uintptr_t poison[12]; /* what a host reading 1.2-sized elements would run into */
} lib_ops = {
    {{sizeof(old_op_def), 1, OLD_PREFIX "_twice", "2 x", same_infer, twice_grad, 1, twice_kernels},
     {sizeof(old_op_def), 1, OLD_PREFIX "_plus1", "x + 1", same_infer, plus1_grad, 1,
      plus1_kernels}},
    {(uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef,
     (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef,
     (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef, (uintptr_t)0xdeadbeef}};

static const ctn_oplib_desc lib_desc = {
    {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, OLD_MINOR, CTN_PLUGIN_OPLIB, 0, OLD_PREFIX "-ops"},
    NULL, NULL, 2, (const ctn_op_def *)(const void *)lib_ops.ops};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return &lib_desc.header;
}
