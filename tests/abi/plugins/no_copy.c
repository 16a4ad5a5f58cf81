/* "nocopy": a working host-memory backend with "add" and "relu" (f32) but no "copy" kernel, so
 * an assignment to a variable that lives on it has to reach the variable's storage another way
 * (the host's transfer; placement_test). */
#include "tiny_backend.h"

static ctn_status nocopy_init(const ctn_host_api *host, const ctn_backend_config *config,
                              void **out_state) {
  return tb_init_named("nocopy", host, config, out_state);
}

static ctn_status nocopy_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  (void)state;
  return tb_get_kernel_for("nocopy", TB_OP_ADD | TB_OP_RELU, tb_add_f32, sig, out);
}

static const ctn_backend_desc nocopy = {
    {sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0, "nocopy"},
    CTN_BACKEND_HOST_MEMORY, 0, nocopy_init, tb_shutdown, tb_describe, tb_buffer_alloc,
    tb_buffer_free, tb_upload, tb_download, nocopy_get_kernel, NULL, NULL, NULL, NULL, NULL,
    NULL};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  tb_host = host;
  return &nocopy.header;
}
