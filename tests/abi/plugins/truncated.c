/* A descriptor whose struct_size (8) does not even cover the frozen header: the host must not
 * trust any field past it. The rest of the memory is valid, so only the size check rejects it. */
#include <chutney/oplib.h>

static const ctn_oplib_desc truncated = {
    {8, CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, "truncated"}, NULL, NULL, 0, NULL};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return &truncated.header;
}
