// Device kernels for shape ops (one strided copy) and the training ops that are not cuDNN's:
// optimizer steps, dropout, embedding, max-pool backward, batch-norm helpers, layer norm.
#include <cstdint>

#include "cuda_kernels.h"
#include "k_common.cuh"

namespace ctn_cuda {
namespace {

// ---- strided copy -----------------------------------------------------------------------------
template <class E>
__global__ void strided_copy_kernel(CopyGeom g, E *dst, const E *src) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, so = 0, d = 0;
    for (int k = g.nd - 1; k >= 0; --k) {
      int64_t q = rem / g.shape[k];
      int64_t idx = rem - q * g.shape[k];
      so += idx * g.sstr[k];
      d += idx * g.dstr[k];
      rem = q;
    }
    dst[d] = src[so];
  }
}

// ---- optimizers -------------------------------------------------------------------------------
template <class T>
__global__ void optim_kernel(int kind, int64_t n, T *out, const T *a, const T *b, const T *c,
                             const T *lr_p, const int64_t *step_p, double f0, double f1,
                             double f2, double f3, int flag, int *err) {
  __shared__ T k0, k1;
  if (threadIdx.x == 0) {
    if (kind == 4) {
      // Bias corrections in double, once per block: beta^step underflows gracefully to 0.
      int64_t step = *step_p;
      if (step < 1) {
        set_device_error(err, 3);
        step = 1;
      }
      double sd = static_cast<double>(step);
      k0 = T(1.0 / (1.0 - pow(f0, sd)));
      k1 = T(1.0 / sqrt(1.0 - pow(f1, sd)));
    } else {
      k0 = T(0);
      k1 = T(0);
    }
  }
  __syncthreads();
  const T lr = lr_p ? *lr_p : T(0);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    switch (kind) {
      case 0: out[i] = T(f0) * a[i] + (b[i] + T(f1) * c[i]); break;  // (v, g, w)
      case 1: {                                                      // (w, v', g)
        T w = a[i];
        out[i] = flag ? w - lr * ((c[i] + T(f1) * w) + T(f0) * b[i]) : w - lr * b[i];
        break;
      }
      case 2: out[i] = T(f0) * a[i] + T(1.0 - f0) * b[i]; break;
      case 3: out[i] = T(f0) * a[i] + T(1.0 - f0) * (b[i] * b[i]); break;
      default: {  // (w, m', v'): w - lr * (mhat / (sqrt(vhat) + eps) + decoupled wd*w)
        T w = a[i];
        T upd = (b[i] * k0) / (sqrt(c[i]) * k1 + T(f2));
        out[i] = flag ? w - lr * (upd + T(f3) * w) : w - lr * upd;
        break;
      }
    }
  }
}

// ---- dropout (the counter-based mask documented in ops.h) ------------------------------------
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z;
}

template <class T>
__global__ void dropout_kernel(int64_t n, T *out, const T *x, const int64_t *step, uint64_t seed,
                               uint64_t threshold, T scale) {
  const uint64_t key = mix64(seed + mix64(static_cast<uint64_t>(*step) + 0x9E3779B97F4A7C15ull));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t h = mix64(key + (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull) >> 40;
    out[i] = h >= threshold ? x[i] * scale : T(0);
  }
}

// ---- embedding --------------------------------------------------------------------------------
template <class T, class I>
__global__ void embedding_kernel(int64_t n_ids, int64_t v, int64_t d, const T *table,
                                 const I *ids, T *out, int *err) {
  const int64_t n = n_ids * d;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / d, col = i - r * d;
    int64_t id = static_cast<int64_t>(ids[r]);
    if (id < 0 || id >= v) {
      if (col == 0) set_device_error(err, 2);
      out[i] = T(0);
    } else {
      out[i] = table[id * d + col];
    }
  }
}

template <class T, class I>
__global__ void embedding_grad_kernel(int64_t n_ids, int64_t v, int64_t d, const I *ids,
                                      const T *dy, T *out) {
  const int64_t n = n_ids * d;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / d, col = i - r * d;
    int64_t id = static_cast<int64_t>(ids[r]);
    if (id >= 0 && id < v) atomicAdd(out + id * d + col, dy[i]);
  }
}

// ---- max-pool backward --------------------------------------------------------------------------
template <class T>
__global__ void max_pool_grad_kernel(PoolGeom g, const T *x, const T *dy, T *dx) {
  const int64_t n = g.n * g.c * g.ho * g.wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ow = i % g.wo, t = i / g.wo;
    int64_t oh = t % g.ho, nc = t / g.ho;
    const T *plane = x + nc * g.h * g.w;
    int64_t best = -1;
    T bv = T(0);
    for (int kh = 0; kh < g.kh; ++kh) {
      int64_t ih = oh * g.sh - g.ph + kh;
      if (ih < 0 || ih >= g.h) continue;
      for (int kw = 0; kw < g.kw; ++kw) {
        int64_t iw = ow * g.sw - g.pw + kw;
        if (iw < 0 || iw >= g.w) continue;
        T v = plane[ih * g.w + iw];
        if (best < 0 || v > bv) {  // strict: the first maximum in row-major order wins
          best = ih * g.w + iw;
          bv = v;
        }
      }
    }
    if (best >= 0) atomicAdd(dx + nc * g.h * g.w + best, dy[i]);
  }
}

// ---- batch norm helpers -------------------------------------------------------------------------
// One block per channel of [N, C, S]: mean, biased variance, then sum(dy * xhat).
template <class T>
__global__ void bn_grad_gamma_kernel(int64_t n, int64_t c, int64_t sp, T eps, const T *x,
                                     const T *dy, T *dgamma) {
  __shared__ T sh[32];
  const int64_t m = n * sp;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    T s = T(0);
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) s += x[(j / sp) * c * sp + ch * sp + j % sp];
    const T mean = block_sum<T>(s, sh) / T(m);
    T v = T(0);
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
      T d = x[(j / sp) * c * sp + ch * sp + j % sp] - mean;
      v += d * d;
    }
    const T rstd = T(1) / sqrt(block_sum<T>(v, sh) / T(m) + eps);
    T g = T(0);
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
      int64_t at = (j / sp) * c * sp + ch * sp + j % sp;
      g += dy[at] * (x[at] - mean) * rstd;
    }
    g = block_sum<T>(g, sh);
    if (threadIdx.x == 0) dgamma[ch] = g;
  }
}

template <class T>
__global__ void bn_inference_kernel(int64_t total, int64_t c, int64_t sp, T eps, const T *x,
                                    const T *gamma, const T *beta, const T *mean, const T *var,
                                    T *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ch = (i / sp) % c;
    y[i] = (x[i] - mean[ch]) / sqrt(var[ch] + eps) * gamma[ch] + beta[ch];
  }
}

// ---- layer norm ---------------------------------------------------------------------------------
template <class T>
__device__ __forceinline__ void row_stats(const T *x, int64_t d, T eps, T *sh, T *mean, T *rstd) {
  T s = T(0);
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) s += x[k];
  const T mu = block_sum<T>(s, sh) / T(d);
  T v = T(0);
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) v += (x[k] - mu) * (x[k] - mu);
  *mean = mu;
  *rstd = T(1) / sqrt(block_sum<T>(v, sh) / T(d) + eps);
}

template <class T>
__global__ void layer_norm_kernel(int64_t rows, int64_t d, T eps, const T *x, const T *gamma,
                                  const T *beta, T *y) {
  __shared__ T sh[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * d;
    T mean, rstd;
    row_stats<T>(xr, d, eps, sh, &mean, &rstd);
    for (int64_t k = threadIdx.x; k < d; k += blockDim.x)
      y[r * d + k] = (xr[k] - mean) * rstd * gamma[k] + beta[k];
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
template <class T>
__global__ void layer_norm_grad_input_kernel(int64_t rows, int64_t d, T eps, const T *x,
                                             const T *gamma, const T *dy, T *dx) {
  __shared__ T sh[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * d, *dyr = dy + r * d;
    T mean, rstd;
    row_stats<T>(xr, d, eps, sh, &mean, &rstd);
    T s1 = T(0), s2 = T(0);
    for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
      T g = dyr[k] * gamma[k];
      s1 += g;
      s2 += g * (xr[k] - mean) * rstd;
    }
    const T m1 = block_sum<T>(s1, sh) / T(d);
    const T m2 = block_sum<T>(s2, sh) / T(d);
    for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
      T xhat = (xr[k] - mean) * rstd;
      dx[r * d + k] = rstd * (dyr[k] * gamma[k] - m1 - xhat * m2);
    }
  }
}

template <class T>
__global__ void layer_norm_stats_kernel(int64_t rows, int64_t d, T eps, const T *x, T *stats) {
  __shared__ T sh[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T mean, rstd;
    row_stats<T>(x + r * d, d, eps, sh, &mean, &rstd);
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

// One thread per column: adjacent threads read adjacent elements of each row.
template <class T>
__global__ void layer_norm_grad_gamma_kernel(int64_t rows, int64_t d, const T *x, const T *dy,
                                             const T *stats, T *dgamma) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < d;
       k += int64_t(gridDim.x) * blockDim.x) {
    T acc = T(0);
    for (int64_t r = 0; r < rows; ++r)
      acc += dy[r * d + k] * (x[r * d + k] - stats[2 * r]) * stats[2 * r + 1];
    dgamma[k] = acc;
  }
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : rows < 65536 ? rows : 65536);
}

template <class T>
void optim_t(cudaStream_t s, int kind, int64_t n, void *out, const void *a, const void *b,
             const void *c, const void *lr, const int64_t *step, const double *f, int flag,
             int *err) {
  optim_kernel<T><<<grid_for(n), kBlock, 0, s>>>(
      kind, n, static_cast<T *>(out), static_cast<const T *>(a), static_cast<const T *>(b),
      static_cast<const T *>(c), static_cast<const T *>(lr), step, f[0], f[1], f[2], f[3], flag,
      err);
}

template <class T>
void embedding_t(cudaStream_t s, int id_dtype, int64_t n_ids, int64_t v, int64_t d,
                 const void *table, const void *ids, void *out, int *err) {
  const dim3 grid = grid_for(n_ids * d);
  if (id_dtype == 2)
    embedding_kernel<T, int32_t><<<grid, kBlock, 0, s>>>(n_ids, v, d, static_cast<const T *>(table), static_cast<const int32_t *>(ids), static_cast<T *>(out), err);
  else
    embedding_kernel<T, int64_t><<<grid, kBlock, 0, s>>>(n_ids, v, d, static_cast<const T *>(table), static_cast<const int64_t *>(ids), static_cast<T *>(out), err);
}

template <class T>
void embedding_grad_t(cudaStream_t s, int id_dtype, int64_t n_ids, int64_t v, int64_t d,
                      const void *ids, const void *dy, void *out) {
  const dim3 grid = grid_for(n_ids * d);
  if (id_dtype == 2)
    embedding_grad_kernel<T, int32_t><<<grid, kBlock, 0, s>>>(n_ids, v, d, static_cast<const int32_t *>(ids), static_cast<const T *>(dy), static_cast<T *>(out));
  else
    embedding_grad_kernel<T, int64_t><<<grid, kBlock, 0, s>>>(n_ids, v, d, static_cast<const int64_t *>(ids), static_cast<const T *>(dy), static_cast<T *>(out));
}

}  // namespace

void launch_strided_copy(cudaStream_t s, int elem_size, const CopyGeom &g, void *dst,
                         const void *src) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n);
  switch (elem_size) {
    case 1: strided_copy_kernel<uint8_t><<<grid, kBlock, 0, s>>>(g, static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src)); break;
    case 2: strided_copy_kernel<uint16_t><<<grid, kBlock, 0, s>>>(g, static_cast<uint16_t *>(dst), static_cast<const uint16_t *>(src)); break;
    case 4: strided_copy_kernel<uint32_t><<<grid, kBlock, 0, s>>>(g, static_cast<uint32_t *>(dst), static_cast<const uint32_t *>(src)); break;
    default: strided_copy_kernel<uint64_t><<<grid, kBlock, 0, s>>>(g, static_cast<uint64_t *>(dst), static_cast<const uint64_t *>(src)); break;
  }
}

void launch_optim(cudaStream_t s, int kind, int dtype, int64_t n, void *out, const void *a,
                  const void *b, const void *c, const void *lr, const int64_t *step,
                  const double *f, int flag, int *err) {
  if (n == 0) return;
  if (dtype == 0) optim_t<float>(s, kind, n, out, a, b, c, lr, step, f, flag, err);
  else optim_t<double>(s, kind, n, out, a, b, c, lr, step, f, flag, err);
}

void launch_dropout(cudaStream_t s, int dtype, int64_t n, void *out, const void *x,
                    const int64_t *step, uint64_t seed, double p, double scale) {
  if (n == 0) return;
  // floor(p * 2^24): p in [0, 1), so the threshold fits in 24 bits.
  const uint64_t threshold = static_cast<uint64_t>(p * 16777216.0);
  if (dtype == 0)
    dropout_kernel<float><<<grid_for(n), kBlock, 0, s>>>(n, static_cast<float *>(out), static_cast<const float *>(x), step, seed, threshold, static_cast<float>(scale));
  else
    dropout_kernel<double><<<grid_for(n), kBlock, 0, s>>>(n, static_cast<double *>(out), static_cast<const double *>(x), step, seed, threshold, scale);
}

void launch_embedding(cudaStream_t s, int dtype, int id_dtype, int64_t n_ids, int64_t v,
                      int64_t d, const void *table, const void *ids, void *out, int *err) {
  if (n_ids * d == 0) return;
  if (dtype == 0) embedding_t<float>(s, id_dtype, n_ids, v, d, table, ids, out, err);
  else embedding_t<double>(s, id_dtype, n_ids, v, d, table, ids, out, err);
}

void launch_embedding_grad(cudaStream_t s, int dtype, int id_dtype, int64_t n_ids, int64_t v,
                           int64_t d, const void *ids, const void *dy, void *out) {
  const size_t es = dtype == 0 ? 4 : 8;
  cudaMemsetAsync(out, 0, static_cast<size_t>(v * d) * es, s);
  if (n_ids * d == 0) return;
  if (dtype == 0) embedding_grad_t<float>(s, id_dtype, n_ids, v, d, ids, dy, out);
  else embedding_grad_t<double>(s, id_dtype, n_ids, v, d, ids, dy, out);
}

void launch_max_pool_grad(cudaStream_t s, int dtype, const PoolGeom &g, const void *x,
                          const void *dy, void *dx) {
  const size_t es = dtype == 0 ? 4 : 8;
  cudaMemsetAsync(dx, 0, static_cast<size_t>(g.n * g.c * g.h * g.w) * es, s);
  const int64_t n = g.n * g.c * g.ho * g.wo;
  if (n == 0) return;
  if (dtype == 0)
    max_pool_grad_kernel<float><<<grid_for(n), kBlock, 0, s>>>(g, static_cast<const float *>(x), static_cast<const float *>(dy), static_cast<float *>(dx));
  else
    max_pool_grad_kernel<double><<<grid_for(n), kBlock, 0, s>>>(g, static_cast<const double *>(x), static_cast<const double *>(dy), static_cast<double *>(dx));
}

void launch_bn_grad_gamma(cudaStream_t s, int dtype, int64_t n, int64_t c, int64_t sp,
                          double eps, const void *x, const void *dy, void *dgamma) {
  if (c == 0) return;
  if (dtype == 0)
    bn_grad_gamma_kernel<float><<<row_blocks(c), kBlock, 0, s>>>(n, c, sp, float(eps), static_cast<const float *>(x), static_cast<const float *>(dy), static_cast<float *>(dgamma));
  else
    bn_grad_gamma_kernel<double><<<row_blocks(c), kBlock, 0, s>>>(n, c, sp, eps, static_cast<const double *>(x), static_cast<const double *>(dy), static_cast<double *>(dgamma));
}

void launch_bn_inference(cudaStream_t s, int dtype, int64_t n, int64_t c, int64_t sp,
                         double eps, const void *x, const void *gamma, const void *beta,
                         const void *mean, const void *var, void *y) {
  const int64_t total = n * c * sp;
  if (total == 0) return;
  if (dtype == 0)
    bn_inference_kernel<float><<<grid_for(total), kBlock, 0, s>>>(total, c, sp, float(eps), static_cast<const float *>(x), static_cast<const float *>(gamma), static_cast<const float *>(beta), static_cast<const float *>(mean), static_cast<const float *>(var), static_cast<float *>(y));
  else
    bn_inference_kernel<double><<<grid_for(total), kBlock, 0, s>>>(total, c, sp, eps, static_cast<const double *>(x), static_cast<const double *>(gamma), static_cast<const double *>(beta), static_cast<const double *>(mean), static_cast<const double *>(var), static_cast<double *>(y));
}

// The layer-norm row kernels (layer_norm, layer_norm_grad_input): one block per row of d, three
// inputs and one output.
template <class T>
using LnRowKernel = void (*)(int64_t, int64_t, T, const T *, const T *, const T *, T *);

template <class T>
void launch_ln_rows(cudaStream_t s, LnRowKernel<T> k, int64_t rows, int64_t d, double eps,
                    const void *a, const void *b, const void *c, void *y) {
  k<<<row_blocks(rows), kBlock, 0, s>>>(rows, d, T(eps), static_cast<const T *>(a),
                                        static_cast<const T *>(b), static_cast<const T *>(c),
                                        static_cast<T *>(y));
}

void launch_layer_norm(cudaStream_t s, int dtype, int64_t rows, int64_t d, double eps,
                       const void *x, const void *gamma, const void *beta, void *y) {
  if (rows * d == 0) return;
  if (dtype == 0) launch_ln_rows<float>(s, layer_norm_kernel<float>, rows, d, eps, x, gamma, beta, y);
  else launch_ln_rows<double>(s, layer_norm_kernel<double>, rows, d, eps, x, gamma, beta, y);
}

void launch_layer_norm_grad_input(cudaStream_t s, int dtype, int64_t rows, int64_t d,
                                  double eps, const void *x, const void *gamma, const void *dy,
                                  void *dx) {
  if (rows * d == 0) return;
  if (dtype == 0)
    launch_ln_rows<float>(s, layer_norm_grad_input_kernel<float>, rows, d, eps, x, gamma, dy, dx);
  else
    launch_ln_rows<double>(s, layer_norm_grad_input_kernel<double>, rows, d, eps, x, gamma, dy, dx);
}

void launch_layer_norm_grad_gamma(cudaStream_t s, int dtype, int64_t rows, int64_t d,
                                  double eps, const void *x, const void *dy, void *stats,
                                  void *dgamma) {
  if (d == 0) return;
  const size_t es = dtype == 0 ? 4 : 8;
  if (rows == 0) {
    cudaMemsetAsync(dgamma, 0, static_cast<size_t>(d) * es, s);
    return;
  }
  if (dtype == 0) {
    layer_norm_stats_kernel<float><<<row_blocks(rows), kBlock, 0, s>>>(rows, d, float(eps), static_cast<const float *>(x), static_cast<float *>(stats));
    layer_norm_grad_gamma_kernel<float><<<grid_for(d), kBlock, 0, s>>>(rows, d, static_cast<const float *>(x), static_cast<const float *>(dy), static_cast<const float *>(stats), static_cast<float *>(dgamma));
  } else {
    layer_norm_stats_kernel<double><<<row_blocks(rows), kBlock, 0, s>>>(rows, d, eps, static_cast<const double *>(x), static_cast<double *>(stats));
    layer_norm_grad_gamma_kernel<double><<<grid_for(d), kBlock, 0, s>>>(rows, d, static_cast<const double *>(x), static_cast<const double *>(dy), static_cast<const double *>(stats), static_cast<double *>(dgamma));
  }
}

}  // namespace ctn_cuda
