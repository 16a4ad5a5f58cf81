// The collective C API (collective.h): communicators over a loaded collective plugin.
#include <chutney/collective.h>

#include "capi/handles.h"
#include "compile/data_parallel.h"
#include "util/status.h"
#include "util/wall.h"

#include <cstdio>
#include <cstdlib>

using namespace ctn;

namespace {

void call(ctn_collective *c, const char *what, ctn_status s) {
  if (s == CTN_OK) return;
  std::string m = take_plugin_error();
  fail(s, "%s (collective %s, rank %d of %d): %s", what, c->plugin->name.c_str(), c->rank, c->size,
       m.empty() ? status_name(s) : m.c_str());
}

}  // namespace

void ctn_collective::allreduce(void *buf, uint64_t count, ctn_dtype dt, uint32_t op) {
  std::lock_guard<std::mutex> lk(mu);
  take_plugin_error();
  call(this, "allreduce", plugin->desc.allreduce(state, buf, count, dt, op));
}

void ctn_collective::broadcast(void *buf, uint64_t bytes, int32_t root) {
  std::lock_guard<std::mutex> lk(mu);
  take_plugin_error();
  call(this, "broadcast", plugin->desc.broadcast(state, buf, bytes, root));
}

void ctn_collective::barrier() {
  std::lock_guard<std::mutex> lk(mu);
  take_plugin_error();
  call(this, "barrier", plugin->desc.barrier(state));
}

void ctn_collective::abort(int32_t code, const std::string &why) {
  plugin->desc.abort(state, code, why.c_str());
  std::_Exit(code);  // the slot does not return; in case a plugin's does
}

extern "C" {

CTN_API ctn_status ctn_collective_open(ctn_context *ctx, const char *name, const ctn_collective_config *config,
                                       ctn_collective **out) {
  return wall([&] {
    if (!ctx || !name || !out) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_collective_open: ctx, name or out is NULL");
    ctn_collective_config cfg{};
    cfg.struct_size = sizeof cfg;
    cfg.rank = -1;
    cfg.world_size = -1;
    if (config) {
      if (config->struct_size < sizeof cfg)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_collective_open: config.struct_size %u is smaller than %zu", config->struct_size,
             sizeof cfg);
      cfg = *config;
    }
    std::lock_guard<std::mutex> lk(ctx->mu);
    CollectivePlugin *p = ctx->find_collective(name);
    if (!p) {
      std::string have;
      for (auto &c : ctx->collectives) have += (have.empty() ? "" : ", ") + c->name;
      fail(CTN_ERR_UNAVAILABLE, "ctn_collective_open: no collective plugin \"%s\" is loaded (loaded: %s; see `chutney "
           "plugins --explain`)", name, have.empty() ? "none" : have.c_str());
    }
    if (!p->available) fail(CTN_ERR_UNAVAILABLE, "ctn_collective_open: collective \"%s\" is %s", name, p->description.c_str());
    if (p->open) fail(CTN_ERR_STATE, "ctn_collective_open: collective \"%s\" already has a communicator in this process", name);
    auto c = std::make_unique<ctn_collective>();
    c->ctx = ctx;
    c->plugin = p;
    take_plugin_error();
    ctn_status s;
    try {
      s = p->desc.init(host_api(), &cfg, &c->state);
    } catch (...) {
      fail(CTN_ERR_PLUGIN, "ctn_collective_open: collective \"%s\": init threw", name);
    }
    if (s != CTN_OK) {
      std::string m = take_plugin_error();
      fail(s, "ctn_collective_open: collective \"%s\": %s", name, m.empty() ? status_name(s) : m.c_str());
    }
    c->rank = p->desc.rank(c->state);
    c->size = p->desc.world_size(c->state);
    p->open = true;
    *out = c.release();
  });
}

CTN_API void ctn_collective_release(ctn_collective *c) {
  if (!c) return;
  try {
    std::lock_guard<std::mutex> lk(c->ctx->mu);
    c->plugin->desc.shutdown(c->state);
    c->plugin->open = false;
  } catch (...) {
  }
  delete c;
}

CTN_API ctn_status ctn_collective_rank(const ctn_collective *c, int32_t *out_rank, int32_t *out_world_size) {
  return wall([&] {
    if (!c) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_collective_rank: c is NULL");
    if (out_rank) *out_rank = c->rank;
    if (out_world_size) *out_world_size = c->size;
  });
}

CTN_API ctn_status ctn_collective_describe(const ctn_collective *c, const char **out_text) {
  return wall([&] {
    if (!c || !out_text) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_collective_describe: NULL argument");
    const char *d = c->plugin->desc.describe(c->state);
    *out_text = d ? d : "";
  });
}

CTN_API ctn_status ctn_collective_allreduce(ctn_collective *c, ctn_tensor *t, uint32_t op) {
  return wall([&] {
    if (!c || !t) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_collective_allreduce: NULL argument");
    if (!t->is_contiguous()) fail(CTN_ERR_STATE, "ctn_collective_allreduce: the tensor is not contiguous");
    c->allreduce(t->data(), static_cast<uint64_t>(t->numel()), static_cast<ctn_dtype>(t->dtype), op);
  });
}

CTN_API ctn_status ctn_collective_broadcast(ctn_collective *c, ctn_tensor *t, int32_t root) {
  return wall([&] {
    if (!c || !t) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_collective_broadcast: NULL argument");
    if (!t->is_contiguous()) fail(CTN_ERR_STATE, "ctn_collective_broadcast: the tensor is not contiguous");
    c->broadcast(t->data(), t->nbytes(), root);
  });
}

CTN_API ctn_status ctn_collective_barrier(ctn_collective *c) {
  return wall([&] {
    if (!c) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_collective_barrier: c is NULL");
    c->barrier();
  });
}

CTN_API void ctn_collective_abort(ctn_collective *c, int32_t code, const char *why) {
  if (!c) {
    std::fprintf(stderr, "chutney: abort: %s\n", why ? why : "");
    std::_Exit(code ? code : 1);
  }
  c->abort(code ? code : 1, why ? why : "");
}

CTN_API const char *ctn_collective_last_error(const ctn_collective *c) {
  if (!c) return "";
  const char *e = c->plugin->desc.last_error(c->state);
  return e ? e : "";
}

}  // extern "C"
