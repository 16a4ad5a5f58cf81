// get_kernel for the cuDNN ops: conv2d and both backward passes (plus conv_transpose2d, which is
// conv2d's backward-data), max/avg pooling forward, avg pooling backward, batch norm forward
// (training statistics) and its input gradient. Descriptors and the algorithm (cuDNN's
// heuristics, _v7) are chosen at get_kernel time; the algorithm's workspace is the kernel's.
#include <limits>

#include "cuda_backend.h"

namespace ctn_cuda {
namespace {

enum class D { kConv, kConvGradInput, kConvGradWeight, kMaxPool, kAvgPool, kAvgPoolGrad,
               kBatchNorm, kBatchNormGradInput };

// Owns the cuDNN descriptors of one kernel.
struct DnnState : KernelBase {
  D kind = D::kConv;
  bool f64 = false;
  cudnnTensorDescriptor_t t0 = nullptr, t1 = nullptr, t2 = nullptr;  // per kind, see make
  cudnnFilterDescriptor_t filt = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  size_t ws = 0;
  double eps = 0;
  int64_t channels = 0;
  ~DnnState() override {
    const CudnnApi &a = be->cudnn;
    if (t0) a.cudnnDestroyTensorDescriptor(t0);
    if (t1) a.cudnnDestroyTensorDescriptor(t1);
    if (t2) a.cudnnDestroyTensorDescriptor(t2);
    if (filt) a.cudnnDestroyFilterDescriptor(filt);
    if (conv) a.cudnnDestroyConvolutionDescriptor(conv);
    if (pool) a.cudnnDestroyPoolingDescriptor(pool);
  }
};

ctn_status dnn_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const DnnState *>(state);
  Backend *be = st->be;
  const CudnnApi &a = be->cudnn;
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void *one = st->f64 ? static_cast<const void *>(&one_d) : &one_f;
  const void *zero = st->f64 ? static_cast<const void *>(&zero_d) : &zero_f;
  void *o = dptr(args->outputs[0]);
  auto in = [&](uint32_t i) { return static_cast<const void *>(dptr(args->inputs[i])); };
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  switch (st->kind) {
    case D::kConv:  // t0 x, t1 y
      s = a.cudnnConvolutionForward(be->dnn, one, st->t0, in(0), st->filt, in(1), st->conv,
                                    st->fwd_algo, args->workspace, st->ws, zero, st->t1, o);
      break;
    case D::kConvGradInput:  // t0 dy, t1 dx
      s = a.cudnnConvolutionBackwardData(be->dnn, one, st->filt, in(1), st->t0, in(0), st->conv,
                                         st->bwd_data_algo, args->workspace, st->ws, zero,
                                         st->t1, o);
      break;
    case D::kConvGradWeight:  // t0 x, t1 dy
      s = a.cudnnConvolutionBackwardFilter(be->dnn, one, st->t0, in(0), st->t1, in(1), st->conv,
                                           st->bwd_filter_algo, args->workspace, st->ws, zero,
                                           st->filt, o);
      break;
    case D::kMaxPool:
    case D::kAvgPool:  // t0 x, t1 y
      s = a.cudnnPoolingForward(be->dnn, st->pool, one, st->t0, in(0), zero, st->t1, o);
      break;
    case D::kAvgPoolGrad:  // t0 dy (as y too), t1 dx (as x too): averaging reads neither
      s = a.cudnnPoolingBackward(be->dnn, st->pool, one, st->t0, in(0), st->t0, in(0), st->t1, o,
                                 zero, st->t1, o);
      break;
    case D::kBatchNorm:  // t0 x/y, t2 per-channel
      s = a.cudnnBatchNormalizationForwardTraining(be->dnn, CUDNN_BATCHNORM_SPATIAL, one, zero,
                                                   st->t0, in(0), st->t0, o, st->t2, in(1), in(2),
                                                   1.0, nullptr, nullptr, st->eps, nullptr,
                                                   nullptr);
      break;
    case D::kBatchNormGradInput: {  // (x, gamma, dy); dgamma/dbeta land in the workspace
      char *ws = static_cast<char *>(args->workspace);
      const size_t half = static_cast<size_t>(st->channels) * (st->f64 ? 8 : 4);
      s = a.cudnnBatchNormalizationBackward(be->dnn, CUDNN_BATCHNORM_SPATIAL, one, zero, one,
                                            zero, st->t0, in(0), st->t0, in(2), st->t0, o,
                                            st->t2, in(1), ws, ws + half, st->eps, nullptr,
                                            nullptr);
      break;
    }
  }
  if (s != CUDNN_STATUS_SUCCESS) return cudnn_fail(be, s, st->op);
  return CTN_OK;
}

bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

struct Entry {
  const char *name;
  D kind;
};
const Entry kEntries[] = {
    {CTN_OP_CONV2D, D::kConv},
    {CTN_OP_CONV2D_GRAD_INPUT, D::kConvGradInput},
    {CTN_OP_CONV_TRANSPOSE2D, D::kConvGradInput},
    {CTN_OP_CONV2D_GRAD_WEIGHT, D::kConvGradWeight},
    {CTN_OP_MAX_POOL2D, D::kMaxPool},
    {CTN_OP_AVG_POOL2D, D::kAvgPool},
    {CTN_OP_AVG_POOL2D_GRAD, D::kAvgPoolGrad},
    {CTN_OP_BATCH_NORM, D::kBatchNorm},
    {CTN_OP_BATCH_NORM_GRAD_INPUT, D::kBatchNormGradInput},
};

// A sequence of cuDNN descriptor calls that keeps the first failure (every call still runs:
// the descriptors made are released with the state either way).
struct DnnSetup {
  const CudnnApi &a;
  cudnnDataType_t dt;
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;

  void check(cudnnStatus_t r) {
    if (s == CUDNN_STATUS_SUCCESS) s = r;
  }
  bool ok() const { return s == CUDNN_STATUS_SUCCESS; }

  // An NCHW descriptor: 4-D as is; [N, C, ...] (batch norm) with the trailing dims as H.
  void tensor4(cudnnTensorDescriptor_t *t, const ctn_tensor_desc &d) {
    check(a.cudnnCreateTensorDescriptor(t));
    int64_t dims[4] = {1, 1, 1, 1};
    if (d.ndim == 4) {
      for (int k = 0; k < 4; ++k) dims[k] = d.shape[k];
    } else if (d.ndim >= 2) {
      dims[0] = d.shape[0];
      dims[1] = d.shape[1];
      for (uint32_t k = 2; k < d.ndim; ++k) dims[2] *= d.shape[k];
    }
    if (ok())
      check(a.cudnnSetTensor4dDescriptor(*t, CUDNN_TENSOR_NCHW, dt, static_cast<int>(dims[0]),
                                         static_cast<int>(dims[1]), static_cast<int>(dims[2]),
                                         static_cast<int>(dims[3])));
  }
};

// The first of cuDNN's ranked algorithms that it reports usable; -1 when none is.
template <class Perf>
int first_usable(const Perf *perf, int found) {
  for (int k = 0; k < found; ++k)
    if (perf[k].status == CUDNN_STATUS_SUCCESS) return k;
  return -1;
}

// Tensors: conv: (x, w) -> y; grad_input / transpose: (dy, w) -> dx; grad_weight: (x, dy) -> w.
void conv_descriptors(DnnSetup &u, DnnState &st, const ctn_op_signature *sig, bool tf32) {
  const CudnnApi &a = u.a;
  const ctn_tensor_desc &o = *sig->output, &i0 = sig->inputs[0], &i1 = sig->inputs[1];
  const ctn_attrs &at = *sig->attrs;
  const ctn_tensor_desc &wd = st.kind == D::kConvGradWeight ? o : i1;
  const int groups = static_cast<int>(at.i[6] > 0 ? at.i[6] : 1);
  u.tensor4(&st.t0, i0);
  u.tensor4(&st.t1, st.kind == D::kConvGradWeight ? i1 : o);
  u.check(a.cudnnCreateFilterDescriptor(&st.filt));
  if (u.ok())
    u.check(a.cudnnSetFilter4dDescriptor(st.filt, u.dt, CUDNN_TENSOR_NCHW, static_cast<int>(wd.shape[0]),
                                         static_cast<int>(wd.shape[1]), static_cast<int>(wd.shape[2]),
                                         static_cast<int>(wd.shape[3])));
  u.check(a.cudnnCreateConvolutionDescriptor(&st.conv));
  if (u.ok())
    u.check(a.cudnnSetConvolution2dDescriptor(
        st.conv, static_cast<int>(at.i[2]), static_cast<int>(at.i[3]), static_cast<int>(at.i[0] > 0 ? at.i[0] : 1),
        static_cast<int>(at.i[1] > 0 ? at.i[1] : 1), static_cast<int>(at.i[4] > 0 ? at.i[4] : 1),
        static_cast<int>(at.i[5] > 0 ? at.i[5] : 1), CUDNN_CROSS_CORRELATION, u.dt));
  if (u.ok()) u.check(a.cudnnSetConvolutionGroupCount(st.conv, groups));
  // cuDNN uses TF32 for f32 convolutions unless told FMA only: follow the "tf32" option.
  if (u.ok()) u.check(a.cudnnSetConvolutionMathType(st.conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
}

// The convolution's algorithm (cuDNN's first usable one) and its workspace;
// CUDNN_STATUS_NOT_SUPPORTED in u.s when there is none.
void conv_algorithm(DnnSetup &u, DnnState &st, cudnnHandle_t dnn) {
  const CudnnApi &a = u.a;
  int found = 0, pick = -1;
  if (st.kind == D::kConv) {
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    u.check(a.cudnnGetConvolutionForwardAlgorithm_v7(dnn, st.t0, st.filt, st.conv, st.t1, 8, &found, perf));
    if (u.ok() && (pick = first_usable(perf, found)) < 0) u.s = CUDNN_STATUS_NOT_SUPPORTED;
    if (!u.ok()) return;
    st.fwd_algo = perf[pick].algo;
    u.check(a.cudnnGetConvolutionForwardWorkspaceSize(dnn, st.t0, st.filt, st.conv, st.t1, st.fwd_algo, &st.ws));
  } else if (st.kind == D::kConvGradInput) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[8];
    u.check(a.cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, st.filt, st.t0, st.conv, st.t1, 8, &found, perf));
    if (u.ok() && (pick = first_usable(perf, found)) < 0) u.s = CUDNN_STATUS_NOT_SUPPORTED;
    if (!u.ok()) return;
    st.bwd_data_algo = perf[pick].algo;
    u.check(a.cudnnGetConvolutionBackwardDataWorkspaceSize(dnn, st.filt, st.t0, st.conv, st.t1, st.bwd_data_algo,
                                                           &st.ws));
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
    u.check(a.cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, st.t0, st.t1, st.conv, st.filt, 8, &found, perf));
    if (u.ok() && (pick = first_usable(perf, found)) < 0) u.s = CUDNN_STATUS_NOT_SUPPORTED;
    if (!u.ok()) return;
    st.bwd_filter_algo = perf[pick].algo;
    u.check(a.cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn, st.t0, st.t1, st.conv, st.filt,
                                                             st.bwd_filter_algo, &st.ws));
  }
}

void pool_descriptors(DnnSetup &u, DnnState &st, const ctn_op_signature *sig) {
  const ctn_attrs &at = *sig->attrs;
  const cudnnPoolingMode_t mode = st.kind == D::kMaxPool ? CUDNN_POOLING_MAX
                                  : at.i[6]              ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                         : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  u.tensor4(&st.t0, sig->inputs[0]);
  u.tensor4(&st.t1, *sig->output);
  u.check(u.a.cudnnCreatePoolingDescriptor(&st.pool));
  if (u.ok())
    u.check(u.a.cudnnSetPooling2dDescriptor(st.pool, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(at.i[0]),
                                            static_cast<int>(at.i[1]), static_cast<int>(at.i[4]),
                                            static_cast<int>(at.i[5]), static_cast<int>(at.i[2] > 0 ? at.i[2] : at.i[0]),
                                            static_cast<int>(at.i[3] > 0 ? at.i[3] : at.i[1])));
}

void batch_norm_descriptors(DnnSetup &u, DnnState &st, const ctn_op_signature *sig) {
  const ctn_tensor_desc &x = sig->inputs[0];
  st.eps = sig->attrs->f[0];
  st.channels = x.shape[1];
  u.tensor4(&st.t0, x);
  u.check(u.a.cudnnCreateTensorDescriptor(&st.t2));
  if (u.ok()) u.check(u.a.cudnnDeriveBNTensorDescriptor(st.t2, st.t0, CUDNN_BATCHNORM_SPATIAL));
  if (st.kind == D::kBatchNormGradInput) st.ws = 2 * static_cast<size_t>(st.channels) * (st.f64 ? 8 : 4);
}

}  // namespace

ctn_status make_dnn_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                           bool *handled) {
  const Entry *e = nullptr;
  for (const Entry &c : kEntries)
    if (!std::strcmp(c.name, sig->op)) e = &c;
  if (!e) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const char *op = e->name;
  if (!be->have_cudnn)
    return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: cuDNN is not available (%s)", op,
                           be->cudnn_why.c_str());
  if (e->kind == D::kConv && sig->attrs->ni > 7 && sig->attrs->i[7] != 0)  // layout (since 1.7): NCHW only
    return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: layout 1 (NHWC) is not implemented", op);
  const uint32_t pool_layout = e->kind == D::kMaxPool ? 6 : 7;  // the pools' layout slot (since 1.7)
  if ((e->kind == D::kMaxPool || e->kind == D::kAvgPool) && sig->attrs->ni > pool_layout && sig->attrs->i[pool_layout] != 0)
    return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: layout 1 (NHWC) is not implemented", op);
  const ctn_tensor_desc &o = *sig->output;
  if (ctn_status s = need_float(host, "cuda", sig->op, o.dtype); s) return s;
  for (uint32_t i = 0; i < sig->n_inputs; ++i) {
    for (uint32_t k = 0; k < sig->inputs[i].ndim; ++k)
      if (!fits_int(sig->inputs[i].shape[k]))
        return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: a dim exceeds cuDNN's int range", op);
  }
  DnnSetup u{be->cudnn, o.dtype == CTN_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT};
  auto st = new_state<DnnState>(be, op);
  st->kind = e->kind;
  st->f64 = o.dtype == CTN_F64;
  switch (e->kind) {
    case D::kConv:
    case D::kConvGradInput:
    case D::kConvGradWeight:
      conv_descriptors(u, *st, sig, be->tf32);
      if (!u.ok()) return cudnn_fail(be, u.s, op);
      conv_algorithm(u, *st, be->dnn);
      if (u.s == CUDNN_STATUS_NOT_SUPPORTED)
        return host->set_error(CTN_ERR_UNSUPPORTED, "cuda %s: cuDNN has no algorithm for %s", op,
                               shape_str(o).c_str());
      break;
    case D::kMaxPool:
    case D::kAvgPool:
    case D::kAvgPoolGrad: pool_descriptors(u, *st, sig); break;
    case D::kBatchNorm:
    case D::kBatchNormGradInput: batch_norm_descriptors(u, *st, sig); break;
  }
  if (!u.ok()) return cudnn_fail(be, u.s, op);
  const uint64_t ws = st->ws;
  kernel_set(out, dnn_kernel, st.release(), 0, ws);
  return CTN_OK;
}

}  // namespace ctn_cuda
