/* ctn_plugin_query declines the host (as a plugin may when it cannot work with its version). */
#include <chutney/plugin.h>

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  (void)host;
  return NULL;
}
