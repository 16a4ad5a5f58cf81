/* The C side of the Go package: the public headers, the result of a wrapped call and the
 * generated wrappers (ctn_wrap.h). Included by the preamble of every cgo file of the package. */
#ifndef CHUTNEY_GO_SHIM_H
#define CHUTNEY_GO_SHIM_H

#include <chutney/checkpoint.h>
#include <chutney/chutney.h>
#include <chutney/data.h>
#include <chutney/nn.h>
#include <chutney/onnx.h>

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

/* Plan.Run and Model.Run (model NULL: a plain plan run). Handles travel as void *: cgo boxes
 * each argument that points to an incomplete C struct for its pointer check, one heap
 * allocation per handle and call, while an unsafe.Pointer boxes for free. feed_values and
 * outputs are Go arrays of C tensor pointers (no Go pointers), valid for the call only. */
static inline goctn_ret goctn_run(void *plan, void *model, uint32_t n_feeds, const ctn_node *feed_nodes,
                                  void *feed_values, uint32_t n_outputs, void *outputs) {
  const ctn_tensor *const *fv = (const ctn_tensor *const *)feed_values;
  ctn_tensor *const *ov = (ctn_tensor *const *)outputs;
  if (model != NULL)
    return goctn_result(ctn_model_run((ctn_model *)model, (ctn_plan *)plan, n_feeds, feed_nodes, fv,
                                      n_outputs, ov));
  return goctn_result(ctn_plan_run((ctn_plan *)plan, n_feeds, feed_nodes, fv, n_outputs, ov));
}

/* goctn_run with run options (Plan.RunContext, RunWithOptions, Model.RunContext): a cancel
 * token (may be NULL), CTN_RUN_* flags and a timeout. */
static inline goctn_ret goctn_run_opts(void *plan, void *model, void *cancel, uint32_t flags, uint64_t timeout_us,
                                       uint32_t n_feeds, const ctn_node *feed_nodes, void *feed_values,
                                       uint32_t n_outputs, void *outputs) {
  const ctn_tensor *const *fv = (const ctn_tensor *const *)feed_values;
  ctn_tensor *const *ov = (ctn_tensor *const *)outputs;
  ctn_run_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.flags = flags;
  o.cancel = (ctn_cancel *)cancel;
  o.timeout_us = timeout_us;
  if (model != NULL)
    return goctn_result(ctn_model_run_with_options((ctn_model *)model, (ctn_plan *)plan, &o, n_feeds, feed_nodes, fv,
                                                   n_outputs, ov));
  return goctn_result(ctn_plan_run_with_options((ctn_plan *)plan, &o, n_feeds, feed_nodes, fv, n_outputs, ov));
}

#endif /* CHUTNEY_GO_SHIM_H */
