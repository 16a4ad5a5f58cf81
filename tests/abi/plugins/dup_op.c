/* An op library declaring an op whose name is already taken. Built twice:
 *   ctn-test-dup-op.so       declares "swish" (collides with plugins/swish once that is loaded)
 *   ctn-test-dup-builtin.so  declares "add"   (collides with the built-in op)
 *   ctn-test-dup-swish-grad.so declares "swish_grad" (one input; swish's own takes two)
 * Op namespaces (docs/ABI.md): the host loads it anyway; the plain name goes to the first loaded
 * library's op (shadowing the built-in), the qualified names reach each, the report says so. */
#include <chutney/oplib.h>

#ifndef DUP_OP_NAME
#define DUP_OP_NAME "swish"
#endif
#ifndef DUP_LIB_NAME
#define DUP_LIB_NAME "dup-ops"
#endif

static ctn_status dup_infer(const ctn_host_api *host, uint32_t n_inputs,
                            const ctn_tensor_desc *inputs, const ctn_attrs *attrs,
                            ctn_tensor_desc *out) {
  uint32_t k;
  (void)host;
  (void)n_inputs;
  (void)attrs;
  out->dtype = inputs[0].dtype;
  out->ndim = inputs[0].ndim;
  for (k = 0; k < inputs[0].ndim; ++k) out->shape[k] = inputs[0].shape[k];
  return CTN_OK;
}

static const ctn_op_def dup_ops[] = {
    {sizeof(ctn_op_def), 1, DUP_OP_NAME, "a second definition of an existing op", dup_infer,
     NULL, 0, NULL},
};

static const ctn_oplib_desc dup_desc = {
    {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, DUP_LIB_NAME},
    NULL, NULL, 1, dup_ops};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return &dup_desc.header;
}
