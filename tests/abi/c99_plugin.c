/* The plugin-facing headers compiled as C99 -pedantic; linked with c99_user.c. */
#include <stddef.h>

#include <chutney/backend.h>
#include <chutney/oplib.h>
#include <chutney/ops.h>
#include <chutney/plugin.h>
#include <chutney/types.h>

typedef char c99_pin_header_name[offsetof(ctn_plugin_header, name) == 16 ? 1 : -1];
typedef char c99_pin_backend_flags[offsetof(ctn_backend_desc, flags) ==
                                           sizeof(ctn_plugin_header) ? 1 : -1];

int c99_plugin_side_ok(void);
int c99_plugin_side_ok(void) {
  ctn_backend_desc d = {{sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR,
                         CTN_PLUGIN_BACKEND, 0, "c99"},
                        0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                        NULL, NULL, NULL};
  return CTN_STRUCT_HAS(ctn_backend_desc, &d.header, get_proc_address) &&
         d.header.kind == CTN_PLUGIN_BACKEND;
}
