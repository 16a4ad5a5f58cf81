/* A shared object that is not a plugin: it exports a function, but not ctn_plugin_query. The
 * host must reject it naming the missing symbol. */
#include <chutney/plugin.h>

CTN_EXPORT int ctn_plugin_query_misspelled(void);
CTN_EXPORT int ctn_plugin_query_misspelled(void) { return 42; }
