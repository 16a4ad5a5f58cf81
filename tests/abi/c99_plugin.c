/* The plugin-facing headers compiled as C99 -pedantic; linked with c99_user.c. */
#include <stddef.h>
#include <string.h>

#include <chutney/backend.h>
#include <chutney/desc.h>
#include <chutney/oplib.h>
#include <chutney/ops.h>
#include <chutney/plugin.h>
#include <chutney/types.h>

typedef char c99_pin_header_name[offsetof(ctn_plugin_header, name) == 16 ? 1 : -1];
typedef char c99_pin_backend_flags[offsetof(ctn_backend_desc, flags) ==
                                           sizeof(ctn_plugin_header) ? 1 : -1];

/* desc.h (header-only helpers, since 1.2): values a plugin relies on, checked as C99. */
static int c99_desc_ok(void) {
  ctn_tensor_desc a, y;
  int64_t sa[CTN_MAX_DIMS], idx[CTN_MAX_DIMS] = {0}, off[1] = {0}, seen[6];
  const int64_t *st[1];
  char buf[32];
  int64_t i;
  memset(&a, 0, sizeof a);
  memset(&y, 0, sizeof y);
  a.ndim = 2, a.shape[0] = 3, a.shape[1] = 1; /* [3, 1] broadcast to [2, 3, 2] */
  y.ndim = 3, y.shape[0] = 2, y.shape[1] = 3, y.shape[2] = 2;
  if (ctn_desc_numel(&y) != 12 || ctn_desc_numel(&a) != 3 || ctn_desc_same_shape(&a, &y)) return 0;
  if (!ctn_desc_broadcast_strides(&a, &y, sa) || sa[0] != 0 || sa[1] != 1 || sa[2] != 0) return 0;
  if (ctn_desc_broadcast_strides(&y, &a, sa)) return 0; /* [2, 3, 2] does not go to [3, 1] */
  st[0] = sa;
  ctn_desc_broadcast_strides(&a, &y, sa);
  for (i = 0; i < 12; ++i, ctn_desc_next_index(y.ndim, y.shape, idx, 1, st, off))
    if (i < 6) seen[i] = off[0];
  if (seen[0] != 0 || seen[1] != 0 || seen[2] != 1 || seen[3] != 1 || seen[4] != 2 || seen[5] != 2) return 0;
  if (off[0] != 0) return 0; /* back at the start after the last element */
  if (strcmp(ctn_desc_shape_str(&y, buf, sizeof buf), "[2, 3, 2]") != 0) return 0;
  if (strcmp(ctn_desc_shape_str(&y, buf, 5), "[2, ") != 0) return 0; /* truncated, terminated */
  if (ctn_desc_dtype_size(CTN_F64) != 8 || strcmp(ctn_desc_dtype_name(CTN_BOOL), "bool") != 0) return 0;
  return ctn_desc_is_float(CTN_F32) && !ctn_desc_is_float(CTN_I32) && ctn_desc_dtype_size(99) == 0;
}

int c99_plugin_side_ok(void);
int c99_plugin_side_ok(void) {
  ctn_backend_desc d = {{sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR,
                         CTN_PLUGIN_BACKEND, 0, "c99"},
                        0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                        NULL, NULL, NULL};
  if (!c99_desc_ok()) return 0;
  return CTN_STRUCT_HAS(ctn_backend_desc, &d.header, get_proc_address) &&
         d.header.kind == CTN_PLUGIN_BACKEND;
}
