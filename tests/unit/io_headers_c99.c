/* Compiled as C99 with -pedantic: data.h and checkpoint.h are plain C. */
#include <chutney/checkpoint.h>
#include <chutney/data.h>

#include <stddef.h>

int ctn_io_headers_c99_check(void);

int ctn_io_headers_c99_check(void) {
  ctn_loader_options o = {0};
  ctn_loader_stats s = {0};
  ctn_dataset_info d = {0};
  o.struct_size = sizeof o;
  s.struct_size = sizeof s;
  d.struct_size = sizeof d;
  /* struct_size leads every extensible struct. */
  return (offsetof(ctn_loader_options, struct_size) | offsetof(ctn_loader_stats, struct_size) |
          offsetof(ctn_dataset_info, struct_size)) != 0;
}
