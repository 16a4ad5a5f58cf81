// Optimizer step kernels (sgd_velocity, sgd_apply, adam_moment1/2, adam_apply): one pass over
// the parameter's elements. The output may alias input 0 (the old w, m or v): every loop reads
// element i of each input before writing element i of the output, so that is safe.
#include <cmath>

#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

enum class Opt { kSgdVelocity, kSgdApply, kMoment1, kMoment2, kAdamApply };

struct OptState : KernelBase {
  Opt kind = Opt::kSgdVelocity;
  int64_t n = 0;
  double f[4] = {};
  bool flag = false;  // nesterov / decoupled
};

// Per-call constants (lr and step are run-time inputs) in the element type.
template <class T>
struct OptCall {
  const OptState *st;
  T *out;
  const T *a, *b, *c;
  T lr, k0, k1, k2, k3, k4;

  void range(int64_t i0, int64_t i1) const {
    T *o = out;
    switch (st->kind) {
      case Opt::kSgdVelocity: {  // v' = mu*v + (g + wd*w)
        const T mu = k0, wd = k1;
        for (int64_t i = i0; i < i1; ++i) o[i] = mu * a[i] + (b[i] + wd * c[i]);
        break;
      }
      case Opt::kSgdApply: {  // (w, v', g): w - lr * (nesterov ? (g + wd*w) + mu*v' : v')
        const T mu = k0, wd = k1;
        if (st->flag) {
          for (int64_t i = i0; i < i1; ++i) {
            T w = a[i];
            o[i] = w - lr * ((c[i] + wd * w) + mu * b[i]);
          }
        } else {
          for (int64_t i = i0; i < i1; ++i) o[i] = a[i] - lr * b[i];
        }
        break;
      }
      case Opt::kMoment1: {  // beta*m + (1-beta)*g
        const T beta = k0, one_minus = k1;
        for (int64_t i = i0; i < i1; ++i) o[i] = beta * a[i] + one_minus * b[i];
        break;
      }
      case Opt::kMoment2: {  // beta*v + (1-beta)*g*g
        const T beta = k0, one_minus = k1;
        for (int64_t i = i0; i < i1; ++i) o[i] = beta * a[i] + one_minus * (b[i] * b[i]);
        break;
      }
      case Opt::kAdamApply: {
        // mhat / (sqrt(vhat) + eps) = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps)
        const T inv_bc1 = k0, inv_sqrt_bc2 = k1, eps = k2, wd = k3;
        if (st->flag) {
          for (int64_t i = i0; i < i1; ++i) {
            T w = a[i];
            T upd = (b[i] * inv_bc1) / (std::sqrt(c[i]) * inv_sqrt_bc2 + eps);
            o[i] = w - lr * (upd + wd * w);
          }
        } else {
          for (int64_t i = i0; i < i1; ++i)
            o[i] = a[i] - lr * ((b[i] * inv_bc1) / (std::sqrt(c[i]) * inv_sqrt_bc2 + eps));
        }
        break;
      }
    }
  }
  static void part(void *ctx, int64_t i0, int64_t i1, int) {
    static_cast<const OptCall *>(ctx)->range(i0, i1);
  }
};

template <class T>
ctn_status opt_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const OptState *>(state);
  OptCall<T> call{};
  call.st = st;
  call.out = desc_ptr<T>(args->outputs[0]);
  call.a = desc_ptr<const T>(args->inputs[0]);
  call.b = desc_ptr<const T>(args->inputs[1]);
  call.c = args->n_inputs > 2 ? desc_ptr<const T>(args->inputs[2]) : nullptr;
  switch (st->kind) {
    case Opt::kSgdVelocity:
      call.k0 = T(st->f[0]);
      call.k1 = T(st->f[1]);
      break;
    case Opt::kSgdApply:
      call.lr = *desc_ptr<const T>(args->inputs[3]);
      call.k0 = T(st->f[0]);
      call.k1 = T(st->f[1]);
      break;
    case Opt::kMoment1:
    case Opt::kMoment2:
      call.k0 = T(st->f[0]);
      call.k1 = T(1.0 - st->f[0]);
      break;
    case Opt::kAdamApply: {
      call.lr = *desc_ptr<const T>(args->inputs[3]);
      int64_t step = *desc_ptr<const int64_t>(args->inputs[4]);
      if (step < 1)
        return st->host->set_error(CTN_ERR_INVALID_ARGUMENT,
                                   "cpu adam_apply: step must be >= 1 (the first update is step 1), got %lld",
                                   static_cast<long long>(step));
      // Bias corrections in double: beta^step underflows gracefully to 0 for large steps.
      double s = static_cast<double>(step);
      double bc1 = 1.0 - std::pow(st->f[0], s), bc2 = 1.0 - std::pow(st->f[1], s);
      call.k0 = T(1.0 / bc1);
      call.k1 = T(1.0 / std::sqrt(bc2));
      call.k2 = T(st->f[2]);
      call.k3 = T(st->f[3]);
      break;
    }
  }
  if (st->n < kParallelThreshold || st->be->pool->size() == 1) {
    call.range(0, st->n);
  } else {
    st->be->pool->parallel_for(st->n, kParallelThreshold / 2, OptCall<T>::part, &call);
  }
  return CTN_OK;
}

struct OptEntry {
  const char *name;
  Opt kind;
  uint32_t n_inputs;
  uint32_t n_elementwise;  // leading inputs with the output's shape
};

const OptEntry kEntries[] = {
    {CTN_OP_SGD_VELOCITY, Opt::kSgdVelocity, 3, 3}, {CTN_OP_SGD_APPLY, Opt::kSgdApply, 4, 3},
    {CTN_OP_ADAM_MOMENT1, Opt::kMoment1, 2, 2},     {CTN_OP_ADAM_MOMENT2, Opt::kMoment2, 2, 2},
    {CTN_OP_ADAM_APPLY, Opt::kAdamApply, 5, 3},
};

}  // namespace

ctn_status make_optim_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                             bool *handled) {
  const OptEntry *e = find_entry(kEntries, sig->op);
  if (!e) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &o = *sig->output;
  if (ctn_status s = need_float(host, "cpu", sig->op, o.dtype); s) return s;
  auto st = new_state<OptState>(be);
  st->kind = e->kind;
  st->n = desc_numel(o);
  for (int k = 0; k < 4; ++k) st->f[k] = sig->attrs->f[k];
  st->flag = sig->attrs->i[0] != 0;
  ctn_kernel_fn fn = o.dtype == CTN_F32 ? opt_kernel<float> : opt_kernel<double>;
  kernel_set(out, fn, st.release(), CTN_KERNEL_INPLACE_OK);
  return CTN_OK;
}

}  // namespace ctn_cpu
