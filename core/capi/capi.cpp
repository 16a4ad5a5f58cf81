// The C ABI: argument checks and the try/catch wall around every exported function. Failures
// become a status plus a thread-local message (ctn_last_error); out-params are untouched then.
#include <chutney/chutney.h>
#include <chutney/ops.h>
#include <chutney/plugin.h>

#include "capi/handles.h"
#include "capi/wall.h"
#include "exec/plan.h"
#include "exec/registry.h"
#include "graph/graph.h"
#include "plugin/context.h"
#include "tensor/tensor.h"
#include "util/env.h"
#include "util/status.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>


using namespace ctn;

namespace {

template <class T>
T *need(T *p, const char *fn, const char *what) {
  if (!p) fail(CTN_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
  return p;
}

#define NEED(p) need((p), __func__, #p)

// An enum that crosses the ABI is read as the integer it is: a caller's out-of-range value
// loaded as ctn_dtype would be undefined behaviour before any check could refuse it.
int32_t raw_dtype(const ctn_dtype &d) {
  static_assert(sizeof(ctn_dtype) == sizeof(int32_t), "ctn_dtype is an int");
  int32_t v;
  std::memcpy(&v, &d, sizeof v);
  return v;
}

ctn_tensor *wrap(Tensor t) { return new ctn_tensor(std::move(t)); }

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

const OpDef &builtin(const char *name) {
  const OpDef *op = find_builtin_op(name);
  if (!op) fail(CTN_ERR_INTERNAL, "built-in op %s is missing", name);
  return *op;
}

// Typed helpers resolve their OpDef once.
#define OPDEF(var, name) static const OpDef &var = builtin(name)

ctn_status unary(ctn_graph *g, const OpDef &op, ctn_node a, const ctn_attrs &at, ctn_node *out, const char *fn) {
  return wall([&] {
    need(g, fn, "g");
    need(out, fn, "out");
    *out = g->add_op(op, 1, &a, at);
  });
}

ctn_status binary(ctn_graph *g, const OpDef &op, ctn_node a, ctn_node b, const ctn_attrs &at, ctn_node *out,
                  const char *fn) {
  return wall([&] {
    need(g, fn, "g");
    need(out, fn, "out");
    ctn_node in[2] = {a, b};
    *out = g->add_op(op, 2, in, at);
  });
}

const ctn_attrs kNoAttrs{};

// Axes list -> bitmask for reductions, normalising negative axes against the input.
ctn_attrs reduce_attrs(ctn_graph *g, ctn_node a, uint32_t n_axes, const int32_t *axes, int32_t keepdims, const char *op) {
  g->check(a, op);
  const uint32_t nd = g->info(a).shape.ndim;
  if (n_axes && !axes) fail(CTN_ERR_INVALID_ARGUMENT, "%s: axes is NULL but n_axes is %u", op, n_axes);
  uint64_t mask = 0;
  for (uint32_t k = 0; k < n_axes; ++k) {
    int32_t ax = normalize_axis(op, axes[k], nd);
    if (mask & (1ull << ax)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: axis %d is listed twice", op, axes[k]);
    mask |= 1ull << ax;
  }
  if (!n_axes) mask = nd ? (1ull << nd) - 1 : 0;
  if (nd == 0) mask = 0;
  ctn_attrs at{};
  at.i[0] = static_cast<int64_t>(mask);
  at.i[1] = keepdims != 0;
  at.ni = 2;
  return at;
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
    if (index >= ops.size())
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_op_info: index %u is out of range (%zu ops)", index, ops.size());
    const uint32_t sz = out->struct_size;
    if (sz < offsetof(ctn_op_info, name))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_op_info: out->struct_size %u is too small: set it to sizeof(ctn_op_info)",
           sz);
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
    if (index >= ctx->backends.size())
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_backend_info: index %u is out of range (%zu backends)", index,
           ctx->backends.size());
    // An older, smaller struct gets the fields it has (since 1.2; 1.0 and 1.1 required the full size).
    const uint32_t sz = out->struct_size;
    if (sz < offsetof(ctn_backend_info, name))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_context_backend_info: out->struct_size %u is too small: set it to "
           "sizeof(ctn_backend_info)", sz);
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

/* ---- tensors ---- */
CTN_API ctn_status ctn_tensor_create(ctn_dtype dtype, uint32_t ndim, const int64_t *shape, const void *data,
                                     ctn_tensor **out) {
  return wall([&] {
    NEED(out);
    const int32_t dt = raw_dtype(dtype);
    if (!dtype_valid(dt)) fail(CTN_ERR_DTYPE, "ctn_tensor_create: unknown dtype %d", dt);
    Tensor t = Tensor::empty(dt, Shape::from(ndim, shape));
    if (data) std::memcpy(t.data(), data, t.nbytes());
    *out = wrap(std::move(t));
  });
}

CTN_API void ctn_tensor_release(ctn_tensor *t) { delete t; }

CTN_API ctn_status ctn_tensor_dtype(const ctn_tensor *t, ctn_dtype *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = static_cast<ctn_dtype>(t->dtype);
  });
}

CTN_API ctn_status ctn_tensor_shape(const ctn_tensor *t, uint32_t *out_ndim, int64_t *out_shape) {
  return wall([&] {
    NEED(t);
    NEED(out_ndim);
    *out_ndim = t->shape.ndim;
    if (out_shape)
      for (uint32_t k = 0; k < t->shape.ndim; ++k) out_shape[k] = t->shape[k];
  });
}

CTN_API ctn_status ctn_tensor_strides(const ctn_tensor *t, int64_t *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    for (uint32_t k = 0; k < t->shape.ndim; ++k) out[k] = t->strides[k];
  });
}

CTN_API ctn_status ctn_tensor_numel(const ctn_tensor *t, int64_t *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = t->numel();
  });
}

CTN_API ctn_status ctn_tensor_is_contiguous(const ctn_tensor *t, int32_t *out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = t->is_contiguous();
  });
}

CTN_API ctn_status ctn_tensor_read(const ctn_tensor *t, void *dst, size_t bytes) {
  return wall([&] {
    NEED(t);
    if (bytes && !dst) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_read: dst is NULL");
    if (bytes != t->nbytes())
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_read: the tensor %s%s has %zu bytes, %zu given", dtype_name(t->dtype),
           shape_str(t->shape).c_str(), t->nbytes(), bytes);
    t->read(dst);
  });
}

CTN_API ctn_status ctn_tensor_write(ctn_tensor *t, const void *src, size_t bytes) {
  return wall([&] {
    NEED(t);
    if (bytes && !src) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_write: src is NULL");
    if (bytes != t->nbytes())
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_tensor_write: the tensor %s%s has %zu bytes, %zu given", dtype_name(t->dtype),
           shape_str(t->shape).c_str(), t->nbytes(), bytes);
    need_writable(*t, "ctn_tensor_write", "the tensor");
    t->write(src);
  });
}

CTN_API ctn_status ctn_tensor_data(ctn_tensor *t, void **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    if (!t->is_contiguous()) fail(CTN_ERR_STATE, "ctn_tensor_data: the tensor is a non-contiguous view");
    *out = t->data();
  });
}

CTN_API ctn_status ctn_tensor_slice(const ctn_tensor *t, int32_t axis, int64_t start, int64_t stop, int64_t step,
                                    ctn_tensor **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = wrap(t->slice(axis, start, stop, step));
  });
}

CTN_API ctn_status ctn_tensor_permute(const ctn_tensor *t, const int32_t *perm, ctn_tensor **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = wrap(t->permute(perm));
  });
}

CTN_API ctn_status ctn_tensor_reshape(const ctn_tensor *t, uint32_t ndim, const int64_t *shape, ctn_tensor **out,
                                      int32_t *out_copied) {
  return wall([&] {
    NEED(t);
    NEED(out);
    bool copied = false;
    Tensor r = t->reshape(resolve_reshape("ctn_tensor_reshape", t->shape, ndim, shape), &copied);
    *out = wrap(std::move(r));
    if (out_copied) *out_copied = copied;
  });
}

CTN_API ctn_status ctn_tensor_contiguous(const ctn_tensor *t, ctn_tensor **out) {
  return wall([&] {
    NEED(t);
    NEED(out);
    *out = wrap(t->contiguous());
  });
}

/* ---- graphs ---- */
CTN_API ctn_status ctn_graph_create(ctn_context *ctx, uint32_t flags, ctn_graph **out) {
  return wall([&] {
    NEED(ctx);
    NEED(out);
    if (flags & ~CTN_GRAPH_EAGER) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_graph_create: unknown flags 0x%x", flags);
    *out = new ctn_graph(ctx, (flags & CTN_GRAPH_EAGER) != 0);
  });
}

CTN_API void ctn_graph_release(ctn_graph *g) { delete g; }

CTN_API ctn_status ctn_input(ctn_graph *g, const char *name, ctn_dtype dtype, uint32_t ndim, const int64_t *shape,
                             ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_input(name, raw_dtype(dtype), Shape::from(ndim, shape));
  });
}

CTN_API ctn_status ctn_constant(ctn_graph *g, const ctn_tensor *value, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(value);
    NEED(out);
    *out = g->add_constant(*value);
  });
}

CTN_API ctn_status ctn_scalar(ctn_graph *g, ctn_dtype dtype, double value, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_scalar(raw_dtype(dtype), value);
  });
}

CTN_API ctn_status ctn_variable(ctn_graph *g, const char *name, const ctn_tensor *init, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(init);
    NEED(out);
    *out = g->add_variable(name, *init);
  });
}

CTN_API ctn_status ctn_assign(ctn_graph *g, ctn_node var, ctn_node value, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_assign(var, value);
  });
}

CTN_API ctn_status ctn_op(ctn_graph *g, const char *op, uint32_t n_inputs, const ctn_node *inputs,
                          const ctn_attrs *attrs, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(op);
    NEED(out);
    *out = g->add_named_op(op, n_inputs, inputs, attrs);
  });
}

#define CTN_BINARY(fn, opname)                                                   \
  CTN_API ctn_status fn(ctn_graph *g, ctn_node a, ctn_node b, ctn_node *out) {   \
    OPDEF(op, opname);                                                           \
    return binary(g, op, a, b, kNoAttrs, out, #fn);                              \
  }
#define CTN_UNARY(fn, opname)                                        \
  CTN_API ctn_status fn(ctn_graph *g, ctn_node a, ctn_node *out) {   \
    OPDEF(op, opname);                                               \
    return unary(g, op, a, kNoAttrs, out, #fn);                      \
  }

CTN_BINARY(ctn_add, CTN_OP_ADD)
CTN_BINARY(ctn_sub, CTN_OP_SUB)
CTN_BINARY(ctn_mul, CTN_OP_MUL)
CTN_BINARY(ctn_div, CTN_OP_DIV)
CTN_BINARY(ctn_pow, CTN_OP_POW)
CTN_UNARY(ctn_neg, CTN_OP_NEG)
CTN_UNARY(ctn_exp, CTN_OP_EXP)
CTN_UNARY(ctn_log, CTN_OP_LOG)
CTN_UNARY(ctn_sqrt, CTN_OP_SQRT)
CTN_UNARY(ctn_abs, CTN_OP_ABS)
CTN_UNARY(ctn_tanh, CTN_OP_TANH)
CTN_UNARY(ctn_sigmoid, CTN_OP_SIGMOID)
CTN_UNARY(ctn_relu, CTN_OP_RELU)
CTN_UNARY(ctn_gelu, CTN_OP_GELU)

CTN_API ctn_status ctn_leaky_relu(ctn_graph *g, ctn_node a, double slope, ctn_node *out) {
  OPDEF(op, CTN_OP_LEAKY_RELU);
  return unary(g, op, a, attrs_f({slope}), out, __func__);
}

CTN_API ctn_status ctn_clamp(ctn_graph *g, ctn_node a, double lo, double hi, ctn_node *out) {
  OPDEF(op, CTN_OP_CLAMP);
  return unary(g, op, a, attrs_f({lo, hi}), out, __func__);
}

CTN_API ctn_status ctn_cast(ctn_graph *g, ctn_node a, ctn_dtype dtype, ctn_node *out) {
  OPDEF(op, CTN_OP_CAST);
  return unary(g, op, a, attrs_i({raw_dtype(dtype)}), out, __func__);
}

CTN_API ctn_status ctn_matmul(ctn_graph *g, ctn_node a, ctn_node b, int32_t trans_a, int32_t trans_b, ctn_node *out) {
  OPDEF(op, CTN_OP_MATMUL);
  return binary(g, op, a, b, attrs_i({trans_a != 0, trans_b != 0}), out, __func__);
}

#define CTN_REDUCE(fn, opname)                                                                                   \
  CTN_API ctn_status fn(ctn_graph *g, ctn_node a, uint32_t n_axes, const int32_t *axes, int32_t keepdims,       \
                        ctn_node *out) {                                                                         \
    OPDEF(op, opname);                                                                                           \
    return wall([&] {                                                                                            \
      NEED(g);                                                                                                   \
      NEED(out);                                                                                                 \
      ctn_attrs at = reduce_attrs(g, a, n_axes, axes, keepdims, opname);                                        \
      *out = g->add_op(op, 1, &a, at);                                                                           \
    });                                                                                                          \
  }
CTN_REDUCE(ctn_sum, CTN_OP_SUM)
CTN_REDUCE(ctn_mean, CTN_OP_MEAN)
CTN_REDUCE(ctn_max, CTN_OP_MAX)

CTN_API ctn_status ctn_reshape(ctn_graph *g, ctn_node a, uint32_t ndim, const int64_t *shape, ctn_node *out) {
  OPDEF(op, CTN_OP_RESHAPE);
  return wall([&] {
    NEED(g);
    NEED(out);
    if (ndim > CTN_MAX_DIMS) fail(CTN_ERR_SHAPE, "reshape: %u dims requested, at most %d", ndim, CTN_MAX_DIMS);
    if (ndim) NEED(shape);
    ctn_attrs at{};
    for (uint32_t k = 0; k < ndim; ++k) at.i[k] = shape[k];
    at.ni = ndim;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_permute(ctn_graph *g, ctn_node a, const int32_t *perm, ctn_node *out) {
  OPDEF(op, CTN_OP_PERMUTE);
  return wall([&] {
    NEED(g);
    NEED(out);
    g->check(a, "permute");
    uint32_t nd = g->info(a).shape.ndim;
    if (nd) NEED(perm);
    ctn_attrs at{};
    for (uint32_t k = 0; k < nd; ++k) at.i[k] = perm[k];
    at.ni = nd;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_transpose(ctn_graph *g, ctn_node a, ctn_node *out) {
  OPDEF(op, CTN_OP_PERMUTE);
  return wall([&] {
    NEED(g);
    NEED(out);
    g->check(a, "transpose");
    uint32_t nd = g->info(a).shape.ndim;
    if (nd < 2) fail(CTN_ERR_SHAPE, "transpose: needs at least 2 dims, got %s", shape_str(g->info(a).shape).c_str());
    ctn_attrs at{};
    for (uint32_t k = 0; k < nd; ++k) at.i[k] = k;
    at.i[nd - 2] = nd - 1;
    at.i[nd - 1] = nd - 2;
    at.ni = nd;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_slice(ctn_graph *g, ctn_node a, int32_t axis, int64_t start, int64_t stop, int64_t step,
                             ctn_node *out) {
  OPDEF(op, CTN_OP_SLICE);
  return unary(g, op, a, attrs_i({axis, start, stop, step}), out, __func__);
}

CTN_API ctn_status ctn_concat(ctn_graph *g, uint32_t n, const ctn_node *inputs, int32_t axis, ctn_node *out) {
  OPDEF(op, CTN_OP_CONCAT);
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = g->add_op(op, n, inputs, attrs_i({axis}));
  });
}

CTN_API ctn_status ctn_broadcast_to(ctn_graph *g, ctn_node a, uint32_t ndim, const int64_t *shape, ctn_node *out) {
  OPDEF(op, CTN_OP_BROADCAST_TO);
  return wall([&] {
    NEED(g);
    NEED(out);
    if (ndim > CTN_MAX_DIMS) fail(CTN_ERR_SHAPE, "broadcast_to: %u dims requested, at most %d", ndim, CTN_MAX_DIMS);
    if (ndim) NEED(shape);
    ctn_attrs at{};
    for (uint32_t k = 0; k < ndim; ++k) at.i[k] = shape[k];
    at.ni = ndim;
    *out = g->add_op(op, 1, &a, at);
  });
}

CTN_API ctn_status ctn_compare(ctn_graph *g, const char *op, ctn_node a, ctn_node b, ctn_node *out) {
  return wall([&] {
    NEED(g);
    NEED(op);
    NEED(out);
    static const char *const names[] = {CTN_OP_EQ, CTN_OP_NE, CTN_OP_LT, CTN_OP_LE, CTN_OP_GT, CTN_OP_GE};
    bool ok = false;
    for (const char *n : names) ok = ok || std::strcmp(n, op) == 0;
    if (!ok) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_compare: unknown comparison \"%s\" (eq ne lt le gt ge)", op);
    ctn_node in[2] = {a, b};
    *out = g->add_op(op, 2, in, nullptr);
  });
}

CTN_API ctn_status ctn_where(ctn_graph *g, ctn_node cond, ctn_node a, ctn_node b, ctn_node *out) {
  OPDEF(op, CTN_OP_WHERE);
  return wall([&] {
    NEED(g);
    NEED(out);
    ctn_node in[3] = {cond, a, b};
    *out = g->add_op(op, 3, in, kNoAttrs);
  });
}

CTN_API ctn_status ctn_softmax(ctn_graph *g, ctn_node a, int32_t axis, ctn_node *out) {
  OPDEF(op, CTN_OP_SOFTMAX);
  return unary(g, op, a, attrs_i({axis}), out, __func__);
}

CTN_API ctn_status ctn_log_softmax(ctn_graph *g, ctn_node a, int32_t axis, ctn_node *out) {
  OPDEF(op, CTN_OP_LOG_SOFTMAX);
  return unary(g, op, a, attrs_i({axis}), out, __func__);
}

CTN_API ctn_status ctn_cross_entropy(ctn_graph *g, ctn_node logits, ctn_node labels, ctn_node *out) {
  OPDEF(op, CTN_OP_CROSS_ENTROPY);
  return binary(g, op, logits, labels, kNoAttrs, out, __func__);
}

CTN_API ctn_status ctn_node_info(ctn_graph *g, ctn_node n, ctn_dtype *out_dtype, uint32_t *out_ndim, int64_t *out_shape) {
  return wall([&] {
    NEED(g);
    g->check(n, "ctn_node_info");
    const ValueInfo &v = g->info(n);
    if (out_dtype) *out_dtype = static_cast<ctn_dtype>(v.dtype);
    if (out_ndim) *out_ndim = v.shape.ndim;
    if (out_shape)
      for (uint32_t k = 0; k < v.shape.ndim; ++k) out_shape[k] = v.shape[k];
  });
}

CTN_API ctn_status ctn_graph_node_count(ctn_graph *g, uint32_t *out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    *out = static_cast<uint32_t>(g->size());
  });
}

CTN_API ctn_status ctn_grad(ctn_graph *g, ctn_node loss, uint32_t n_wrt, const ctn_node *wrt, ctn_node *out_grads) {
  return wall([&] {
    NEED(g);
    if (n_wrt) {
      NEED(wrt);
      NEED(out_grads);
    }
    std::vector<ctn_node> tmp(n_wrt);
    build_grad(*g, loss, n_wrt, wrt, tmp.data());
    std::copy(tmp.begin(), tmp.end(), out_grads);
  });
}

CTN_API ctn_status ctn_jvp(ctn_graph *g, uint32_t n_outputs, const ctn_node *outputs, uint32_t n_inputs,
                           const ctn_node *inputs, const ctn_node *tangents, ctn_node *out_tangents) {
  return wall([&] {
    NEED(g);
    if (g->eager()) fail(CTN_ERR_STATE, "ctn_jvp: the graph is eager; forward mode builds nodes of a graph created with flags 0");
    std::vector<ctn_node> tmp(n_outputs);
    const size_t before = g->size();
    try {
      build_jvp(*g, n_outputs, outputs, n_inputs, inputs, tangents, tmp.data());
    } catch (...) {
      g->truncate(before);  // a failed call changes no state
      throw;
    }
    std::copy(tmp.begin(), tmp.end(), out_tangents);
  });
}

CTN_API ctn_status ctn_graph_value(ctn_graph *g, ctn_node n, ctn_tensor **out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    g->check(n, "ctn_graph_value");
    const Node &nd = g->node(n);
    if (!g->eager() && nd.kind != NodeKind::Constant && nd.kind != NodeKind::Variable)
      fail(CTN_ERR_STATE, "ctn_graph_value: node %u has no value: the graph is lazy (compile it into a plan)", n);
    if (!nd.value) fail(CTN_ERR_STATE, "ctn_graph_value: node %u has no value", n);
    *out = wrap(nd.value->contiguous());
  });
}

CTN_API ctn_status ctn_graph_node_backend(ctn_graph *g, ctn_node n, const char **out_name) {
  return wall([&] {
    NEED(g);
    NEED(out_name);
    g->check(n, "ctn_graph_node_backend");
    const Backend *b = g->node(n).ran_on;
    *out_name = b ? b->name.c_str() : "";
  });
}

CTN_API ctn_status ctn_graph_to_dot(ctn_graph *g, const char **out_text) {
  return wall([&] {
    NEED(g);
    NEED(out_text);
    g->text = g->to_dot();
    *out_text = g->text.c_str();
  });
}

/* ---- plans ---- */
CTN_API ctn_status ctn_plan_compile(ctn_graph *g, uint32_t n_outputs, const ctn_node *outputs,
                                    const ctn_compile_options *options, ctn_plan **out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    if (options && options->struct_size < sizeof(uint32_t) * 2)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_compile: options.struct_size %u is too small", options->struct_size);
    ctn_compile_options o{};
    if (options) std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof o));
    *out = new ctn_plan(*g, n_outputs, outputs, options ? &o : nullptr);
  });
}

CTN_API void ctn_plan_release(ctn_plan *p) { delete p; }

CTN_API ctn_status ctn_plan_stats_get(ctn_plan *p, ctn_plan_stats *out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    uint32_t sz = out->struct_size;
    if (sz < sizeof(uint32_t)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_stats_get: set out->struct_size");
    std::memcpy(out, &p->stats(), std::min<size_t>(sz, sizeof(ctn_plan_stats)));
    out->struct_size = sz;
  });
}

CTN_API ctn_status ctn_plan_memory_report_get(ctn_plan *p, ctn_plan_memory_report *out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    uint32_t sz = out->struct_size;
    if (sz < sizeof(uint32_t)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_memory_report_get: set out->struct_size");
    std::memcpy(out, &p->memory_report(), std::min<size_t>(sz, sizeof(ctn_plan_memory_report)));
    out->struct_size = sz;
  });
}

CTN_API ctn_status ctn_plan_describe(ctn_plan *p, const char **out_text) {
  return wall([&] {
    NEED(p);
    NEED(out_text);
    *out_text = p->describe().c_str();
  });
}

CTN_API ctn_status ctn_plan_backend_steps(ctn_plan *p, const char *backend, const char *op, uint32_t *out) {
  return wall([&] {
    NEED(p);
    NEED(backend);
    NEED(out);
    *out = p->backend_steps(backend, op);
  });
}

/* ---- since 1.3: run options ---- */
CTN_API ctn_status ctn_cancel_create(ctn_cancel **out) {
  return wall([&] {
    NEED(out);
    *out = new ctn_cancel;
  });
}

CTN_API ctn_status ctn_cancel_request(ctn_cancel *c) {
  return wall([&] {
    NEED(c);
    c->flag.store(1, std::memory_order_relaxed);
  });
}

CTN_API ctn_status ctn_cancel_reset(ctn_cancel *c) {
  return wall([&] {
    NEED(c);
    c->flag.store(0, std::memory_order_relaxed);
  });
}

CTN_API ctn_status ctn_cancel_requested(const ctn_cancel *c, int32_t *out) {
  return wall([&] {
    NEED(c);
    NEED(out);
    *out = c->flag.load(std::memory_order_relaxed) ? 1 : 0;
  });
}

CTN_API void ctn_cancel_release(ctn_cancel *c) { delete c; }

CTN_API ctn_status ctn_plan_run_with_options(ctn_plan *p, const ctn_run_options *options, uint32_t n_feeds,
                                             const ctn_node *feed_nodes, const ctn_tensor *const *feed_values,
                                             uint32_t n_outputs, ctn_tensor *const *outputs) {
  return wall([&] {
    NEED(p);
    RunControl rc;
    if (options) {
      if (options->struct_size < sizeof(ctn_run_options))  // the 1.3 struct is the first one
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run_with_options: options.struct_size %u is smaller than the %zu bytes "
             "of ctn_run_options", options->struct_size, sizeof(ctn_run_options));
      if (options->flags & ~CTN_RUN_CHECK_NUMERICS)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run_with_options: unknown flags 0x%x", options->flags & ~CTN_RUN_CHECK_NUMERICS);
      rc.cancel = options->cancel ? &options->cancel->flag : nullptr;
      rc.check_numerics = options->flags & CTN_RUN_CHECK_NUMERICS;
      rc.timeout_us = options->timeout_us;
      rc.has_deadline = options->timeout_us > 0;
      if (rc.has_deadline)
        rc.deadline = std::chrono::steady_clock::now() +
                      std::chrono::microseconds(std::min<uint64_t>(options->timeout_us, uint64_t{1} << 50));
    }
    // The message is formatted only for a read-only output: this runs on every plan run.
    for (uint32_t i = 0; outputs && i < n_outputs; ++i)
      if (outputs[i] && outputs[i]->storage && outputs[i]->storage->read_only)
        need_writable(*outputs[i], "ctn_plan_run", format("output %u", i).c_str());
    p->run(n_feeds, feed_nodes, feed_values, n_outputs, outputs, options ? &rc : nullptr);
  });
}

CTN_API ctn_status ctn_plan_run(ctn_plan *p, uint32_t n_feeds, const ctn_node *feed_nodes,
                                const ctn_tensor *const *feed_values, uint32_t n_outputs, ctn_tensor *const *outputs) {
  return ctn_plan_run_with_options(p, nullptr, n_feeds, feed_nodes, feed_values, n_outputs, outputs);
}

CTN_API ctn_status ctn_plan_output_create(ctn_plan *p, uint32_t index, ctn_tensor **out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    const ValueInfo &v = p->output_info(index);
    *out = wrap(Tensor::empty(v.dtype, v.shape));
  });
}

CTN_API ctn_status ctn_plan_variable_read(ctn_plan *p, ctn_node var, ctn_tensor **out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    *out = wrap(p->read_variable(var));
  });
}

CTN_API ctn_status ctn_plan_variable_write(ctn_plan *p, ctn_node var, const ctn_tensor *value) {
  return wall([&] {
    NEED(p);
    NEED(value);
    p->write_variable(var, *value);
  });
}

}  // extern "C"
