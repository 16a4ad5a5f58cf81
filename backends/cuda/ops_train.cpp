// get_kernel for the training ops that run on our own kernels: optimizer steps, dropout,
// embedding (+ grad), layer norm (+ grads), batch_norm_inference, batch_norm_grad_gamma and
// max_pool2d_grad (first maximum of each window, which cuDNN does not promise).
#include "cuda_backend.h"
#include "cuda_kernels.h"

namespace ctn_cuda {
namespace {

enum class T { kOptim, kDropout, kEmbedding, kEmbeddingGrad, kLayerNorm, kLayerNormGradInput,
               kLayerNormGradGamma, kBnInference, kBnGradGamma, kMaxPoolGrad };

struct TrainState : KernelBase {
  T kind = T::kOptim;
  int dtype = 0, idtype = 0, sub = 0, flag = 0;
  double f[4] = {};
  int64_t n = 0, a = 0, b = 0, c = 0;  // sizes, meaning per kind
  uint64_t seed = 0;
  double scale = 0;
  PoolGeom pool;
};

ctn_status train_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const TrainState *>(state);
  Backend *be = st->be;
  cudaStream_t s = be->stream;
  void *o = dptr(args->outputs[0]);
  auto in = [&](uint32_t i) { return dptr(args->inputs[i]); };
  switch (st->kind) {
    case T::kOptim:
      launch_optim(s, st->sub, st->dtype, st->n, o, in(0), in(1), args->n_inputs > 2 ? in(2) : nullptr,
                   args->n_inputs > 3 ? in(3) : nullptr,
                   args->n_inputs > 4 ? static_cast<const int64_t *>(in(4)) : nullptr, st->f,
                   st->flag, be->err_dev);
      break;
    case T::kDropout:
      launch_dropout(s, st->dtype, st->n, o, in(0), static_cast<const int64_t *>(in(1)), st->seed,
                     st->f[0], st->scale);
      break;
    case T::kEmbedding:
      launch_embedding(s, st->dtype, st->idtype, st->n, st->a, st->b, in(0), in(1), o, be->err_dev);
      break;
    case T::kEmbeddingGrad:
      launch_embedding_grad(s, st->dtype, st->idtype, st->n, st->a, st->b, in(0), in(1), o);
      break;
    case T::kLayerNorm:
      launch_layer_norm(s, st->dtype, st->a, st->b, st->f[0], in(0), in(1), in(2), o);
      break;
    case T::kLayerNormGradInput:
      launch_layer_norm_grad_input(s, st->dtype, st->a, st->b, st->f[0], in(0), in(1), in(2), o);
      break;
    case T::kLayerNormGradGamma:
      launch_layer_norm_grad_gamma(s, st->dtype, st->a, st->b, st->f[0], in(0), in(1),
                                   args->workspace, o);
      break;
    case T::kBnInference:
      launch_bn_inference(s, st->dtype, st->a, st->b, st->c, st->f[0], in(0), in(1), in(2), in(3),
                          in(4), o);
      break;
    case T::kBnGradGamma:
      launch_bn_grad_gamma(s, st->dtype, st->a, st->b, st->c, st->f[0], in(0), in(1), o);
      break;
    case T::kMaxPoolGrad:
      launch_max_pool_grad(s, st->dtype, st->pool, in(0), in(2), o);
      break;
  }
  return check_launch(be, st->op);
}

struct Entry {
  const char *name;
  T kind;
  int sub;
  uint32_t n_inputs;
};

const Entry kEntries[] = {
    {CTN_OP_SGD_VELOCITY, T::kOptim, 0, 3},
    {CTN_OP_SGD_APPLY, T::kOptim, 1, 4},
    {CTN_OP_ADAM_MOMENT1, T::kOptim, 2, 2},
    {CTN_OP_ADAM_MOMENT2, T::kOptim, 3, 2},
    {CTN_OP_ADAM_APPLY, T::kOptim, 4, 5},
    {CTN_OP_DROPOUT, T::kDropout, 0, 2},
    {CTN_OP_EMBEDDING, T::kEmbedding, 0, 2},
    {CTN_OP_EMBEDDING_GRAD, T::kEmbeddingGrad, 0, 2},
    {CTN_OP_LAYER_NORM, T::kLayerNorm, 0, 3},
    {CTN_OP_LAYER_NORM_GRAD_INPUT, T::kLayerNormGradInput, 0, 3},
    {CTN_OP_LAYER_NORM_GRAD_GAMMA, T::kLayerNormGradGamma, 0, 2},
    {CTN_OP_BATCH_NORM_INFERENCE, T::kBnInference, 0, 5},
    {CTN_OP_BATCH_NORM_GRAD_GAMMA, T::kBnGradGamma, 0, 2},
    {CTN_OP_MAX_POOL2D_GRAD, T::kMaxPoolGrad, 0, 3},
};

}  // namespace

ctn_status make_train_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                             bool *handled) {
  const Entry *e = find_entry(kEntries, sig->op);
  if (!e) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const char *op = e->name;
  const ctn_tensor_desc &o = *sig->output;
  const ctn_attrs &at = *sig->attrs;
  if (ctn_status s = need_float(host, "cuda", sig->op, o.dtype); s) return s;
  auto st = new_state<TrainState>(be, op);
  st->kind = e->kind;
  st->sub = e->sub;
  st->dtype = o.dtype;
  for (int k = 0; k < 4; ++k) st->f[k] = at.f[k];
  st->flag = at.i[0] != 0;
  st->n = desc_numel(o);
  uint32_t flags = 0;
  uint64_t ws = 0;
  const ctn_tensor_desc &x = sig->inputs[0];
  switch (e->kind) {
    case T::kOptim:
      flags = CTN_KERNEL_INPLACE_OK;
      break;
    case T::kDropout: {
      const double p = at.f[0];
      st->seed = static_cast<uint64_t>(at.i[0]);
      st->scale = 1.0 / (1.0 - p);
      flags = CTN_KERNEL_INPLACE_OK;
      break;
    }
    case T::kEmbedding:
    case T::kEmbeddingGrad: {
      const bool grad = e->kind == T::kEmbeddingGrad;
      const ctn_tensor_desc &ids = grad ? sig->inputs[0] : sig->inputs[1];
      const ctn_tensor_desc &table = grad ? o : sig->inputs[0];
      st->idtype = ids.dtype;
      st->n = desc_numel(ids);
      st->a = table.shape[0];
      st->b = table.shape[1];
      break;
    }
    case T::kLayerNorm:
    case T::kLayerNormGradInput:
    case T::kLayerNormGradGamma: {
      const int64_t axis = at.i[0];
      st->a = 1;
      for (int64_t k = 0; k < axis; ++k) st->a *= x.shape[k];
      st->b = 1;
      for (int64_t k = axis; k < static_cast<int64_t>(x.ndim); ++k) st->b *= x.shape[k];
      if (e->kind == T::kLayerNormGradGamma)
        ws = static_cast<uint64_t>(2 * std::max<int64_t>(st->a, 1)) * dtype_size(o.dtype);
      break;
    }
    case T::kBnInference:
    case T::kBnGradGamma: {
      st->a = x.shape[0];
      st->b = x.shape[1];
      st->c = 1;
      for (uint32_t k = 2; k < x.ndim; ++k) st->c *= x.shape[k];
      break;
    }
    case T::kMaxPoolGrad: {
      const ctn_tensor_desc &dy = sig->inputs[2];
      PoolGeom &g = st->pool;
      g.n = x.shape[0];
      g.c = x.shape[1];
      g.h = x.shape[2];
      g.w = x.shape[3];
      g.ho = dy.shape[2];
      g.wo = dy.shape[3];
      g.kh = static_cast<int>(at.i[0]);
      g.kw = static_cast<int>(at.i[1]);
      g.sh = static_cast<int>(at.i[2]);
      g.sw = static_cast<int>(at.i[3]);
      g.ph = static_cast<int>(at.i[4]);
      g.pw = static_cast<int>(at.i[5]);
      break;
    }
  }
  kernel_set(out, train_kernel, st.release(), flags, ws);
  return CTN_OK;
}

}  // namespace ctn_cuda
