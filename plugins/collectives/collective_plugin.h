// The descriptor and query entry point of a first-party collective plugin (mpi, nccl), written
// once. A plugin defines, in its anonymous namespace, `const ctn_host_api *g_host` and the slots
// probe, init, shutdown, describe, rank, world_size, allreduce, broadcast, barrier, abort_job and
// last_error; then, after that namespace, CTN_COLLECTIVE_PLUGIN("name", flags) defines kDesc
// (designated initialisers, docs/ABI.md) and ctn_plugin_query, which accepts any host of the
// same ABI major and keeps its host API in g_host.
#pragma once

#include <chutney/collective.h>
#include <chutney/plugin.h>
#include <chutney/version.h>

#include <cstdarg>
#include <cstdio>

// fail(state, code, fmt, ...): formats the message (at most 1023 bytes), keeps it as the state's
// `error` (last_error; state may be NULL) and reports it through g_host.
#define CTN_COLLECTIVE_FAIL(State)                                                                    \
  ctn_status fail(State *c, ctn_status code, const char *fmt, ...) {                                  \
    char buf[1024];                                                                                   \
    va_list ap;                                                                                       \
    va_start(ap, fmt);                                                                                \
    std::vsnprintf(buf, sizeof buf, fmt, ap);                                                         \
    va_end(ap);                                                                                       \
    if (c) c->error = buf;                                                                            \
    return g_host->set_error(code, "%s", buf);                                                        \
  }

// The describe, rank, world_size and last_error slots of a plugin whose state is a State with the
// members description, rank, size and error.
#define CTN_COLLECTIVE_ACCESSORS(State)                                                               \
  const char *describe(void *state) { return static_cast<State *>(state)->description.c_str(); }      \
  int32_t rank(void *state) { return static_cast<State *>(state)->rank; }                             \
  int32_t world_size(void *state) { return static_cast<State *>(state)->size; }                       \
  const char *last_error(void *state) { return static_cast<State *>(state)->error.c_str(); }

// CTN_COLLECTIVE_PLUGIN_ASYNC also fills the since-1.7 slots allreduce_start / allreduce_wait;
// CTN_COLLECTIVE_PLUGIN leaves them NULL (the host then uses the blocking allreduce).
#define CTN_COLLECTIVE_PLUGIN(name_, flags_) CTN_COLLECTIVE_PLUGIN_ASYNC(name_, flags_, nullptr, nullptr)
#define CTN_COLLECTIVE_PLUGIN_ASYNC(name_, flags_, start_, wait_)                                     \
  namespace {                                                                                         \
  const ctn_collective_desc kDesc = {                                                                 \
      .header = {.struct_size = sizeof(ctn_collective_desc), .abi_major = CTN_ABI_MAJOR,               \
                 .abi_minor = CTN_ABI_MINOR, .kind = CTN_PLUGIN_COLLECTIVE, .reserved = 0, .name = name_}, \
      .flags = flags_, .reserved = 0, .probe = probe, .init = init, .shutdown = shutdown,             \
      .describe = describe, .rank = rank, .world_size = world_size, .allreduce = allreduce,           \
      .broadcast = broadcast, .barrier = barrier, .abort = abort_job, .last_error = last_error,       \
      .allreduce_start = start_, .allreduce_wait = wait_,                                             \
  };                                                                                                  \
  }                                                                                                   \
  CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,              \
                                                              const ctn_host_api *host) {             \
    if (CTN_ABI_VERSION_MAJOR(host_abi_version) != CTN_ABI_MAJOR || !host) return nullptr;            \
    g_host = host;                                                                                    \
    return &kDesc.header;                                                                             \
  }
