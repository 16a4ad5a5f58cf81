// Launchers of the backend's own device kernels (k_*.cu), callable from the host files. Plain
// C++ types only, so the host side compiles with the C++ compiler; every launcher enqueues on
// `s` and never synchronises (it may be recorded into a CUDA graph). Launch errors are picked
// up by the caller with cudaGetLastError (check_launch).
#ifndef CTN_CUDA_KERNELS_H
#define CTN_CUDA_KERNELS_H

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../common/kernel_util.h"

namespace ctn_cuda {

constexpr int kMaxDims = CTN_MAX_DIMS;

// ---- elementwise ----------------------------------------------------------------------------
// Op codes: CTN_EW_* of cuda_ew_ops.h, generated from backends/common/ew_ops.py. A code the
// kernel has no case for (for the dtype) records an error in `err` (Backend::err_dev).

// Output walk shared by the elementwise kernels (backends/common/kernel_util.h, computed by
// ew_walk at get_kernel time; passed to the kernels by value).
using EwGeom = ctn_backend_util::EwWalk;

// dtype: ctn_dtype of the inputs (f32/f64; i32/i64 for the ops the CPU backend also offers).
void launch_unary(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                  double f0, double f1, int *err);
void launch_binary(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                   const void *b, double f0, double f1, int *err);
// Comparisons write one byte (bool) per element; dtype is the inputs' (any of the six).
void launch_compare(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                    const void *b, int *err);
// where(cond u8, a, b): elem_size 1, 4 or 8 bytes (a select only moves bits).
void launch_where(cudaStream_t s, int elem_size, const EwGeom &g, void *out, const void *cond,
                  const void *a, const void *b);
// Contiguous cast of n elements between any two ctn dtypes (float->int saturates, NaN -> 0).
void launch_cast(cudaStream_t s, int from, int to, int64_t n, void *out, const void *in);
// out[r, c] = act(out[r, c] + bias[c]) over rows x cols, in place (matmul_bias_act epilogue).
void launch_bias_act(cudaStream_t s, int dtype, int64_t rows, int64_t cols, void *out,
                     const void *bias, int act);

// ---- reductions -----------------------------------------------------------------------------
// The input seen as kept dims (output order, contiguous output) x reduced dims, each with the
// input's element strides. kind: 0 sum, 1 mean, 2 max.
struct RedGeom {
  int nk = 0, nr = 0;
  int64_t n_out = 1, n_red = 1;
  int64_t kshape[kMaxDims] = {}, kstr[kMaxDims] = {};
  int64_t rshape[kMaxDims] = {}, rstr[kMaxDims] = {};
};
void launch_reduce(cudaStream_t s, int kind, int dtype, const RedGeom &g, void *out,
                   const void *in);

// Softmax family over rows of length `len` with stride `inner` (outer x inner rows).
// mode: 0 softmax(x), 1 log_softmax(x), 2 softmax_grad(y, dy), 3 log_softmax_grad(y, dy).
void launch_softmax(cudaStream_t s, int mode, int dtype, int64_t outer, int64_t len,
                    int64_t inner, void *out, const void *a, const void *b);
// cross_entropy: per-row losses into `rows` (n of dtype), then their mean into out (0-d).
void launch_cross_entropy(cudaStream_t s, int dtype, int label_dtype, int64_t n, int64_t c,
                          const void *logits, const void *labels, void *rows, void *out,
                          int *err);
void launch_cross_entropy_grad(cudaStream_t s, int dtype, int label_dtype, int64_t n, int64_t c,
                               const void *logits, const void *labels, const void *dy,
                               void *out, int *err);

// ---- strided copies (shape ops) -------------------------------------------------------------
// dst[sum idx*dstr] = src[sum idx*sstr] over `shape` (nd dims), elements of elem_size bytes.
struct CopyGeom {
  int nd = 0;
  int64_t n = 0;
  int64_t shape[kMaxDims] = {};
  int64_t sstr[kMaxDims] = {};
  int64_t dstr[kMaxDims] = {};
};
void launch_strided_copy(cudaStream_t s, int elem_size, const CopyGeom &g, void *dst,
                         const void *src);

// ---- training ops ---------------------------------------------------------------------------
// Optimizer steps; kind: 0 sgd_velocity, 1 sgd_apply, 2 adam_moment1, 3 adam_moment2,
// 4 adam_apply. lr and step are device pointers (read by the kernel: a replayed graph sees
// each run's values). f: the op's f[0..3]; flag: nesterov / decoupled.
void launch_optim(cudaStream_t s, int kind, int dtype, int64_t n, void *out, const void *a,
                  const void *b, const void *c, const void *lr, const int64_t *step,
                  const double *f, int flag, int *err);
// dropout with the splitmix64 mask of ops.h; step is a device i64.
void launch_dropout(cudaStream_t s, int dtype, int64_t n, void *out, const void *x,
                    const int64_t *step, uint64_t seed, double p, double scale);
void launch_embedding(cudaStream_t s, int dtype, int id_dtype, int64_t n_ids, int64_t v,
                      int64_t d, const void *table, const void *ids, void *out, int *err);
// out [V, D] must be zeroed first (the launcher does it); ids out of range are skipped (the
// forward pass already reported them).
void launch_embedding_grad(cudaStream_t s, int dtype, int id_dtype, int64_t n_ids, int64_t v,
                           int64_t d, const void *ids, const void *dy, void *out);
// max_pool2d_grad: first maximum of each window (row-major) gets the gradient.
struct PoolGeom {
  int64_t n = 0, c = 0, h = 0, w = 0, ho = 0, wo = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};
void launch_max_pool_grad(cudaStream_t s, int dtype, const PoolGeom &g, const void *x,
                          const void *dy, void *dx);
// Per-channel statistics over [N, C, S] and, with dy, sum(dy * xhat) (batch_norm_grad_gamma).
void launch_bn_grad_gamma(cudaStream_t s, int dtype, int64_t n, int64_t c, int64_t sp,
                          double eps, const void *x, const void *dy, void *dgamma);
// batch_norm_inference: y = (x - mean) / sqrt(var + eps) * gamma + beta per channel.
void launch_bn_inference(cudaStream_t s, int dtype, int64_t n, int64_t c, int64_t sp,
                         double eps, const void *x, const void *gamma, const void *beta,
                         const void *mean, const void *var, void *y);
// layer_norm over rows of length d (rows = product of the leading axes). stats: 2*rows values
// of dtype (mean, rstd) in the workspace.
void launch_layer_norm(cudaStream_t s, int dtype, int64_t rows, int64_t d, double eps,
                       const void *x, const void *gamma, const void *beta, void *y);
void launch_layer_norm_grad_input(cudaStream_t s, int dtype, int64_t rows, int64_t d,
                                  double eps, const void *x, const void *gamma, const void *dy,
                                  void *dx);
void launch_layer_norm_grad_gamma(cudaStream_t s, int dtype, int64_t rows, int64_t d,
                                  double eps, const void *x, const void *dy, void *stats,
                                  void *dgamma);

}  // namespace ctn_cuda

#endif
