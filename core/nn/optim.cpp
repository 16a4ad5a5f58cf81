// Optimizers over a model's parameters (SGD, Adam, AdamW as the update ops of ops.h plus
// ctn_assign), global-norm gradient clipping from graph ops, ctn_nn_minimize, and the host-side
// learning-rate schedules.
#include <chutney/ops.h>

#include "nn/model.h"

#include "util/wall.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace ctn;
using namespace ctn::nn;

namespace {

struct Param {
  std::string name;
  ctn_node node;
};

std::vector<Param> params(const ctn_model &m) {
  std::vector<Param> ps;
  for (const auto &v : m.vars)
    if (v.kind == CTN_VAR_PARAMETER) ps.push_back(Param{v.name, v.node});
  return ps;
}

ctn_node op(ctn_model &m, const char *name, std::initializer_list<ctn_node> in, const ctn_attrs &a, const std::string &who) {
  std::vector<ctn_node> v(in);
  ctn_node y;
  check(ctn_op(m.g, name, static_cast<uint32_t>(v.size()), v.data(), &a, &y), who + ": " + name);
  return y;
}

void assign(ctn_model &m, ctn_node var, ctn_node value, const std::string &who) {
  ctn_node unused;
  if (m.update_guard != CTN_NODE_NONE) value = op(m, CTN_OP_WHERE, {m.update_guard, value, var}, ctn_attrs{}, who);
  check(ctn_assign(m.g, var, value, &unused), who + ": ctn_assign");
}

std::vector<int64_t> var_shape(const ctn_model &m, const std::string &name) {
  return m.vars[m.by_name.at(name)].shape;
}

void begin_optimizer(ctn_model &m, const ctn_node *grads, const char *api) {
  if (!grads) fail(CTN_ERR_INVALID_ARGUMENT, "%s: grads is NULL", api);
  if (m.optimizer_built)
    fail(CTN_ERR_STATE, "%s: the model already has an optimizer (one per graph: each variable is assigned once per run)", api);
  if (params(m).empty()) fail(CTN_ERR_STATE, "%s: the model has no trainable parameters yet", api);
}

void sgd(ctn_model &m, const ctn_node *grads, double momentum, bool nesterov, double wd) {
  const char *api = "ctn_nn_sgd";
  begin_optimizer(m, grads, api);
  if (!(momentum >= 0) || !(wd >= 0))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: momentum and weight_decay must be >= 0 (got %g, %g)", api, momentum, wd);
  if (nesterov && momentum == 0) fail(CTN_ERR_INVALID_ARGUMENT, "%s: Nesterov needs momentum > 0", api);
  ctn_node lr = lr_node(m);
  auto ps = params(m);
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string who = std::string(api) + "(" + ps[i].name + ")";
    ctn_node w = ps[i].node, g = grads[i];
    ctn_attrs a{};
    a.f[0] = momentum;
    a.f[1] = wd;
    a.nf = 2;
    ctn_node v_new;
    if (momentum > 0) {
      ctn_node v = variable(m, ps[i].name + ".momentum", CTN_VAR_OPTIMIZER, var_shape(m, ps[i].name), CTN_INIT_ZEROS, 0, 0, 0);
      v_new = op(m, CTN_OP_SGD_VELOCITY, {v, g, w}, a, who);
      assign(m, v, v_new, who);
    } else if (wd > 0) {
      v_new = op(m, CTN_OP_SGD_VELOCITY, {g, g, w}, a, who);  // 0*g + (g + wd*w): no state needed
    } else {
      v_new = g;
    }
    a.i[0] = nesterov;
    a.ni = 1;
    assign(m, w, op(m, CTN_OP_SGD_APPLY, {w, v_new, g, lr}, a, who), who);
  }
  m.optimizer_built = true;
}

void adam(ctn_model &m, const ctn_node *grads, double b1, double b2, double eps, double wd, bool decoupled) {
  const char *api = decoupled ? "ctn_nn_adamw" : "ctn_nn_adam";
  begin_optimizer(m, grads, api);
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1) || !(eps >= 0) || !(wd >= 0))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: need betas in [0, 1), eps >= 0, weight_decay >= 0 (got %g, %g, %g, %g)", api, b1, b2,
         eps, wd);
  ctn_node lr = lr_node(m), step = step_node(m);
  ctn_node wd_node = wd > 0 && !decoupled ? scalar(m, wd) : CTN_NODE_NONE;
  auto ps = params(m);
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string who = std::string(api) + "(" + ps[i].name + ")";
    ctn_node w = ps[i].node, g = grads[i];
    if (wd_node != CTN_NODE_NONE) {  // L2 decay: into the gradient, so the moments see it
      ctn_node wdw;
      check(ctn_mul(m.g, w, wd_node, &wdw), who + ": ctn_mul");
      check(ctn_add(m.g, g, wdw, &g), who + ": ctn_add");
    }
    auto shape = var_shape(m, ps[i].name);
    ctn_node mv = variable(m, ps[i].name + ".adam_m", CTN_VAR_OPTIMIZER, shape, CTN_INIT_ZEROS, 0, 0, 0);
    ctn_node vv = variable(m, ps[i].name + ".adam_v", CTN_VAR_OPTIMIZER, shape, CTN_INIT_ZEROS, 0, 0, 0);
    ctn_attrs a1{}, a2{}, aa{};
    a1.f[0] = b1;
    a1.nf = 1;
    a2.f[0] = b2;
    a2.nf = 1;
    ctn_node m_new = op(m, CTN_OP_ADAM_MOMENT1, {mv, g}, a1, who);
    ctn_node v_new = op(m, CTN_OP_ADAM_MOMENT2, {vv, g}, a2, who);
    aa.f[0] = b1;
    aa.f[1] = b2;
    aa.f[2] = eps;
    aa.f[3] = wd;
    aa.nf = 4;
    aa.i[0] = decoupled;
    aa.ni = 1;
    ctn_node w_new = op(m, CTN_OP_ADAM_APPLY, {w, m_new, v_new, lr, step}, aa, who);
    assign(m, mv, m_new, who);
    assign(m, vv, v_new, who);
    assign(m, w, w_new, who);
  }
  m.optimizer_built = true;
}

// The global norm of `grads` as a 0-d node.
ctn_node global_norm(ctn_model &m, uint32_t n, const ctn_node *grads, const char *api) {
  ctn_node total = CTN_NODE_NONE;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_dtype dt = dtype_of(m, grads[i]);
    if (dt != m.dtype)
      fail(CTN_ERR_DTYPE, "%s: gradient %u is %s, the model is %s", api, i, ctn_dtype_name(dt), ctn_dtype_name(m.dtype));
    ctn_node sq, s;
    check(ctn_mul(m.g, grads[i], grads[i], &sq), std::string(api) + ": ctn_mul");
    check(ctn_sum(m.g, sq, 0, nullptr, 0, &s), std::string(api) + ": ctn_sum");
    if (total == CTN_NODE_NONE) total = s;
    else check(ctn_add(m.g, total, s, &total), std::string(api) + ": ctn_add");
  }
  ctn_node norm;
  check(ctn_sqrt(m.g, total, &norm), std::string(api) + ": ctn_sqrt");
  return norm;
}

void clip(ctn_model &m, uint32_t n, const ctn_node *grads, ctn_node norm, double max_norm, ctn_node *out, const char *api) {
  ctn_node denom, coef, scale;
  const std::string who = api;
  check(ctn_add(m.g, norm, scalar(m, 1e-6), &denom), who + ": ctn_add");
  check(ctn_div(m.g, scalar(m, max_norm), denom, &coef), who + ": ctn_div");
  ctn_node mins[2] = {coef, scalar(m, 1.0)};
  check(ctn_op(m.g, CTN_OP_MINIMUM, 2, mins, nullptr, &scale), who + ": minimum");
  for (uint32_t i = 0; i < n; ++i) check(ctn_mul(m.g, grads[i], scale, &out[i]), who + ": ctn_mul");
}

// Dynamic loss scaling (ctn_optimizer.loss_scale; PyTorch's GradScaler): the scale and the count
// of clean steps since it last changed live in two optimizer variables.
struct LossScaler {
  ctn_node scale = CTN_NODE_NONE, clean = CTN_NODE_NONE, ok = CTN_NODE_NONE;
};

// loss * scale, the value to differentiate.
ctn_node scale_loss(ctn_model &m, LossScaler &ls, ctn_node loss, double initial, const char *api) {
  ls.scale = variable(m, "loss_scale", CTN_VAR_OPTIMIZER, {}, kInitValue, 0, 0, initial);
  ls.clean = variable(m, "loss_scale.clean_steps", CTN_VAR_OPTIMIZER, {}, CTN_INIT_ZEROS, 0, 0, 0);
  ctn_node scaled;
  check(ctn_mul(m.g, loss, ls.scale, &scaled), std::string(api) + ": loss * loss_scale");
  return scaled;
}

// Divides the gradients by the scale and guards every update of the optimizer with "all of them
// finite": x * 0 is 0 for finite x and NaN for inf or NaN, so the sum of them all is 0 exactly
// when every gradient is finite.
void unscale(ctn_model &m, LossScaler &ls, std::vector<ctn_node> &grads, const char *api) {
  const std::string who = std::string(api) + " (loss scaling)";
  ctn_node zero = scalar(m, 0.0), total = CTN_NODE_NONE;
  for (ctn_node &g : grads) {
    check(ctn_div(m.g, g, ls.scale, &g), who + ": ctn_div");
    ctn_node z, s;
    check(ctn_mul(m.g, g, zero, &z), who + ": ctn_mul");
    check(ctn_sum(m.g, z, 0, nullptr, 0, &s), who + ": ctn_sum");
    if (total == CTN_NODE_NONE) total = s;
    else check(ctn_add(m.g, total, s, &total), who + ": ctn_add");
  }
  ls.ok = op(m, CTN_OP_EQ, {total, zero}, ctn_attrs{}, who);
  m.update_guard = ls.ok;
}

// After the updates: a skipped step halves the scale and restarts the count; `interval` clean
// steps in a row double it.
void update_scale(ctn_model &m, const LossScaler &ls, int64_t interval, const char *api) {
  const std::string who = std::string(api) + " (loss scaling)";
  m.update_guard = CTN_NODE_NONE;
  ctn_node one = scalar(m, 1.0), zero = scalar(m, 0.0), next, grown, halved, doubled, kept, scale, clean;
  check(ctn_add(m.g, ls.clean, one, &next), who + ": ctn_add");
  grown = op(m, CTN_OP_GE, {next, scalar(m, static_cast<double>(interval))}, ctn_attrs{}, who);
  check(ctn_mul(m.g, ls.scale, scalar(m, 0.5), &halved), who + ": ctn_mul");
  check(ctn_mul(m.g, ls.scale, scalar(m, 2.0), &doubled), who + ": ctn_mul");
  kept = op(m, CTN_OP_WHERE, {grown, doubled, ls.scale}, ctn_attrs{}, who);
  scale = op(m, CTN_OP_WHERE, {ls.ok, kept, halved}, ctn_attrs{}, who);
  clean = op(m, CTN_OP_WHERE, {ls.ok, op(m, CTN_OP_WHERE, {grown, zero, next}, ctn_attrs{}, who), zero}, ctn_attrs{}, who);
  assign(m, ls.scale, scale, who);
  assign(m, ls.clean, clean, who);
}

ctn_model &model(ctn_model *m, const char *api) {
  if (!m) fail(CTN_ERR_INVALID_ARGUMENT, "%s: the model is NULL", api);
  return *m;
}

}  // namespace

CTN_API ctn_status ctn_nn_sgd(ctn_model *m, const ctn_node *grads, double momentum, int32_t nesterov, double weight_decay) {
  return wall([&] { sgd(model(m, __func__), grads, momentum, nesterov != 0, weight_decay); });
}

CTN_API ctn_status ctn_nn_adam(ctn_model *m, const ctn_node *grads, double beta1, double beta2, double eps,
                               double weight_decay) {
  return wall([&] { adam(model(m, __func__), grads, beta1, beta2, eps, weight_decay, false); });
}

CTN_API ctn_status ctn_nn_adamw(ctn_model *m, const ctn_node *grads, double beta1, double beta2, double eps,
                                double weight_decay) {
  return wall([&] { adam(model(m, __func__), grads, beta1, beta2, eps, weight_decay, true); });
}

CTN_API ctn_status ctn_nn_clip_grad_norm(ctn_model *m, uint32_t n, const ctn_node *grads, double max_norm,
                                         ctn_node *out_clipped, ctn_node *out_norm) {
  return wall([&] {
    const char *api = "ctn_nn_clip_grad_norm";
    ctn_model &md = model(m, api);
    if (n == 0 || !grads || !out_clipped) fail(CTN_ERR_INVALID_ARGUMENT, "%s: need n >= 1 gradients and out_clipped", api);
    if (!(max_norm > 0) || std::isinf(max_norm)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: max_norm must be > 0, got %g", api, max_norm);
    ctn_node norm = global_norm(md, n, grads, api);
    std::vector<ctn_node> clipped(n);
    clip(md, n, grads, norm, max_norm, clipped.data(), api);
    std::copy(clipped.begin(), clipped.end(), out_clipped);
    if (out_norm) *out_norm = norm;
  });
}

CTN_API ctn_status ctn_nn_minimize(ctn_model *m, ctn_node loss, const ctn_optimizer *opt, ctn_node *out_grad_norm) {
  return wall([&] {
    const char *api = "ctn_nn_minimize";
    ctn_model &md = model(m, api);
    if (!opt) fail(CTN_ERR_INVALID_ARGUMENT, "%s: opt is NULL", api);
    if (opt->struct_size < offsetof(ctn_optimizer, momentum))
      fail(CTN_ERR_INVALID_ARGUMENT, "%s: opt->struct_size %u is too small (set it to sizeof(ctn_optimizer))", api, opt->struct_size);
    ctn_optimizer o{};  // fields the caller's (older) struct lacks stay zero: their defaults
    std::memcpy(&o, opt, std::min<size_t>(opt->struct_size, sizeof o));
    if (o.lr == 0) o.lr = 0.01;
    if (!(o.lr > 0) || std::isinf(o.lr)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: lr must be > 0, got %g", api, o.lr);
    if (o.kind < CTN_OPTIM_SGD || o.kind > CTN_OPTIM_ADAMW) fail(CTN_ERR_INVALID_ARGUMENT, "%s: unknown optimizer kind %d", api, o.kind);
    if (!(o.clip_norm >= 0)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: clip_norm must be >= 0, got %g", api, o.clip_norm);
    auto ps = params(md);
    if (ps.empty()) fail(CTN_ERR_STATE, "%s: the model has no trainable parameters", api);
    if (md.optimizer_built) fail(CTN_ERR_STATE, "%s: the model already has an optimizer", api);
    if (!(o.loss_scale >= 0) || std::isinf(o.loss_scale) || o.loss_scale_interval < 0 || o.loss_scale_interval > (1 << 24))
      fail(CTN_ERR_INVALID_ARGUMENT, "%s: loss_scale must be finite and >= 0, loss_scale_interval in [0, 2^24] (got %g, %lld)",
           api, o.loss_scale, static_cast<long long>(o.loss_scale_interval));
    md.update_guard = CTN_NODE_NONE;  // a failed earlier call may have left it
    LossScaler ls;
    const ctn_node target = o.loss_scale > 0 ? scale_loss(md, ls, loss, o.loss_scale, api) : loss;
    std::vector<ctn_node> wrt, grads(ps.size());
    for (const auto &p : ps) wrt.push_back(p.node);
    check(ctn_grad(md.g, target, static_cast<uint32_t>(wrt.size()), wrt.data(), grads.data()), std::string(api) + ": ctn_grad");
    if (o.loss_scale > 0) unscale(md, ls, grads, api);
    const uint32_t n = static_cast<uint32_t>(grads.size());
    ctn_node norm = CTN_NODE_NONE;
    if (o.clip_norm > 0 || out_grad_norm) norm = global_norm(md, n, grads.data(), api);
    if (o.clip_norm > 0) clip(md, n, grads.data(), norm, o.clip_norm, grads.data(), api);
    double b1 = o.beta1 == 0 ? 0.9 : o.beta1, b2 = o.beta2 == 0 ? 0.999 : o.beta2, eps = o.eps == 0 ? 1e-8 : o.eps;
    switch (o.kind) {
      case CTN_OPTIM_SGD: sgd(md, grads.data(), o.momentum, o.nesterov != 0, o.weight_decay); break;
      case CTN_OPTIM_ADAM: adam(md, grads.data(), b1, b2, eps, o.weight_decay, false); break;
      default: adam(md, grads.data(), b1, b2, eps, o.weight_decay, true); break;
    }
    if (o.loss_scale > 0) update_scale(md, ls, o.loss_scale_interval ? o.loss_scale_interval : 2000, api);
    md.lr_now = o.lr;
    if (out_grad_norm) *out_grad_norm = norm;
  });
}

CTN_API ctn_status ctn_nn_lr_at(const ctn_lr_schedule *s, int64_t step, double *out_lr) {
  return wall([&] {
    const char *api = "ctn_nn_lr_at";
    if (!s || !out_lr) fail(CTN_ERR_INVALID_ARGUMENT, "%s: s or out_lr is NULL", api);
    if (step < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: step counts updates from 1, got %lld", api, static_cast<long long>(step));
    if (!(s->base_lr > 0) || std::isinf(s->base_lr)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: base_lr must be > 0, got %g", api, s->base_lr);
    if (s->warmup_steps < 0) fail(CTN_ERR_INVALID_ARGUMENT, "%s: warmup_steps must be >= 0", api);
    const int64_t W = s->warmup_steps;
    if (step <= W) {
      *out_lr = s->base_lr * static_cast<double>(step) / static_cast<double>(W);
      return;
    }
    const double e = static_cast<double>(step - W - 1);
    switch (s->kind) {
      case CTN_LR_CONSTANT: *out_lr = s->base_lr; return;
      case CTN_LR_STEP:
        if (s->step_size < 1 || !(s->gamma >= 0))
          fail(CTN_ERR_INVALID_ARGUMENT, "%s: a step schedule needs step_size >= 1 and gamma >= 0", api);
        *out_lr = s->base_lr * std::pow(s->gamma, std::floor(e / static_cast<double>(s->step_size)));
        return;
      case CTN_LR_COSINE:
      case CTN_LR_LINEAR: {
        if (s->total_steps <= W)
          fail(CTN_ERR_INVALID_ARGUMENT, "%s: total_steps (%lld) must exceed warmup_steps (%lld)", api,
               static_cast<long long>(s->total_steps), static_cast<long long>(W));
        if (!(s->min_lr >= 0)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: min_lr must be >= 0", api);
        const double T = static_cast<double>(s->total_steps - W), t = std::min(e, T);
        if (s->kind == CTN_LR_COSINE)
          *out_lr = s->min_lr + (s->base_lr - s->min_lr) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * t / T));
        else
          *out_lr = s->base_lr + (s->min_lr - s->base_lr) * t / T;
        return;
      }
      default: fail(CTN_ERR_INVALID_ARGUMENT, "%s: unknown schedule kind %d", api, s->kind);
    }
  });
}
