/* chutney collective communication: the plugin kind CTN_PLUGIN_COLLECTIVE and the C API over it.
 * C99. since 1.2. docs/DISTRIBUTED.md explains data-parallel training built on it.
 *
 * A collective plugin (ctn-mpi.so over Open MPI, ctn-nccl.so over NCCL) exports
 * ctn_plugin_query (plugin.h) returning a ctn_collective_desc whose header.kind is
 * CTN_PLUGIN_COLLECTIVE. The host:
 *   1. checks the header as for every plugin (same major, any minor);
 *   2. calls probe once while loading: CTN_ERR_UNAVAILABLE with a reason ("unavailable: no CUDA
 *      device") lists the plugin as unavailable in `chutney plugins --explain`; the rest of the
 *      runtime keeps working;
 *   3. calls init when the application opens a communicator (ctn_collective_open): this is where
 *      ranks find each other (the launcher's environment, or a rendezvous string);
 *   4. calls shutdown when the communicator is released, before dlclose.
 *
 * Every slot returning ctn_status records its message with host->set_error on failure. Calls on
 * one communicator are serialised by the host. Collectives are blocking: they return when this
 * rank's part is done. Every rank must make the same calls in the same order with the same
 * sizes (the data-parallel compiler guarantees it for plans).
 *
 * Failure: a collective that does not complete within the timeout returns CTN_ERR_IO with a message naming the ranks that did not arrive (when the plugin can tell);
 * the host then calls abort, which ends every process of the job (MPI_Abort / ncclCommAbort
 * plus exit): a data-parallel job never continues with a missing rank.
 */
#ifndef CHUTNEY_COLLECTIVE_H
#define CHUTNEY_COLLECTIVE_H

#include "chutney.h"
#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* header.kind of a collective plugin (ctn_plugin_kind continues 1 backend, 2 op library). */
#define CTN_PLUGIN_COLLECTIVE 3

/* ctn_collective_desc.flags */
#define CTN_COLLECTIVE_HOST_MEMORY 1u /* buffers handed to the slots are host pointers */

/* Reductions. */
#define CTN_REDUCE_SUM 0u
#define CTN_REDUCE_MEAN 1u /* the sum divided by the world size, in the buffer's dtype */

/* How to start a communicator. Set struct_size = sizeof(ctn_collective_config); zero the rest
 * for defaults. */
typedef struct ctn_collective_config {
  uint32_t struct_size;
  int32_t rank;           /* < 0: from the launcher (mpirun's OMPI_COMM_WORLD_RANK) */
  int32_t world_size;     /* < 1: from the launcher */
  int32_t reserved;
  const char *rendezvous; /* how ranks find each other; NULL: the plugin's default. mpi: ignored
                             (mpirun wires the ranks). nccl: "file:PATH": rank 0 writes the NCCL
                             unique id to PATH, the others wait for it (a shared file system) */
  double timeout_s;       /* a collective not done after this many seconds fails and aborts
                             the job, naming the ranks missing when known; <= 0: 60 */
} ctn_collective_config;

typedef struct ctn_collective_desc {
  ctn_plugin_header header; /* frozen prefix; header.kind == CTN_PLUGIN_COLLECTIVE */

  /* --- since 1.2 --- */
  uint32_t flags; /* CTN_COLLECTIVE_* */
  uint32_t reserved;

  /* Cheap availability check while loading (dlopen of the transport library, device count).
   * Must not start the transport. CTN_ERR_UNAVAILABLE with a reason when it cannot work here. */
  ctn_status (*probe)(const ctn_host_api *host);
  /* Joins the job. At most one communicator per plugin per process. */
  ctn_status (*init)(const ctn_host_api *host, const ctn_collective_config *config,
                     void **out_state);
  /* Leaves the job (MPI_Finalize, ncclCommDestroy). Accepts the state of a successful init. */
  void (*shutdown)(void *state);
  /* "Open MPI 4.1.4, rank 0 of 2" and similar; valid until shutdown. */
  const char *(*describe)(void *state);
  int32_t (*rank)(void *state);
  int32_t (*world_size)(void *state);
  /* In place over `count` elements of `dtype` (f32, f64, i32, i64). op: CTN_REDUCE_*. */
  ctn_status (*allreduce)(void *state, void *buf, uint64_t count, ctn_dtype dtype, uint32_t op);
  /* `bytes` bytes of rank `root`'s buffer into every rank's. */
  ctn_status (*broadcast)(void *state, void *buf, uint64_t bytes, int32_t root);
  ctn_status (*barrier)(void *state);
  /* Ends the whole job now with `code`, after writing `why` to stderr. Does not return. */
  void (*abort)(void *state, int32_t code, const char *why);
  /* The message of this communicator's last failure ("" when none); valid until the next call. */
  const char *(*last_error)(void *state);

  /* --- since 1.7: overlapped allreduce (docs/DISTRIBUTED.md, "Overlap") ---
   * Optional: both NULL (or a descriptor from a 1.6 or older plugin) and the host uses the
   * blocking allreduce above. allreduce_start begins the same in-place reduction as allreduce
   * and returns at once with a ticket (> 0); the buffer belongs to the plugin until
   * allreduce_wait(ticket) returns, which completes it (CTN_REDUCE_MEAN's division included).
   * Each ticket is waited once, in any order; every started allreduce is waited before any
   * other collective (allreduce, broadcast, barrier) on the communicator. Every rank starts the
   * same allreduces in the same order. A start may also make progress on the allreduces started
   * before it. Failures and the timeout are those of allreduce; a failed
   * start leaves no allreduce pending. */
  ctn_status (*allreduce_start)(void *state, void *buf, uint64_t count, ctn_dtype dtype, uint32_t op,
                                uint64_t *out_ticket);
  ctn_status (*allreduce_wait)(void *state, uint64_t ticket);
} ctn_collective_desc;

/* =============================================================================================
 * C API
 * =========================================================================================== */

/* Starts a communicator over the collective plugin `name` ("mpi", "nccl") loaded in `ctx`.
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL); CTN_ERR_UNAVAILABLE (no such plugin loaded, or it
 * reported unavailable: the message gives its reason); CTN_ERR_IO (the transport failed to
 * start). The context must outlive the communicator. since 1.2 */
CTN_API ctn_status ctn_collective_open(ctn_context *ctx, const char *name,
                                       const ctn_collective_config *config,
                                       ctn_collective **out);
/* Leaves the job. Accepts NULL. since 1.2 */
CTN_API void ctn_collective_release(ctn_collective *c);
/* This process's rank and the number of ranks. since 1.2 */
CTN_API ctn_status ctn_collective_rank(const ctn_collective *c, int32_t *out_rank,
                                       int32_t *out_world_size);
/* One line on the communicator (plugin, rank, transport); owned by it. since 1.2 */
CTN_API ctn_status ctn_collective_describe(const ctn_collective *c, const char **out_text);
/* In place over a contiguous host tensor (f32, f64, i32, i64). op: CTN_REDUCE_*. since 1.2 */
CTN_API ctn_status ctn_collective_allreduce(ctn_collective *c, ctn_tensor *t, uint32_t op);
/* Rank `root`'s tensor into every rank's (same dtype and shape everywhere). since 1.2 */
CTN_API ctn_status ctn_collective_broadcast(ctn_collective *c, ctn_tensor *t, int32_t root);
/* Returns once every rank has called it (or the timeout fails it). since 1.2 */
CTN_API ctn_status ctn_collective_barrier(ctn_collective *c);
/* Ends the whole job with `code` (non-zero), writing `why` to stderr first. Does not return:
 * the one call that ends the process, and only when the application asks. since 1.2 */
CTN_API void ctn_collective_abort(ctn_collective *c, int32_t code, const char *why);
/* The communicator's last failure, "" when none (valid until the next call on it). since 1.2 */
CTN_API const char *ctn_collective_last_error(const ctn_collective *c);

/* Default fusion-bucket size of data-parallel plans (ctn_compile_options.dp_bucket_bytes = 0):
 * Horovod's tensor-fusion threshold. */
#define CTN_DP_DEFAULT_BUCKET_BYTES (64ull << 20)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_COLLECTIVE_H */
