/* The C side of the Go package: the public headers, the result of a wrapped call and the
 * generated wrappers (ctn_wrap.h). Included by the preamble of every cgo file of the package. */
#ifndef CHUTNEY_GO_SHIM_H
#define CHUTNEY_GO_SHIM_H

#include <chutney/checkpoint.h>
#include <chutney/chutney.h>
#include <chutney/data.h>
#include <chutney/nn.h>

#include <stdlib.h>
#include <string.h>

/* What a wrapped call hands back to Go: the status and, on failure, the status name (static
 * storage) and a malloc'ed copy of the message, which Go frees. */
typedef struct goctn_ret {
  ctn_status status;
  const char *name;
  char *msg;
} goctn_ret;

/* Must run in the same C call as the function that returned `s`: ctn_last_error() is
 * thread-local, and a goroutine may run its next cgo call on another OS thread. */
static inline goctn_ret goctn_result(ctn_status s) {
  goctn_ret r;
  r.status = s;
  r.name = NULL;
  r.msg = NULL;
  if (s != CTN_OK) {
    const char *m = ctn_last_error();
    size_t n = strlen(m) + 1;
    r.name = ctn_status_name(s);
    r.msg = (char *)malloc(n);
    if (r.msg != NULL) memcpy(r.msg, m, n);
  }
  return r;
}

#include "ctn_wrap.h"

#endif /* CHUTNEY_GO_SHIM_H */
