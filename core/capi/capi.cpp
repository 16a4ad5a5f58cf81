// The C ABI: argument checks and the try/catch wall around every exported function. Failures
// become a status plus a thread-local message (ctn_last_error); out-params are untouched then.
// This file: versions, errors, contexts, plugins and the op registry; tensors are in
// capi_tensor.cpp, graphs in capi_graph.cpp, plans in capi_plan.cpp (and the optional areas in
// capi_collective.cpp, capi_dlpack.cpp, capi_nn.cpp, capi_onnx.cpp).
#include <chutney/chutney.h>
#include <chutney/ops.h>
#include <chutney/plugin.h>

#include "capi/capi_common.h"
#include "exec/registry.h"
#include "plugin/context.h"
#include "util/env.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

using namespace ctn;
using namespace ctn::capi;

namespace {

// Worker threads of host backends: the bound of the CPU backend's num_threads option, applied
// to every way of asking (options, CHUTNEY_NUM_THREADS, ctn_context_set_num_threads).
constexpr int32_t kMaxThreads = 1024;

// CHUTNEY_NUM_THREADS: 0 when unset or empty; an integer in [1, kMaxThreads], else an error
// naming the variable (a typo must not silently become "all cores" or 100000 threads).
int32_t env_num_threads() {
  const char *e = std::getenv("CHUTNEY_NUM_THREADS");
  if (!e || !*e) return 0;
  char *end = nullptr;
  errno = 0;
  long n = std::strtol(e, &end, 10);
  if (errno || end == e || *end != '\0' || n < 1 || n > kMaxThreads)
    fail(CTN_ERR_INVALID_ARGUMENT, "CHUTNEY_NUM_THREADS must be an integer in [1, %d], got '%s'", kMaxThreads, e);
  return static_cast<int32_t>(n);
}


// The checks of a ctn_context_*_info call before it fills `out`: `index` names one of the `n`
// `items`, and out->struct_size covers at least the fields before `name_offset` (an older,
// smaller struct gets the fields it has; since 1.2, 1.0 and 1.1 required the full size). Returns
// the caller's struct_size.
uint32_t info_checks(const char *fn, uint32_t index, size_t n, const char *items, uint32_t sz, size_t name_offset,
                     const char *info_type) {
  if (index >= n) fail(CTN_ERR_INVALID_ARGUMENT, "%s: index %u is out of range (%zu %s)", fn, index, n, items);
  if (sz < name_offset)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: out->struct_size %u is too small: set it to sizeof(%s)", fn, sz, info_type);
  return sz;
}

}  // namespace

extern "C" {

/* ---- versions and errors ---- */
CTN_API uint32_t ctn_abi_version(void) { return CTN_ABI_VERSION; }
CTN_API const char *ctn_version_string(void) {
#define CTN_STR2(x) #x
#define CTN_STR(x) CTN_STR2(x)
  return CTN_STR(CTN_VERSION_MAJOR) "." CTN_STR(CTN_VERSION_MINOR) "." CTN_STR(CTN_VERSION_PATCH);
}
CTN_API const char *ctn_last_error(void) { return last_error(); }
CTN_API const char *ctn_status_name(ctn_status s) { return status_name(s); }
CTN_API size_t ctn_dtype_size(ctn_dtype d) { return dtype_size(raw_dtype(d)); }
CTN_API const char *ctn_dtype_name(ctn_dtype d) { return dtype_name(raw_dtype(d)); }

/* ---- contexts ---- */
CTN_API ctn_status ctn_context_create(const ctn_context_options *options, ctn_context **out) {
  return wall([&] {
    NEED(out);
    validate_environment();  // every CHUTNEY_* variable, before any plugin reads one
    ctn_context_options o{};
    o.struct_size = sizeof o;
    if (options) {
      if (options->struct_size < offsetof(ctn_context_options, reserved))
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_create: options.struct_size %u is too small", options->struct_size);
      std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof o));
    }
    auto ctx = std::make_unique<ctn_context>();
    int32_t threads = o.num_threads;
    if (threads < 0 || threads > kMaxThreads)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_create: options.num_threads must be in [0, %d], got %d", kMaxThreads,
           threads);
    if (threads == 0) threads = env_num_threads();
    if (threads == 0) {
      long n = sysconf(_SC_NPROCESSORS_ONLN);
      threads = n > 0 ? static_cast<int32_t>(std::min<long>(n, kMaxThreads)) : 1;
    }
    ctx->num_threads = threads;
    ctx->autoload(o);
    const char *pref = o.backends ? o.backends : std::getenv("CHUTNEY_BACKEND");
    if (pref && *pref) {  // empty: the default list
      ctx->preference = ctx->parse_preference(pref, o.backends ? "ctn_context_options.backends" : "CHUTNEY_BACKEND");
    } else {
      // Default: the CPU backend first, then whatever else is available.
      ctx->preference.clear();
      if (Backend *c = ctx->find_backend("cpu"); c && c->available) ctx->preference.push_back(c);
      for (auto &b : ctx->backends)
        if (b->available && b.get() != ctx->find_backend("cpu")) ctx->preference.push_back(b.get());
    }
    ctx->publish_preference();
    *out = ctx.release();
  });
}

CTN_API void ctn_context_release(ctn_context *ctx) { delete ctx; }

CTN_API ctn_status ctn_context_load_plugin(ctn_context *ctx, const char *path) {
  return wall([&] {
    NEED(ctx);
    NEED(path);
    std::lock_guard<std::mutex> lk(ctx->mu);
    ctx->load_plugin(path, true);
    ctx->publish_preference();  // the first backend loaded into an empty context is preferred
  });
}

/* ---- since 1.2: in-process op libraries, backend extras ---- */
CTN_API ctn_status ctn_context_add_oplib(ctn_context *ctx,
                                         const struct ctn_plugin_header *(*query)(uint32_t, const struct ctn_host_api *)) {
  return wall([&] {
    NEED(ctx);
    NEED(query);
    std::lock_guard<std::mutex> lk(ctx->mu);
    ctx->admit_plugin(query, "<in-process>", nullptr, true);
  });
}

CTN_API ctn_status ctn_context_backend_proc(ctn_context *ctx, const char *backend, const char *name, void **out_proc,
                                            void **out_state) {
  return wall([&] {
    NEED(ctx);
    NEED(backend);
    NEED(name);
    NEED(out_proc);
    Backend *b = ctx->find_backend(backend);
    if (!b) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_backend_proc: no backend named \"%s\" is loaded", backend);
    if (!b->available)
      fail(CTN_ERR_UNAVAILABLE, "ctn_context_backend_proc: backend \"%s\" is unavailable: %s", backend,
           b->description.c_str());
    void *p = nullptr;
    if (b->desc.get_proc_address) {
      try {
        p = b->desc.get_proc_address(b->state, name);
      } catch (...) {
        fail(CTN_ERR_PLUGIN, "ctn_context_backend_proc: backend \"%s\": get_proc_address(\"%s\") threw", backend, name);
      }
    }
    if (!p)
      fail(CTN_ERR_UNSUPPORTED, "ctn_context_backend_proc: backend \"%s\" has no extra named \"%s\"%s", backend, name,
           b->desc.get_proc_address ? "" : " (it offers no extras)");
    *out_proc = p;
    if (out_state) *out_state = b->state;
  });
}

/* ---- since 1.2: the op registry ---- */
CTN_API ctn_status ctn_context_op_count(ctn_context *ctx, uint32_t *out_count) {
  return wall([&] {
    NEED(ctx);
    NEED(out_count);
    *out_count = static_cast<uint32_t>(registry_ops(*ctx).size());
  });
}

CTN_API ctn_status ctn_context_op_info(ctn_context *ctx, uint32_t index, ctn_op_info *out) {
  return wall([&] {
    NEED(ctx);
    NEED(out);
    const std::vector<const OpDef *> ops = registry_ops(*ctx);
    const uint32_t sz =
        info_checks(__func__, index, ops.size(), "ops", out->struct_size, offsetof(ctn_op_info, name), "ctn_op_info");
    const OpDef &op = *ops[index];
    ctn_op_info info{};
    info.struct_size = sz;
    info.n_inputs = op.n_inputs;
    info.name = ctx->listed_name(op);  // "ctn::softsign" once a library's softsign shadows it
    info.attributes = op.lib ? "" : builtin_attributes(op);
    info.doc = op.ext && op.ext->doc ? op.ext->doc : "";
    info.origin = op.lib ? op.lib->name.c_str() : "builtin";
    info.origin_path = op.lib ? op.lib->path.c_str() : "";
    info.differentiable = differentiable(op);
    info.flags = (op.flags & OP_ELEMENTWISE) ? CTN_OP_INFO_ELEMENTWISE : 0u;
    std::memcpy(out, &info, std::min<size_t>(sz, sizeof info));
  });
}

CTN_API ctn_status ctn_context_op_support(ctn_context *ctx, const char *backend, const char *op, ctn_dtype dtype,
                                         int32_t *out_supported, const char **out_reason) {
  static thread_local std::string reason;
  return wall([&] {
    NEED(ctx);
    NEED(backend);
    NEED(op);
    NEED(out_supported);
    const OpDef *def = ctx->find_op(op);
    if (!def) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_op_support: no op named \"%s\"", op);
    if (!dtype_valid(dtype)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_op_support: unknown dtype %d", int(dtype));
    Backend *b = ctx->find_backend(backend);
    if (!b) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_op_support: no backend named \"%s\" is loaded", backend);
    if (!b->available)
      fail(CTN_ERR_UNAVAILABLE, "ctn_context_op_support: backend \"%s\" is unavailable: %s", backend,
           b->description.c_str());
    std::string why;
    const bool ok = probe_support(*ctx, *b, *def, dtype, &why);
    *out_supported = ok ? 1 : 0;
    if (out_reason) {
      reason = why;
      *out_reason = reason.c_str();
    }
  });
}

CTN_API ctn_status ctn_context_plugin_report(ctn_context *ctx, const char **out_text) {
  return wall([&] {
    NEED(ctx);
    NEED(out_text);
    std::lock_guard<std::mutex> lk(ctx->mu);
    *out_text = ctx->full_report().c_str();
  });
}

CTN_API ctn_status ctn_context_backend_count(ctn_context *ctx, uint32_t *out_count) {
  return wall([&] {
    NEED(ctx);
    NEED(out_count);
    *out_count = static_cast<uint32_t>(ctx->backends.size());
  });
}

CTN_API ctn_status ctn_context_backend_info(ctn_context *ctx, uint32_t index, ctn_backend_info *out) {
  return wall([&] {
    NEED(ctx);
    NEED(out);
    const uint32_t sz = info_checks(__func__, index, ctx->backends.size(), "backends", out->struct_size,
                                    offsetof(ctn_backend_info, name), "ctn_backend_info");
    const Backend &b = *ctx->backends[index];
    ctn_backend_info info{};
    info.struct_size = sz;
    info.available = b.available;
    info.name = b.name.c_str();
    info.description = b.description.c_str();
    info.path = b.path.c_str();
    info.abi_major = b.abi_major;
    info.abi_minor = b.abi_minor;
    std::memcpy(out, &info, std::min<size_t>(sz, sizeof info));
  });
}

CTN_API ctn_status ctn_context_set_backends(ctn_context *ctx, const char *backends) {
  return wall([&] {
    NEED(ctx);
    NEED(backends);
    auto p = ctx->parse_preference(backends, "ctn_context_set_backends");
    std::lock_guard<std::mutex> lk(ctx->mu);
    ctx->preference = std::move(p);
    ctx->publish_preference();
  });
}

CTN_API ctn_status ctn_context_set_num_threads(ctn_context *ctx, int32_t n) {
  return wall([&] {
    NEED(ctx);
    if (n < 1 || n > kMaxThreads)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_set_num_threads: %d threads requested (1 to %d)", n, kMaxThreads);
    std::string v = std::to_string(n);
    std::lock_guard<std::mutex> lk(ctx->mu);
    for (auto &b : ctx->backends)
      if (b->available && b->host_memory() && b->desc.set_option) b->set_option("num_threads", v.c_str());
    ctx->num_threads = n;
  });
}

CTN_API ctn_status ctn_context_set_option(ctn_context *ctx, const char *backend, const char *key, const char *value) {
  return wall([&] {
    NEED(ctx);
    NEED(backend);
    NEED(key);
    NEED(value);
    Backend *b = ctx->find_backend(backend);
    if (!b || !b->available) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_set_option: backend \"%s\" is not available", backend);
    if (!b->desc.set_option) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_set_option: backend \"%s\" takes no options", backend);
    b->set_option(key, value);
  });
}

}  // extern "C"
