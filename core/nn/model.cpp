// ctn_model: variables (named, kinded, deterministic initialisation), layer naming, the step/lr
// feeds, and copying state between plans.
#include "nn/model.h"

#include "graph/graph.h"
#include "tensor/shape.h"
#include "util/wall.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

using namespace ctn;

namespace ctn::nn {

void check(ctn_status s, const std::string &what) {
  if (s == CTN_OK) return;
  std::string msg = ctn_last_error();
  // ctn_last_error() starts with the status name; the wall adds it back once.
  std::string prefix = std::string(ctn_status_name(s)) + ": ";
  if (msg.compare(0, prefix.size(), prefix) == 0) msg.erase(0, prefix.size());
  throw Error(s, what + ": " + msg);
}

uint64_t hash_name(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string layer_name(ctn_model &m, const char *kind) {
  if (!m.next_name.empty()) {
    std::string n;
    n.swap(m.next_name);
    return n;
  }
  return kind + std::to_string(++m.counters[kind]);
}

std::vector<int64_t> shape_of(ctn_model &m, ctn_node x) {
  uint32_t nd = 0;
  int64_t s[CTN_MAX_DIMS] = {};
  check(ctn_node_info(m.g, x, nullptr, &nd, s), "ctn_node_info");
  return std::vector<int64_t>(s, s + nd);
}

ctn_dtype dtype_of(ctn_model &m, ctn_node x) {
  ctn_dtype dt = CTN_F32;
  check(ctn_node_info(m.g, x, &dt, nullptr, nullptr), "ctn_node_info");
  return dt;
}

void need_model_dtype(ctn_model &m, ctn_node x, const std::string &who) {
  ctn_dtype dt = dtype_of(m, x);
  if (dt != m.dtype)
    fail(CTN_ERR_DTYPE, "%s: the input is %s but the model's parameters are %s", who.c_str(), ctn_dtype_name(dt),
         ctn_dtype_name(m.dtype));
}

std::string shape_text(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

namespace {

struct TensorHolder {
  ctn_tensor *t = nullptr;
  ~TensorHolder() { ctn_tensor_release(t); }
};

struct SplitMix {
  uint64_t state;
  uint64_t next() { return mix(state++ * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

const char *init_name(ctn_init k) {
  switch (k) {
    case CTN_INIT_ZEROS: return "zeros";
    case CTN_INIT_ONES: return "ones";
    case CTN_INIT_KAIMING_UNIFORM: return "kaiming_uniform";
    case CTN_INIT_KAIMING_NORMAL: return "kaiming_normal";
    case CTN_INIT_XAVIER_UNIFORM: return "xavier_uniform";
    case CTN_INIT_XAVIER_NORMAL: return "xavier_normal";
    case CTN_INIT_UNIFORM: return "uniform";
    case CTN_INIT_NORMAL: return "normal";
  }
  return nullptr;
}

// Values in double; the caller converts to the tensor's dtype.
void init_values(std::vector<double> &v, ctn_init kind, int64_t fan_in, int64_t fan_out, double gain, uint64_t seed) {
  if (!init_name(kind)) fail(CTN_ERR_INVALID_ARGUMENT, "unknown initialiser %d", static_cast<int>(kind));
  if (!(gain >= 0) || std::isinf(gain)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: gain must be >= 0, got %g", init_name(kind), gain);
  bool uses_in = kind >= CTN_INIT_KAIMING_UNIFORM && kind <= CTN_INIT_XAVIER_NORMAL;
  bool uses_out = kind == CTN_INIT_XAVIER_UNIFORM || kind == CTN_INIT_XAVIER_NORMAL;
  if ((uses_in && fan_in < 1) || (uses_out && fan_out < 1))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: fan_in and fan_out must be >= 1 (got %lld, %lld)", init_name(kind),
         static_cast<long long>(fan_in), static_cast<long long>(fan_out));
  bool kaiming = kind == CTN_INIT_KAIMING_UNIFORM || kind == CTN_INIT_KAIMING_NORMAL;
  if (gain == 0) gain = kaiming ? std::sqrt(2.0) : 1.0;
  double fi = static_cast<double>(fan_in), fo = static_cast<double>(fan_out);
  bool normal = false;
  double scale = 0;
  switch (kind) {
    case CTN_INIT_ZEROS: std::fill(v.begin(), v.end(), 0.0); return;
    case CTN_INIT_ONES: std::fill(v.begin(), v.end(), 1.0); return;
    case CTN_INIT_KAIMING_UNIFORM: scale = gain * std::sqrt(3.0 / fi); break;
    case CTN_INIT_KAIMING_NORMAL: scale = gain / std::sqrt(fi); normal = true; break;
    case CTN_INIT_XAVIER_UNIFORM: scale = gain * std::sqrt(6.0 / (fi + fo)); break;
    case CTN_INIT_XAVIER_NORMAL: scale = gain * std::sqrt(2.0 / (fi + fo)); normal = true; break;
    case CTN_INIT_UNIFORM: scale = gain; break;
    case CTN_INIT_NORMAL: scale = gain; normal = true; break;
  }
  SplitMix rng{seed};
  if (!normal) {
    for (double &x : v) x = (2.0 * rng.uniform() - 1.0) * scale;
    return;
  }
  // Box-Muller, both outputs used.
  for (size_t i = 0; i < v.size(); i += 2) {
    double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
    double r = std::sqrt(-2.0 * std::log(u1)), t = 6.283185307179586477 * u2;
    v[i] = r * std::cos(t) * scale;
    if (i + 1 < v.size()) v[i + 1] = r * std::sin(t) * scale;
  }
}

void fill_tensor(ctn_tensor *t, ctn_init kind, int64_t fan_in, int64_t fan_out, double gain, uint64_t seed) {
  ctn_dtype dt;
  int64_t n = 0;
  check(ctn_tensor_dtype(t, &dt), "ctn_tensor_dtype");
  if (dt != CTN_F32 && dt != CTN_F64) fail(CTN_ERR_DTYPE, "the tensor must be f32 or f64, got %s", ctn_dtype_name(dt));
  check(ctn_tensor_numel(t, &n), "ctn_tensor_numel");
  void *data = nullptr;
  check(ctn_tensor_data(t, &data), "ctn_tensor_data");
  std::vector<double> v(static_cast<size_t>(n));
  init_values(v, kind, fan_in, fan_out, gain, seed);
  if (dt == CTN_F64) {
    std::memcpy(data, v.data(), v.size() * sizeof(double));
  } else {
    float *f = static_cast<float *>(data);
    for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
  }
}

// Every element = v (kInitValue): the model's dtype is f32 or f64.
void fill_value(ctn_tensor *t, ctn_dtype dt, double v) {
  int64_t n = 0;
  void *data = nullptr;
  check(ctn_tensor_numel(t, &n), "ctn_tensor_numel");
  check(ctn_tensor_data(t, &data), "ctn_tensor_data");
  for (int64_t i = 0; i < n; ++i) {
    if (dt == CTN_F64) static_cast<double *>(data)[i] = v;
    else static_cast<float *>(data)[i] = static_cast<float>(v);
  }
}

ctn_model::Var *find(ctn_model &m, const std::string &name) {
  auto it = m.by_name.find(name);
  return it == m.by_name.end() ? nullptr : &m.vars[it->second];
}

}  // namespace

ctn_node variable(ctn_model &m, const std::string &name, uint32_t kind, const std::vector<int64_t> &shape,
                  ctn_init init, int64_t fan_in, int64_t fan_out, double gain) {
  if (name.empty()) fail(CTN_ERR_INVALID_ARGUMENT, "a variable name is empty");
  if (kind != CTN_VAR_PARAMETER && kind != CTN_VAR_BUFFER && kind != CTN_VAR_OPTIMIZER)
    fail(CTN_ERR_INVALID_ARGUMENT, "variable \"%s\": kind %u is not one CTN_VAR_* value", name.c_str(), kind);
  if (ctn_model::Var *v = find(m, name)) {
    if (v->shape != shape)
      fail(CTN_ERR_SHAPE, "variable \"%s\" exists with shape %s; asked for %s", name.c_str(), shape_text(v->shape).c_str(),
           shape_text(shape).c_str());
    if (v->kind != kind) fail(CTN_ERR_INVALID_ARGUMENT, "variable \"%s\" exists with another kind", name.c_str());
    return v->node;
  }
  TensorHolder t;
  check(ctn_tensor_create(m.dtype, static_cast<uint32_t>(shape.size()), shape.data(), nullptr, &t.t),
        "variable \"" + name + "\"");
  if (init == kInitValue) {
    fill_value(t.t, m.dtype, gain);
  } else {
    fill_tensor(t.t, init, fan_in, fan_out, gain, mix(m.seed ^ hash_name(name)));
  }
  ctn_node node;
  check(ctn_variable(m.g, name.c_str(), t.t, &node), "variable \"" + name + "\"");
  m.by_name[name] = m.vars.size();
  m.vars.push_back(ctn_model::Var{name, node, kind, shape});
  return node;
}

ctn_node step_node(ctn_model &m) {
  if (m.step == CTN_NODE_NONE) check(ctn_input(m.g, "step", CTN_I64, 0, nullptr, &m.step), "the step input");
  return m.step;
}

ctn_node lr_node(ctn_model &m) {
  if (m.lr == CTN_NODE_NONE) check(ctn_input(m.g, "lr", m.dtype, 0, nullptr, &m.lr), "the lr input");
  return m.lr;
}

ctn_node scalar(ctn_model &m, double v) {
  ctn_node n;
  check(ctn_scalar(m.g, m.dtype, v, &n), "ctn_scalar");
  return n;
}

}  // namespace ctn::nn

using namespace ctn::nn;

namespace {
ctn_model *need_model(ctn_model *m, const char *fn) {
  if (!m) fail(CTN_ERR_INVALID_ARGUMENT, "%s: the model is NULL", fn);
  return m;
}
}  // namespace

CTN_API ctn_status ctn_model_create(ctn_graph *g, ctn_dtype dtype, uint64_t seed, ctn_model **out) {
  return wall([&] {
    if (!g || !out) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_create: g or out is NULL");
    int32_t dt;  // read as an integer: an out-of-range value must not be loaded as the enum
    std::memcpy(&dt, &dtype, sizeof dt);
    if (dt != CTN_F32 && dt != CTN_F64)
      fail(CTN_ERR_DTYPE, "ctn_model_create: parameters must be f32 or f64, got dtype %d", dt);
    auto m = std::make_unique<ctn_model>();
    m->g = g;
    m->dtype = dtype;
    m->seed = seed;
    *out = m.release();
  });
}

CTN_API void ctn_model_release(ctn_model *m) {
  if (!m) return;
  ctn_tensor_release(m->step_value);
  ctn_tensor_release(m->lr_value);
  delete m;
}

CTN_API ctn_status ctn_model_graph(const ctn_model *m, ctn_graph **out) {
  return wall([&] {
    if (!m || !out) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_graph: m or out is NULL");
    *out = m->g;
  });
}

CTN_API ctn_status ctn_model_set_training(ctn_model *m, int32_t training) {
  return wall([&] { need_model(m, __func__)->training = training != 0; });
}

CTN_API ctn_status ctn_model_name_next(ctn_model *m, const char *name) {
  return wall([&] {
    need_model(m, __func__);
    if (!name || !*name) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_name_next: the name is NULL or empty");
    m->next_name = name;
  });
}

CTN_API ctn_status ctn_model_reset_names(ctn_model *m) {
  return wall([&] {
    need_model(m, __func__)->counters.clear();
    m->next_name.clear();
  });
}

CTN_API ctn_status ctn_nn_init_fill(ctn_tensor *t, ctn_init kind, int64_t fan_in, int64_t fan_out, double gain,
                                    uint64_t seed) {
  return wall([&] {
    if (!t) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_nn_init_fill: t is NULL");
    try {
      fill_tensor(t, kind, fan_in, fan_out, gain, seed);
    } catch (const Error &e) {
      throw Error(e.code(), std::string("ctn_nn_init_fill: ") + e.message());
    }
  });
}

CTN_API ctn_status ctn_model_set_init(ctn_model *m, ctn_init weight_init, double gain) {
  return wall([&] {
    need_model(m, __func__);
    if (weight_init < CTN_INIT_ZEROS || weight_init > CTN_INIT_NORMAL)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_set_init: unknown initialiser %d", static_cast<int>(weight_init));
    if (!(gain >= 0)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_set_init: gain must be >= 0, got %g", gain);
    m->weight_init = weight_init;
    m->weight_gain = gain;
  });
}

CTN_API ctn_status ctn_model_variable(ctn_model *m, const char *name, uint32_t kind, uint32_t ndim,
                                      const int64_t *shape, ctn_init init, int64_t fan_in, int64_t fan_out,
                                      double gain, ctn_node *out) {
  return wall([&] {
    need_model(m, __func__);
    if (!name || !out || (ndim && !shape) || ndim > CTN_MAX_DIMS)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_variable: NULL name/out/shape or ndim > %d", CTN_MAX_DIMS);
    if (init == kInitValue) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_variable: unknown initialiser %d", static_cast<int>(init));
    try {
      *out = variable(*m, name, kind, std::vector<int64_t>(shape, shape + ndim), init, fan_in, fan_out, gain);
    } catch (const Error &e) {
      throw Error(e.code(), std::string("ctn_model_variable: ") + e.message());
    }
  });
}

CTN_API ctn_status ctn_model_adopt_variable(ctn_model *m, ctn_node var, uint32_t kind, const char *name) {
  return wall([&] {
    need_model(m, __func__);
    const Graph &g = *m->g;
    if (var >= g.size() || g.node(var).kind != NodeKind::Variable)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_adopt_variable: node %u is not a variable of the model's graph", var);
    const Node &n = g.node(var);
    const std::string nm = name ? name : n.name;
    if (nm.empty()) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_adopt_variable: the name is empty");
    if (kind != CTN_VAR_PARAMETER && kind != CTN_VAR_BUFFER && kind != CTN_VAR_OPTIMIZER)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_adopt_variable: kind %u is not one CTN_VAR_* value", kind);
    if (n.info.dtype != m->dtype)
      fail(CTN_ERR_DTYPE, "ctn_model_adopt_variable: variable \"%s\" is %s, the model's dtype is %s", nm.c_str(),
           dtype_name(n.info.dtype), dtype_name(m->dtype));
    for (const ctn_model::Var &v : m->vars)
      if (v.node == var && v.name != nm)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_adopt_variable: node %u is the model's variable \"%s\" already", var,
             v.name.c_str());
    if (const ctn_model::Var *v = find(*m, nm)) {
      if (v->node == var && v->kind == kind) return;
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_adopt_variable: the model has a variable \"%s\" already (node %u)",
           nm.c_str(), v->node);
    }
    m->by_name[nm] = m->vars.size();
    m->vars.push_back(ctn_model::Var{nm, var, kind, std::vector<int64_t>(n.info.shape.d, n.info.shape.d + n.info.shape.ndim)});
  });
}

CTN_API ctn_status ctn_model_variables(ctn_model *m, uint32_t kinds, uint32_t *out_count,
                                       const char *const **out_names, const ctn_node **out_nodes) {
  return wall([&] {
    need_model(m, __func__);
    if (!out_count) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_variables: out_count is NULL");
    m->list_names.clear();
    m->list_nodes.clear();
    for (const auto &v : m->vars)
      if (v.kind & kinds) {
        m->list_names.push_back(v.name.c_str());
        m->list_nodes.push_back(v.node);
      }
    *out_count = static_cast<uint32_t>(m->list_nodes.size());
    if (out_names) *out_names = m->list_names.data();
    if (out_nodes) *out_nodes = m->list_nodes.data();
  });
}

CTN_API ctn_status ctn_model_copy_state(const ctn_model *src_model, ctn_plan *src, const ctn_model *dst_model,
                                        ctn_plan *dst, uint32_t *out_copied) {
  return wall([&] {
    if (!src_model || !src || !dst_model || !dst)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_copy_state: a model or plan is NULL");
    uint32_t copied = 0;
    for (const auto &v : src_model->vars) {
      auto it = dst_model->by_name.find(v.name);
      if (it == dst_model->by_name.end()) continue;
      const auto &dv = dst_model->vars[it->second];
      if (dv.shape != v.shape)
        fail(CTN_ERR_SHAPE, "ctn_model_copy_state: \"%s\" is %s in the source and %s in the destination", v.name.c_str(),
             shape_text(v.shape).c_str(), shape_text(dv.shape).c_str());
      TensorHolder t;
      check(ctn_plan_variable_read(src, v.node, &t.t), "ctn_model_copy_state: reading \"" + v.name + "\"");
      check(ctn_plan_variable_write(dst, dv.node, t.t), "ctn_model_copy_state: writing \"" + v.name + "\"");
      ++copied;
    }
    if (out_copied) *out_copied = copied;
  });
}

CTN_API ctn_status ctn_model_step(ctn_model *m, ctn_node *out) {
  return wall([&] {
    need_model(m, __func__);
    if (!out) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_step: out is NULL");
    *out = step_node(*m);
  });
}

CTN_API ctn_status ctn_model_lr(ctn_model *m, ctn_node *out) {
  return wall([&] {
    need_model(m, __func__);
    if (!out) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_lr: out is NULL");
    *out = lr_node(*m);
  });
}

CTN_API ctn_status ctn_model_set_step(ctn_model *m, int64_t step) {
  return wall([&] {
    need_model(m, __func__);
    if (step < 1) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_set_step: step counts updates from 1, got %lld", static_cast<long long>(step));
    m->step_now = step;
  });
}

CTN_API ctn_status ctn_model_set_lr(ctn_model *m, double lr) {
  return wall([&] {
    need_model(m, __func__);
    if (!(lr >= 0) || std::isinf(lr)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_set_lr: lr must be finite and >= 0, got %g", lr);
    m->lr_now = lr;
  });
}

CTN_API ctn_status ctn_model_run_with_options(ctn_model *m, ctn_plan *p, const ctn_run_options *options, uint32_t n_feeds,
                                              const ctn_node *feed_nodes, const ctn_tensor *const *feed_values,
                                              uint32_t n_outputs, ctn_tensor *const *outputs) {
  return wall([&] {
    need_model(m, __func__);
    if (!p) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_run: the plan is NULL");
    if (n_feeds && (!feed_nodes || !feed_values)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_model_run: feed arrays are NULL");
    // Small vectors per run: the feeds of one training step, not a per-element cost.
    std::vector<ctn_node> nodes(feed_nodes, feed_nodes + n_feeds);
    std::vector<const ctn_tensor *> values(feed_values, feed_values + n_feeds);
    if (m->step != CTN_NODE_NONE) {
      if (!m->step_value) check(ctn_tensor_create(CTN_I64, 0, nullptr, nullptr, &m->step_value), "ctn_model_run");
      check(ctn_tensor_write(m->step_value, &m->step_now, sizeof m->step_now), "ctn_model_run");
      nodes.push_back(m->step);
      values.push_back(m->step_value);
    }
    if (m->lr != CTN_NODE_NONE) {
      if (!m->lr_value) check(ctn_tensor_create(m->dtype, 0, nullptr, nullptr, &m->lr_value), "ctn_model_run");
      if (m->dtype == CTN_F64) {
        check(ctn_tensor_write(m->lr_value, &m->lr_now, sizeof m->lr_now), "ctn_model_run");
      } else {
        float f = static_cast<float>(m->lr_now);
        check(ctn_tensor_write(m->lr_value, &f, sizeof f), "ctn_model_run");
      }
      nodes.push_back(m->lr);
      values.push_back(m->lr_value);
    }
    ctn_status s = ctn_plan_run_with_options(p, options, static_cast<uint32_t>(nodes.size()), nodes.data(), values.data(),
                                             n_outputs, outputs);
    if (s != CTN_OK) check(s, "ctn_model_run");
  });
}

CTN_API ctn_status ctn_model_run(ctn_model *m, ctn_plan *p, uint32_t n_feeds, const ctn_node *feed_nodes,
                                 const ctn_tensor *const *feed_values, uint32_t n_outputs, ctn_tensor *const *outputs) {
  return ctn_model_run_with_options(m, p, nullptr, n_feeds, feed_nodes, feed_values, n_outputs, outputs);
}
