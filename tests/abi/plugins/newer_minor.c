/* "newcpu": a backend built against a future minor (CTN_ABI_MINOR + 1) whose descriptor has
 * slots after the v1.0 table. The host must accept it and read only what it knows; the future
 * slots hold poisoned pointers, so a host that called them would crash the test. */
#include <stddef.h>

#include "tiny_backend.h"

typedef struct newcpu_desc {
  ctn_backend_desc v1; /* starts with the frozen header */
  /* --- since 1.1 (imaginary) --- */
  uintptr_t future_slot; /* e.g. a function pointer the host does not know yet */
  uint64_t future_flags;
} newcpu_desc;

static ctn_status newcpu_init(const ctn_host_api *host, const ctn_backend_config *config,
                              void **out_state) {
  return tb_init_named("newcpu", host, config, out_state);
}

static ctn_status newcpu_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  (void)state;
  return tb_get_kernel_for("newcpu", TB_OP_ADD | TB_OP_COPY, tb_add_f32, sig, out);
}

static const newcpu_desc newcpu = {
    {{sizeof(newcpu_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR + 1, CTN_PLUGIN_BACKEND, 0, "newcpu"},
     CTN_BACKEND_HOST_MEMORY, 0, newcpu_init, tb_shutdown, tb_describe, tb_buffer_alloc,
     tb_buffer_free, tb_upload, tb_download, newcpu_get_kernel, NULL, NULL, NULL},
    TB_POISON,
    0xffffffffffffffffull};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  tb_host = host;
  return &newcpu.v1.header;
}
