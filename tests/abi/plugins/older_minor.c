/* "oldcpu": a working backend whose descriptor stops right after get_kernel, as one built
 * before synchronize/set_option/get_proc_address existed would. The host must read only
 * struct_size bytes and treat the missing slots as NULL. To catch a host that reads further,
 * the bytes after the short descriptor are poisoned pointers: calling one crashes the test. */
#include <stddef.h>

#include "tiny_backend.h"

typedef struct oldcpu_desc {
  ctn_plugin_header header;
  uint32_t flags;
  uint32_t reserved;
  ctn_status (*init)(const ctn_host_api *, const ctn_backend_config *, void **);
  void (*shutdown)(void *);
  const char *(*describe)(void *);
  ctn_status (*buffer_alloc)(void *, uint64_t, void **);
  void (*buffer_free)(void *, void *);
  ctn_status (*upload)(void *, void *, uint64_t, const void *, uint64_t);
  ctn_status (*download)(void *, void *, uint64_t, void *, uint64_t);
  ctn_status (*get_kernel)(void *, const ctn_op_signature *, ctn_kernel *);
} oldcpu_desc;

/* The short table must be a true prefix of today's. */
_Static_assert(sizeof(oldcpu_desc) == offsetof(ctn_backend_desc, synchronize),
               "oldcpu_desc must end where synchronize begins");
_Static_assert(offsetof(oldcpu_desc, get_kernel) == offsetof(ctn_backend_desc, get_kernel),
               "oldcpu_desc must be a prefix of ctn_backend_desc");

static ctn_status oldcpu_init(const ctn_host_api *host, const ctn_backend_config *config,
                              void **out_state) {
  return tb_init_named("oldcpu", host, config, out_state);
}

static ctn_status oldcpu_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  (void)state;
  return tb_get_kernel_for("oldcpu", TB_OP_ADD | TB_OP_RELU | TB_OP_COPY, tb_add_f32, sig, out);
}

static const struct {
  oldcpu_desc desc;
  uintptr_t poison[4]; /* where synchronize, set_option, get_proc_address would be */
} oldcpu = {
    {{sizeof(oldcpu_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0, "oldcpu"},
     CTN_BACKEND_HOST_MEMORY, 0, oldcpu_init, tb_shutdown, tb_describe, tb_buffer_alloc,
     tb_buffer_free, tb_upload, tb_download, oldcpu_get_kernel},
    {TB_POISON, TB_POISON, TB_POISON, TB_POISON}};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  tb_host = host;
  return &oldcpu.desc.header;
}
