// dropout (counter-based mask, see ops.h), embedding and embedding_grad.
#include <cmath>

#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

// ---- dropout ------------------------------------------------------------------------------------

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct DropoutState : KernelBase {
  uint64_t seed = 0;
  uint32_t threshold = 0;  // floor(p * 2^24): element k is kept iff its 24-bit draw >= threshold
  double scale = 1;
  int64_t numel = 0;
};

template <class T>
struct DropoutCall {
  const DropoutState *st;
  const T *x;
  T *y;
  uint64_t key;
  void range(int64_t a, int64_t b) const {
    const T scale = static_cast<T>(st->scale);
    const uint32_t thr = st->threshold;
    for (int64_t k = a; k < b; ++k) {
      const uint32_t u = static_cast<uint32_t>(mix64(key + (static_cast<uint64_t>(k) + 1) * kGolden) >> 40);
      y[k] = u >= thr ? x[k] * scale : T(0);
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) { static_cast<const DropoutCall *>(ctx)->range(a, b); }
};

template <class T>
ctn_status dropout_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const DropoutState *>(state);
  const uint64_t step = static_cast<uint64_t>(*desc_ptr<const int64_t>(args->inputs[1]));
  DropoutCall<T> call{st, desc_ptr<const T>(args->inputs[0]), desc_ptr<T>(args->outputs[0]),
                      mix64(st->seed + mix64(step + kGolden))};
  if (st->numel >= kParallelThreshold / 4 && st->be->pool->size() > 1)
    st->be->pool->parallel_for(st->numel, 4096, DropoutCall<T>::part, &call);
  else
    call.range(0, st->numel);
  return CTN_OK;
}

ctn_status make_dropout(Backend *be, const ctn_op_signature *sig, ctn_kernel *out) {
  const ctn_tensor_desc &x = sig->inputs[0];
  const double p = sig->attrs->f[0];
  auto st = new_state<DropoutState>(be);
  st->seed = static_cast<uint64_t>(sig->attrs->i[0]);
  st->threshold = static_cast<uint32_t>(std::floor(p * 16777216.0));
  st->scale = 1.0 / (1.0 - p);
  st->numel = desc_numel(x);
  kernel_set(out, x.dtype == CTN_F32 ? dropout_kernel<float> : dropout_kernel<double>, st.release());
  return CTN_OK;
}

// ---- embedding -----------------------------------------------------------------------------------

struct EmbState : KernelBase {
  bool grad = false;
  int64_t v = 0, d = 0, n_ids = 0;
  int32_t id_dtype = CTN_I64;
};

inline int64_t id_at(const void *ids, int32_t dt, int64_t i) {
  return dt == CTN_I32 ? static_cast<const int32_t *>(ids)[i] : static_cast<const int64_t *>(ids)[i];
}

template <class T>
struct EmbCall {
  const EmbState *st;
  const void *ids;
  const T *src;  // forward: table; grad: dy
  T *dst;
  void gather(int64_t a, int64_t b) const {
    for (int64_t i = a; i < b; ++i) {
      const T *row = src + id_at(ids, st->id_dtype, i) * st->d;
      std::memcpy(dst + i * st->d, row, static_cast<size_t>(st->d) * sizeof(T));
    }
  }
  // Columns [a, b) of every id's row: threads never add into the same element.
  void scatter(int64_t a, int64_t b) const {
    for (int64_t r = 0; r < st->v; ++r) std::fill(dst + r * st->d + a, dst + r * st->d + b, T(0));
    for (int64_t i = 0; i < st->n_ids; ++i) {
      T *row = dst + id_at(ids, st->id_dtype, i) * st->d;
      const T *g = src + i * st->d;
      for (int64_t j = a; j < b; ++j) row[j] += g[j];
    }
  }
  static void gather_part(void *ctx, int64_t a, int64_t b, int) { static_cast<const EmbCall *>(ctx)->gather(a, b); }
  static void scatter_part(void *ctx, int64_t a, int64_t b, int) { static_cast<const EmbCall *>(ctx)->scatter(a, b); }
};

template <class T>
ctn_status emb_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const EmbState *>(state);
  const ctn_tensor_desc &idd = args->inputs[st->grad ? 0 : 1];
  const void *ids = static_cast<const char *>(idd.data) + idd.offset;
  // Validate every id on the calling thread first: the error is recorded here, and the copy
  // below never reads outside the table.
  for (int64_t i = 0; i < st->n_ids; ++i) {
    int64_t id = id_at(ids, st->id_dtype, i);
    if (id < 0 || id >= st->v)
      return st->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu %s: id %lld at position %lld is outside [0, %lld)",
                                 st->grad ? CTN_OP_EMBEDDING_GRAD : CTN_OP_EMBEDDING, static_cast<long long>(id),
                                 static_cast<long long>(i), static_cast<long long>(st->v));
  }
  EmbCall<T> call{st, ids, desc_ptr<const T>(args->inputs[st->grad ? 1 : 0]), desc_ptr<T>(args->outputs[0])};
  ThreadPool &pool = *st->be->pool;
  const bool par = st->n_ids * st->d >= kParallelThreshold && pool.size() > 1;
  if (!st->grad) {
    if (par)
      pool.parallel_for(st->n_ids, 16, EmbCall<T>::gather_part, &call);
    else
      call.gather(0, st->n_ids);
  } else {
    if (par && st->d >= 32)
      pool.parallel_for(st->d, 16, EmbCall<T>::scatter_part, &call);
    else
      call.scatter(0, st->d);
  }
  return CTN_OK;
}

ctn_status make_embedding(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool grad) {
  const ctn_host_api *host = be->host;
  const ctn_tensor_desc &ids = sig->inputs[grad ? 0 : 1], &vals = sig->inputs[grad ? 1 : 0], &y = *sig->output;
  if (ctn_status s = need_float(host, "cpu", sig->op, vals.dtype); s) return s;
  const ctn_tensor_desc &table = grad ? y : vals;
  auto st = new_state<EmbState>(be);
  st->grad = grad;
  st->v = table.shape[0];
  st->d = table.shape[1];
  st->n_ids = desc_numel(ids);
  st->id_dtype = ids.dtype;
  kernel_set(out, vals.dtype == CTN_F32 ? emb_kernel<float> : emb_kernel<double>, st.release());
  return CTN_OK;
}

}  // namespace

ctn_status make_nn_misc_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const char *op = sig->op;
  if (!std::strcmp(op, CTN_OP_DROPOUT)) {
    *handled = true;
    return make_dropout(be, sig, out);
  }
  if (!std::strcmp(op, CTN_OP_EMBEDDING) || !std::strcmp(op, CTN_OP_EMBEDDING_GRAD)) {
    *handled = true;
    return make_embedding(be, sig, out, !std::strcmp(op, CTN_OP_EMBEDDING_GRAD));
  }
  return CTN_OK;
}

}  // namespace ctn_cpu
