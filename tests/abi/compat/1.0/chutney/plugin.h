/* chutney plugin entry point and host API. C99.
 *
 * A plugin (backend or op library) is a shared object that exports exactly one symbol:
 *
 *     CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
 *                                                                  const ctn_host_api *host);
 *
 * It returns a pointer to a static descriptor that starts with ctn_plugin_header (frozen
 * forever) and continues with the table of its kind (ctn_backend_desc in backend.h,
 * ctn_oplib_desc in oplib.h). It may return NULL when it cannot work with the host version; it
 * must not allocate, start threads or touch devices: heavy work belongs in the init slot.
 * The `host` table stays valid until the plugin is unloaded.
 *
 * Plugins never link libchutney: everything they need from the core comes through `host`.
 */
#ifndef CHUTNEY_PLUGIN_H
#define CHUTNEY_PLUGIN_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif


#define CTN_PLUGIN_ENTRY_SYMBOL "ctn_plugin_query"

#ifdef __cplusplus
#define CTN_PLUGIN_EXPORT extern "C" CTN_EXPORT
#else
#define CTN_PLUGIN_EXPORT CTN_EXPORT
#endif

typedef enum ctn_plugin_kind {
  CTN_PLUGIN_BACKEND = 1,
  CTN_PLUGIN_OPLIB = 2
} ctn_plugin_kind;

/* The frozen prefix of every plugin descriptor. These fields never move or change meaning. */
typedef struct ctn_plugin_header {
  uint32_t struct_size; /* sizeof the whole descriptor as the plugin was compiled */
  uint16_t abi_major;   /* CTN_ABI_MAJOR the plugin was built against */
  uint16_t abi_minor;   /* CTN_ABI_MINOR the plugin was built against */
  uint32_t kind;        /* ctn_plugin_kind */
  uint32_t reserved;    /* zero */
  const char *name;     /* short unique name: "cpu", "opencl", "swish-ops" */
} ctn_plugin_header;

typedef enum ctn_log_level {
  CTN_LOG_DEBUG = 0,
  CTN_LOG_INFO = 1,
  CTN_LOG_WARN = 2,
  CTN_LOG_ERROR = 3
} ctn_log_level;

/* Functions the host hands to plugins. Append-only: new slots go at the end with the minor that
 * added them; a plugin checks host->struct_size (CTN_STRUCT_HAS) before using a newer slot. */
typedef struct ctn_host_api {
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;

  /* --- since 1.0 --- */

  /* Records `message` (printf-style) as the error of the current call on this thread and
   * returns `code`, so a plugin can write `return host->set_error(CTN_ERR_SHAPE, "...", ...)`. */
  ctn_status (*set_error)(ctn_status code, const char *fmt, ...);

  /* Writes a line to the host's log (stderr when CHUTNEY_LOG allows `level`). */
  void (*log)(ctn_log_level level, const char *plugin, const char *message);

  /* Graph building for op libraries' gradient rules and for backends that expand an op. Same
   * meaning as ctn_op / ctn_scalar / ctn_node_info in chutney.h. */
  ctn_status (*graph_op)(ctn_graph *g, const char *op, uint32_t n_inputs, const ctn_node *inputs,
                         const ctn_attrs *attrs, ctn_node *out);
  ctn_status (*graph_scalar)(ctn_graph *g, ctn_dtype dtype, double value, ctn_node *out);
  ctn_status (*graph_node_info)(ctn_graph *g, ctn_node n, ctn_dtype *out_dtype,
                                uint32_t *out_ndim, int64_t *out_shape);
} ctn_host_api;

/* The entry point's type. */
typedef const ctn_plugin_header *(*ctn_plugin_query_fn)(uint32_t host_abi_version,
                                                        const ctn_host_api *host);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_PLUGIN_H */
