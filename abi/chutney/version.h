/* chutney ABI version. C99.
 *
 * Two numbers describe the binary contract between libchutney, applications and plugins:
 *  - CTN_ABI_MAJOR changes only when an existing struct field, function slot or meaning changes.
 *    A plugin built for a different major is rejected with a message naming both versions.
 *  - CTN_ABI_MINOR grows when a slot is appended to a table. The host accepts plugins built for
 *    any minor of its major: an older plugin's descriptor is shorter (struct_size tells by how
 *    much) and the host treats the missing slots as NULL; a newer plugin's descriptor is read
 *    only up to the size the host knows.
 *
 * The library version (CTN_VERSION_*) is the release of the implementation and is independent.
 */
#ifndef CHUTNEY_VERSION_H
#define CHUTNEY_VERSION_H

#define CTN_ABI_MAJOR 1
#define CTN_ABI_MINOR 7

#define CTN_VERSION_MAJOR 0
#define CTN_VERSION_MINOR 1
#define CTN_VERSION_PATCH 0

/* (major << 16) | minor, as passed to ctn_plugin_query. */
#define CTN_ABI_VERSION ((CTN_ABI_MAJOR << 16) | CTN_ABI_MINOR)
#define CTN_ABI_VERSION_MAJOR(v) ((unsigned)(v) >> 16)
#define CTN_ABI_VERSION_MINOR(v) ((unsigned)(v) & 0xffffu)

/* True when a struct of struct_size bytes contains the member `field` of `type` entirely.
 * Used to read descriptors of older plugins: a slot beyond their struct_size is absent. */
#define CTN_STRUCT_HAS(type, ptr, field)                                                        \
  ((ptr)->struct_size >= (unsigned)(offsetof(type, field) + sizeof(((type *)0)->field)))

#endif /* CHUTNEY_VERSION_H */
