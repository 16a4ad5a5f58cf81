/* "nodevice": a well-formed backend whose device is never there. The host must record it as
 * unavailable with the reason given here and keep working. */
#include "tiny_backend.h"

static ctn_status nodevice_init(const ctn_host_api *host, const ctn_backend_config *config,
                                void **out_state) {
  (void)config;
  (void)out_state;
  return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: no such device (test)");
}

static ctn_status nodevice_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  (void)state;
  return tb_get_kernel_for("nodevice", TB_OP_ADD, tb_add_f32, sig, out);
}

static const ctn_backend_desc nodevice = {
    {sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0, "nodevice"},
    CTN_BACKEND_HOST_MEMORY, 0, nodevice_init, tb_shutdown, tb_describe, tb_buffer_alloc,
    tb_buffer_free, tb_upload, tb_download, nodevice_get_kernel, NULL, NULL, NULL};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  tb_host = host;
  return &nodevice.header;
}
