// "throwcpu": a C++ backend whose "add" kernel throws, breaking the rule that kernels return a
// status. The host's try/catch wall must turn the exception into an error status carrying the
// exception's text ("boom from kernel"), without terminating the process.
#include <stdexcept>

#include "tiny_backend.h"

namespace {

ctn_status throwing_add(void *, const ctn_kernel_args *) {
  throw std::runtime_error("boom from kernel");
}

ctn_status throwcpu_init(const ctn_host_api *host, const ctn_backend_config *config,
                         void **out_state) {
  return tb_init_named("throwcpu", host, config, out_state);
}

ctn_status throwcpu_get_kernel(void *, const ctn_op_signature *sig, ctn_kernel *out) {
  return tb_get_kernel_for("throwcpu", TB_OP_ADD | TB_OP_COPY, throwing_add, sig, out);
}

const ctn_backend_desc throwcpu = {
    {sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0, "throwcpu"},
    CTN_BACKEND_HOST_MEMORY, 0, throwcpu_init, tb_shutdown, tb_describe, tb_buffer_alloc,
    tb_buffer_free, tb_upload, tb_download, throwcpu_get_kernel, nullptr, nullptr, nullptr};

}  // namespace

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t, const ctn_host_api *host) {
  tb_host = host;
  return &throwcpu.header;
}
