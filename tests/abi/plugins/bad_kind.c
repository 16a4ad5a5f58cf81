/* A descriptor of an unknown kind (99): neither a backend nor an op library. */
#include <chutney/oplib.h>

static const ctn_oplib_desc badkind = {
    {sizeof(ctn_oplib_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, 99, 0, "badkind"}, NULL, NULL, 0,
    NULL};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return &badkind.header;
}
