/* "reccpu": a host-memory backend that implements the 1.1 plan-segment slots the way a GPU
 * backend records a command buffer: plan_prepare keeps the calls, plan_run replays them, and the
 * individual kernels refuse to run outside a replay. Counters are exposed through
 * get_proc_address so the test can prove the host used the segment path; so is the
 * const_inputs hint (1.7) of the last "add" signature. */
#include <stdlib.h>
#include <string.h>

#include "tiny_backend.h"

typedef struct {
  uint32_t n;
  ctn_plan_call *calls;
} rec_segment;

static long rec_prepared, rec_runs;
static int rec_replaying;
static uint64_t rec_const_inputs; /* ctn_sig_const_inputs of the last add asked for (since 1.7) */

static ctn_status rec_guarded_add(void *state, const ctn_kernel_args *args) {
  if (!rec_replaying) return tb_host->set_error(CTN_ERR_STATE, "reccpu: kernel called outside plan_run");
  return tb_add_f32(state, args);
}

static ctn_status rec_init(const ctn_host_api *host, const ctn_backend_config *config, void **out_state) {
  return tb_init_named("reccpu", host, config, out_state);
}

static ctn_status rec_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  (void)state;
  if (strcmp(sig->op, "add") == 0) rec_const_inputs = ctn_sig_const_inputs(sig);
  return tb_get_kernel_for("reccpu", TB_OP_ADD | TB_OP_RELU | TB_OP_COPY, rec_guarded_add, sig, out);
}

static ctn_status rec_prepare(void *state, uint32_t n, const ctn_plan_call *calls, void **out) {
  (void)state;
  rec_segment *s = (rec_segment *)calloc(1, sizeof *s);
  if (!s) return tb_host->set_error(CTN_ERR_OUT_OF_MEMORY, "reccpu: out of memory");
  s->calls = (ctn_plan_call *)malloc(sizeof(ctn_plan_call) * (n ? n : 1));
  if (!s->calls) {
    free(s);
    return tb_host->set_error(CTN_ERR_OUT_OF_MEMORY, "reccpu: out of memory");
  }
  memcpy(s->calls, calls, sizeof(ctn_plan_call) * n);
  s->n = n;
  ++rec_prepared;
  *out = s;
  return CTN_OK;
}

static ctn_status rec_run(void *state, void *segment) {
  (void)state;
  rec_segment *s = (rec_segment *)segment;
  ctn_status st = CTN_OK;
  rec_replaying = 1;
  for (uint32_t i = 0; i < s->n && st == CTN_OK; ++i) {
    const ctn_kernel *k = s->calls[i].kernel;
    st = k->fn(k->state, s->calls[i].args);
  }
  rec_replaying = 0;
  ++rec_runs;
  return st;
}

static void rec_release(void *state, void *segment) {
  (void)state;
  rec_segment *s = (rec_segment *)segment;
  free(s->calls);
  free(s);
}

static long rec_get_prepared(void) { return rec_prepared; }
static long rec_get_runs(void) { return rec_runs; }
static uint64_t rec_get_const_inputs(void) { return rec_const_inputs; }

static void *rec_proc(void *state, const char *name) {
  (void)state;
  if (strcmp(name, "reccpu_prepared") == 0) return (void *)(uintptr_t)rec_get_prepared;
  if (strcmp(name, "reccpu_runs") == 0) return (void *)(uintptr_t)rec_get_runs;
  if (strcmp(name, "reccpu_const_inputs") == 0) return (void *)(uintptr_t)rec_get_const_inputs;
  return NULL;
}

static const ctn_backend_desc reccpu = {
    {sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0, "reccpu"},
    CTN_BACKEND_HOST_MEMORY, 0, rec_init, tb_shutdown, tb_describe, tb_buffer_alloc,
    tb_buffer_free, tb_upload, tb_download, rec_get_kernel, NULL, NULL, rec_proc,
    rec_prepare, rec_run, rec_release};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  tb_host = host;
  return &reccpu.header;
}
