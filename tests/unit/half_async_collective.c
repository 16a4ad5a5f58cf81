/* "halfasync": a collective plugin whose descriptor has allreduce_start but no allreduce_wait
 * (collective.h, since 1.7: the two come as a pair). The host must reject it while loading, with
 * a message naming the missing slot, before calling anything (collective_test.cpp). Every slot
 * the host requires is present and answers that this plugin cannot work, so if the pair check
 * were skipped the test would see a loaded (unavailable) collective instead of the rejection.
 * Plain C99 against abi/ only. */
#include <chutney/collective.h>
#include <chutney/version.h>

static const ctn_host_api *ha_host;

static ctn_status ha_probe(const ctn_host_api *host) {
  ha_host = host;
  return host->set_error(CTN_ERR_UNAVAILABLE, "unavailable: halfasync is a test fixture");
}
static ctn_status ha_init(const ctn_host_api *host, const ctn_collective_config *config, void **out_state) {
  (void)config;
  (void)out_state;
  return host->set_error(CTN_ERR_UNAVAILABLE, "halfasync: no transport");
}
static void ha_shutdown(void *state) { (void)state; }
static const char *ha_describe(void *state) {
  (void)state;
  return "halfasync test fixture";
}
static int32_t ha_rank(void *state) {
  (void)state;
  return 0;
}
static int32_t ha_world_size(void *state) {
  (void)state;
  return 1;
}
static ctn_status ha_allreduce(void *state, void *buf, uint64_t count, ctn_dtype dtype, uint32_t op) {
  (void)state; (void)buf; (void)count; (void)dtype; (void)op;
  return ha_host->set_error(CTN_ERR_UNSUPPORTED, "halfasync: no transport");
}
static ctn_status ha_allreduce_start(void *state, void *buf, uint64_t count, ctn_dtype dtype, uint32_t op,
                                     uint64_t *out_ticket) {
  (void)out_ticket;
  return ha_allreduce(state, buf, count, dtype, op);
}
static ctn_status ha_broadcast(void *state, void *buf, uint64_t bytes, int32_t root) {
  (void)state; (void)buf; (void)bytes; (void)root;
  return ha_host->set_error(CTN_ERR_UNSUPPORTED, "halfasync: no transport");
}
static ctn_status ha_barrier(void *state) {
  (void)state;
  return ha_host->set_error(CTN_ERR_UNSUPPORTED, "halfasync: no transport");
}
static void ha_abort(void *state, int32_t code, const char *why) { (void)state; (void)code; (void)why; }
static const char *ha_last_error(void *state) {
  (void)state;
  return "";
}

static ctn_collective_desc ha_desc;

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version, const ctn_host_api *host) {
  if (CTN_ABI_VERSION_MAJOR(host_abi_version) != CTN_ABI_MAJOR || !host) return 0;
  ha_host = host;
  ha_desc.header.struct_size = sizeof ha_desc;
  ha_desc.header.abi_major = CTN_ABI_MAJOR;
  ha_desc.header.abi_minor = CTN_ABI_MINOR;
  ha_desc.header.kind = CTN_PLUGIN_COLLECTIVE;
  ha_desc.header.name = "halfasync";
  ha_desc.flags = CTN_COLLECTIVE_HOST_MEMORY;
  ha_desc.probe = ha_probe;
  ha_desc.init = ha_init;
  ha_desc.shutdown = ha_shutdown;
  ha_desc.describe = ha_describe;
  ha_desc.rank = ha_rank;
  ha_desc.world_size = ha_world_size;
  ha_desc.allreduce = ha_allreduce;
  ha_desc.broadcast = ha_broadcast;
  ha_desc.barrier = ha_barrier;
  ha_desc.abort = ha_abort;
  ha_desc.last_error = ha_last_error;
  ha_desc.allreduce_start = ha_allreduce_start; /* allreduce_wait stays NULL */
  return &ha_desc.header;
}
