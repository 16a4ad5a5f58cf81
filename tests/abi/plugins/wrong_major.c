/* A backend built against the next major: every other field is plausible, so only the major
 * check can reject it. The message must name both versions. */
#include "tiny_backend.h"

static ctn_status wrongmajor_init(const ctn_host_api *host, const ctn_backend_config *config,
                                  void **out_state) {
  return tb_init_named("wrongmajor", host, config, out_state);
}

static ctn_status wrongmajor_get_kernel(void *state, const ctn_op_signature *sig,
                                        ctn_kernel *out) {
  (void)state;
  return tb_get_kernel_for("wrongmajor", TB_OP_ADD, tb_add_f32, sig, out);
}

static const ctn_backend_desc wrongmajor = {
    {sizeof(ctn_backend_desc), CTN_ABI_MAJOR + 1, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0,
     "wrongmajor"},
    CTN_BACKEND_HOST_MEMORY, 0, wrongmajor_init, tb_shutdown, tb_describe, tb_buffer_alloc,
    tb_buffer_free, tb_upload, tb_download, wrongmajor_get_kernel, NULL, NULL, NULL};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  tb_host = host;
  return &wrongmajor.header;
}
