#include "plugin/context.h"
#include "plugin/backend_proc.h"

#include "graph/graph.h"
#include "tensor/pool.h"
#include "util/status.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ctn {

void release_kernel(ctn_kernel &k) {
  if (k.release && k.state) {
    try {
      k.release(k.state);
    } catch (...) {
    }
  }
  k = ctn_kernel{};
}

// Backend wrappers: turn plugin statuses into ctn::Error with the plugin's message.
void *Backend::alloc(uint64_t bytes) {
  void *h = nullptr;
  Serial serial(*this);
  take_plugin_error();
  CTN_CHECK_PLUGIN(desc.buffer_alloc(state, bytes ? bytes : 64, &h),
                   format("backend %s: allocating %llu bytes", name.c_str(), static_cast<unsigned long long>(bytes)));
  return h;
}
void Backend::free(void *handle) {
  if (!handle) return;
  Serial serial(*this);
  desc.buffer_free(state, handle);
}
void Backend::upload(void *handle, uint64_t offset, const void *src, uint64_t bytes) {
  if (!bytes) return;
  Serial serial(*this);
  CTN_CHECK_PLUGIN(desc.upload(state, handle, offset, src, bytes), "backend " + name + ": upload");
}
void Backend::download(void *handle, uint64_t offset, void *dst, uint64_t bytes) {
  if (!bytes) return;
  Serial serial(*this);
  CTN_CHECK_PLUGIN(desc.download(state, handle, offset, dst, bytes), "backend " + name + ": download");
}
void Backend::sync() {
  if (!desc.synchronize) return;
  Serial serial(*this);
  CTN_CHECK_PLUGIN(desc.synchronize(state), "backend " + name + ": synchronize");
}
bool Backend::get_kernel(const ctn_op_signature &sig, ctn_kernel *out, std::string *why) {
  Serial serial(*this);
  take_plugin_error();
  ctn_status s;
  try {
    s = desc.get_kernel(state, &sig, out);
  } catch (const std::exception &e) {
    fail(CTN_ERR_PLUGIN, "backend %s: get_kernel(%s) threw: %s", name.c_str(), sig.op, e.what());
  } catch (...) {
    fail(CTN_ERR_PLUGIN, "backend %s: get_kernel(%s) threw", name.c_str(), sig.op);
  }
  if (s == CTN_OK) return true;
  std::string m = take_plugin_error();
  if (s == CTN_ERR_UNSUPPORTED) {
    if (why) *why = m.empty() ? "unsupported" : m;
    return false;
  }
  throw Error(s, format("backend %s: %s: %s", name.c_str(), sig.op, m.empty() ? status_name(s) : m.c_str()));
}

void Backend::release(ctn_kernel &k) {
  if (k.release && k.state) {
    Serial serial(*this);
    release_kernel(k);
  }
  k = ctn_kernel{};
}

void Backend::set_option(const char *key, const char *value) {
  if (!desc.set_option) fail(CTN_ERR_INVALID_ARGUMENT, "backend \"%s\" takes no options", name.c_str());
  Serial serial(*this);
  take_plugin_error();
  CTN_CHECK_PLUGIN(desc.set_option(state, key, value), format("backend %s: option %s=%s", name.c_str(), key, value));
}

std::recursive_mutex &plugin_lifecycle_mutex() {
  static std::recursive_mutex m;
  return m;
}

namespace {
std::atomic<uint64_t> g_next_context_id{1};
}  // namespace

Context::Context() : id(g_next_context_id.fetch_add(1, std::memory_order_relaxed)), eager_buffers(new BufferPool) {
  publish_preference();  // empty until plugins load
  size_t n = 0;
  const OpDef *const *b = builtin_ops(&n);
  try {
    for (size_t i = 0; i < n; ++i) {
      ops[b[i]->name] = b[i];
      ops["ctn::" + b[i]->name] = b[i];
    }
  } catch (...) {
    eager_buffers->close();  // the destructor does not run for a constructor that throws
    throw;
  }
}

Context::~Context() {
  std::lock_guard<std::recursive_mutex> lifecycle(plugin_lifecycle_mutex());
  for (auto &e : eager_cache) e.second.backend->release(e.second.kernel);
  eager_cache.clear();
  eager_buffers->close();
  for (auto &b : backends) {
    if (b->available && b->state) {
      try {
        b->desc.shutdown(b->state);
      } catch (...) {
      }
    }
    // Unload only after shutdown has joined the backend's threads.
    if (b->dl) dlclose(b->dl);
  }
  for (auto &l : oplibs) {
    if (l->desc.shutdown) {
      try {
        l->desc.shutdown();
      } catch (...) {
      }
    }
    if (l->dl) dlclose(l->dl);
  }
  // Communicators hold their plugin open (ctn_collective_release); the context outlives them.
  for (auto &c : collectives)
    if (c->dl && !c->open) dlclose(c->dl);
}

const OpDef *Context::find_op(const char *name, const OpLib *from) const {
  if (!name) return nullptr;
  if (from && !std::strstr(name, "::"))
    for (const auto &d : from->ops)
      if (d->name == name) return d.get();
  auto it = ops.find(std::string(name));
  return it == ops.end() ? nullptr : it->second;
}

const OpDef *Context::find_core_op(const char *name) const {
  if (!name) return nullptr;
  if (!std::strstr(name, "::"))
    if (const OpDef *b = find_builtin_op(name)) return b;
  return find_op(name);
}

const char *Context::listed_name(const OpDef &op) const {
  auto it = ops.find(op.name);
  if (it != ops.end() && it->second == &op) return it->first.c_str();
  auto jt = ops.find(op.lib ? static_cast<const ExtOpDef &>(op).qualified : "ctn::" + op.name);
  if (jt != ops.end() && jt->second == &op) return jt->first.c_str();
  return op.name.c_str();  // a library op whose qualified name another library's op took first
}

namespace {
thread_local const OpLib *t_oplib_call = nullptr;
}
OpLibCallScope::OpLibCallScope(const OpLib *lib) : prev_(t_oplib_call) { t_oplib_call = lib; }
OpLibCallScope::~OpLibCallScope() { t_oplib_call = prev_; }
const OpLib *OpLibCallScope::current() { return t_oplib_call; }

Backend *Context::find_backend(std::string_view name) const {
  for (auto &b : backends)
    if (b->name == name) return b.get();
  return nullptr;
}

void Context::publish_preference() {
  published_all_.push_back(std::make_unique<const std::vector<Backend *>>(preference));
  published_.store(published_all_.back().get(), std::memory_order_release);
}

std::vector<Backend *> Context::parse_preference(const char *list, const char *source) const {
  // The first-party backends: a name among them that is not loaded here (no GPU build, no
  // driver) is skipped, so one list serves many machines; any other unknown name is a typo.
  static const char *const kKnown[] = {"cpu", "cuda", "opencl", "vulkan"};
  std::vector<Backend *> out;
  std::string missing, cur;
  auto known_names = [&] {
    std::string k;
    for (const char *n : kKnown) k += (k.empty() ? "" : ", ") + std::string(n);
    for (const auto &b : backends)
      if (std::find(std::begin(kKnown), std::end(kKnown), b->name) == std::end(kKnown)) k += ", " + b->name;
    return k;
  };
  for (const char *p = list;; ++p) {
    if (*p == ',' || *p == '\0') {
      while (!cur.empty() && cur.back() == ' ') cur.pop_back();
      if (cur.empty())
        fail(CTN_ERR_INVALID_ARGUMENT, "%s \"%s\": an empty backend name (a stray ','?); known backends: %s", source,
             list, known_names().c_str());
      Backend *b = find_backend(cur);
      if (!b && std::find(std::begin(kKnown), std::end(kKnown), cur) == std::end(kKnown))
        fail(CTN_ERR_INVALID_ARGUMENT, "%s \"%s\": unknown backend \"%s\"; known backends: %s", source, list,
             cur.c_str(), known_names().c_str());
      if (b && b->available) out.push_back(b);
      else missing += (missing.empty() ? "" : "; ") + cur + (b ? ": " + b->description : ": no such backend is loaded");
      cur.clear();
      if (!*p) break;
    } else if (*p != ' ' || !cur.empty()) {
      cur += *p;
    }
  }
  if (out.empty())
    fail(CTN_ERR_UNAVAILABLE, "none of the requested backends \"%s\" is available (%s)", list, missing.c_str());
  return out;
}

namespace {

ctn_status host_set_error(ctn_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_plugin_error(fmt ? vformat(fmt, ap) : std::string());
  va_end(ap);
  return code;
}

int log_threshold() {
  static int t = [] {
    const char *e = std::getenv("CHUTNEY_LOG");
    if (!e) return CTN_LOG_WARN;
    if (!std::strcmp(e, "debug")) return CTN_LOG_DEBUG;
    if (!std::strcmp(e, "info")) return CTN_LOG_INFO;
    if (!std::strcmp(e, "error")) return CTN_LOG_ERROR;
    return CTN_LOG_WARN;
  }();
  return t;
}

void host_log(ctn_log_level level, const char *plugin, const char *message) {
  if (level < log_threshold()) return;
  static const char *names[] = {"debug", "info", "warn", "error"};
  std::fprintf(stderr, "chutney[%s] %s: %s\n", plugin ? plugin : "?", names[level & 3], message ? message : "");
}

// Graph building for gradient rules; the wall here keeps exceptions inside the core.
template <class F>
ctn_status host_wall(F &&f) {
  try {
    f();
    return CTN_OK;
  } catch (const Error &e) {
    set_plugin_error(e.message());
    return e.code();
  } catch (const std::exception &e) {
    set_plugin_error(e.what());
    return CTN_ERR_INTERNAL;
  }
}

ctn_status host_graph_op(ctn_graph *g, const char *op, uint32_t n, const ctn_node *inputs, const ctn_attrs *attrs,
                         ctn_node *out) {
  if (!g || !out) return host_set_error(CTN_ERR_INVALID_ARGUMENT, "graph_op: null graph or out");
  // An op library's rule names ops as its program would; a backend expanding an op as the core.
  const OpLib *lib = OpLibCallScope::current();
  return host_wall([&] { *out = lib ? g->add_named_op(op, n, inputs, attrs, lib) : g->add_op(op, n, inputs, attrs); });
}
ctn_status host_graph_scalar(ctn_graph *g, ctn_dtype dtype, double v, ctn_node *out) {
  if (!g || !out) return host_set_error(CTN_ERR_INVALID_ARGUMENT, "graph_scalar: null graph or out");
  int32_t dt;  // read as an integer: an op library's out-of-range dtype is refused, not loaded as the enum
  std::memcpy(&dt, &dtype, sizeof dt);
  return host_wall([&] { *out = g->add_scalar(dt, v); });
}
ctn_status host_graph_node_info(ctn_graph *g, ctn_node n, ctn_dtype *dt, uint32_t *ndim, int64_t *shape) {
  if (!g) return host_set_error(CTN_ERR_INVALID_ARGUMENT, "graph_node_info: null graph");
  return host_wall([&] {
    g->check(n, "graph_node_info");
    const ValueInfo &v = g->info(n);
    if (dt) *dt = static_cast<ctn_dtype>(v.dtype);
    if (ndim) *ndim = v.shape.ndim;
    if (shape)
      for (uint32_t k = 0; k < v.shape.ndim; ++k) shape[k] = v.shape[k];
  });
}

// since 1.2: set_error without varargs (Go, ctypes).
ctn_status host_set_error_message(ctn_status code, const char *message) {
  set_plugin_error(message ? std::string(message) : std::string());
  return code;
}

const ctn_host_api kHost = {
    sizeof(ctn_host_api), CTN_ABI_MAJOR, CTN_ABI_MINOR, host_set_error, host_log,
    host_graph_op,        host_graph_scalar, host_graph_node_info,
    host_set_error_message,
    host_backend_proc,  // since 1.2, plugin/backend_proc.cpp
};

}  // namespace

const ctn_host_api *host_api() { return &kHost; }

}  // namespace ctn
