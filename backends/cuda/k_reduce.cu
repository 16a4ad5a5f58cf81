// Reductions (sum/mean/max over an axis mask), the softmax family and cross-entropy.
// Floating sums accumulate in the element type with a tree (block) reduction, which keeps f32
// within the suite's error bound; integer sums accumulate in int64.
#include <cstdint>
#include <type_traits>

#include "cuda_kernels.h"
#include "k_common.cuh"

namespace ctn_cuda {
namespace {

template <class T> struct Acc { using type = T; };
template <> struct Acc<int32_t> { using type = int64_t; };

template <class T>
__device__ __forceinline__ T lowest_of() {
  if constexpr (std::is_floating_point_v<T>) return -INFINITY;
  else if constexpr (std::is_same_v<T, int32_t>) return INT32_MIN;
  else return INT64_MIN;
}

__device__ __forceinline__ int64_t red_offset(const int64_t *shape, const int64_t *str, int nd,
                                              int64_t i) {
  int64_t off = 0;
  for (int k = nd - 1; k >= 0; --k) {
    int64_t q = i / shape[k];
    off += (i - q * shape[k]) * str[k];
    i = q;
  }
  return off;
}

template <class A>
__device__ __forceinline__ A combine(int kind, A a, A b) {
  if (kind == 2) return (b > a || b != b) ? b : a;
  return a + b;
}

// One block per output element: long reductions (the whole tensor, a softmax row...).
template <class T>
__global__ void reduce_block_kernel(RedGeom g, int kind, T *out, const T *in) {
  using A = typename Acc<T>::type;
  __shared__ A sh[32];
  for (int64_t o = blockIdx.x; o < g.n_out; o += gridDim.x) {
    const T *base = in + red_offset(g.kshape, g.kstr, g.nk, o);
    A acc = kind == 2 ? A(lowest_of<T>()) : A(0);
    for (int64_t r = threadIdx.x; r < g.n_red; r += blockDim.x)
      acc = combine<A>(kind, acc, A(base[red_offset(g.rshape, g.rstr, g.nr, r)]));
    acc = kind == 2 ? block_max<A>(acc, sh, A(lowest_of<T>())) : block_sum<A>(acc, sh);
    if (threadIdx.x == 0) {
      if (kind == 1) acc = acc / A(g.n_red);
      out[o] = T(acc);
    }
  }
}

// One thread per output element: many short reductions (adjacent threads read adjacent
// columns, so reducing the leading axis of a matrix is coalesced).
template <class T>
__global__ void reduce_thread_kernel(RedGeom g, int kind, T *out, const T *in) {
  using A = typename Acc<T>::type;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < g.n_out;
       o += int64_t(gridDim.x) * blockDim.x) {
    const T *base = in + red_offset(g.kshape, g.kstr, g.nk, o);
    A acc = kind == 2 ? A(lowest_of<T>()) : A(0);
    for (int64_t r = 0; r < g.n_red; ++r)
      acc = combine<A>(kind, acc, A(base[red_offset(g.rshape, g.rstr, g.nr, r)]));
    if (kind == 1) acc = acc / A(g.n_red);
    out[o] = T(acc);
  }
}

template <class T>
void reduce_t(cudaStream_t s, int kind, const RedGeom &g, void *out, const void *in) {
  T *o = static_cast<T *>(out);
  const T *x = static_cast<const T *>(in);
  // Few outputs with long reductions: a block each; otherwise a thread each.
  if (g.n_red >= 64 && g.n_out < 8192) {
    unsigned blocks = static_cast<unsigned>(g.n_out < 65536 ? g.n_out : 65536);
    reduce_block_kernel<T><<<blocks, kBlock, 0, s>>>(g, kind, o, x);
  } else {
    reduce_thread_kernel<T><<<grid_for(g.n_out), kBlock, 0, s>>>(g, kind, o, x);
  }
}

// ---- softmax family ---------------------------------------------------------------------------
// mode 0/1: a = x; mode 2/3: a = y, b = dy.
template <class T>
__device__ __forceinline__ void softmax_row(int mode, int64_t len, int64_t inner, T *out,
                                            const T *a, const T *b, int64_t tid, int64_t nthr,
                                            T *sh, bool block) {
  auto red_sum = [&](T v) { return block ? block_sum<T>(v, sh) : v; };
  auto red_max = [&](T v) { return block ? block_max<T>(v, sh, T(-INFINITY)) : v; };
  if (mode <= 1) {
    T m = T(-INFINITY);
    for (int64_t k = tid; k < len; k += nthr) {
      T v = a[k * inner];
      m = (v > m || v != v) ? v : m;
    }
    m = red_max(m);
    T sum = T(0);
    for (int64_t k = tid; k < len; k += nthr) sum += exp(a[k * inner] - m);
    sum = red_sum(sum);
    if (mode == 0) {
      T inv = T(1) / sum;
      for (int64_t k = tid; k < len; k += nthr) out[k * inner] = exp(a[k * inner] - m) * inv;
    } else {
      T lse = m + log(sum);
      for (int64_t k = tid; k < len; k += nthr) out[k * inner] = a[k * inner] - lse;
    }
  } else if (mode == 2) {  // y * (dy - sum(dy * y))
    T dot = T(0);
    for (int64_t k = tid; k < len; k += nthr) dot += a[k * inner] * b[k * inner];
    dot = red_sum(dot);
    for (int64_t k = tid; k < len; k += nthr)
      out[k * inner] = a[k * inner] * (b[k * inner] - dot);
  } else {  // dy - exp(y) * sum(dy)
    T sum = T(0);
    for (int64_t k = tid; k < len; k += nthr) sum += b[k * inner];
    sum = red_sum(sum);
    for (int64_t k = tid; k < len; k += nthr)
      out[k * inner] = b[k * inner] - exp(a[k * inner]) * sum;
  }
}

// inner == 1: one block per contiguous row.
template <class T>
__global__ void softmax_block_kernel(int mode, int64_t rows, int64_t len, T *out, const T *a,
                                     const T *b) {
  __shared__ T sh[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * len;
    softmax_row<T>(mode, len, 1, out + base, a + base, b ? b + base : nullptr, threadIdx.x,
                   blockDim.x, sh, true);
  }
}

// inner > 1: one thread per (outer, inner) row; neighbouring threads read neighbouring columns.
template <class T>
__global__ void softmax_thread_kernel(int mode, int64_t outer, int64_t len, int64_t inner,
                                      T *out, const T *a, const T *b) {
  const int64_t rows = outer * inner;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (r / inner) * len * inner + r % inner;
    softmax_row<T>(mode, len, inner, out + base, a + base, b ? b + base : nullptr, 0, 1,
                   nullptr, false);
  }
}

template <class T>
void softmax_t(cudaStream_t s, int mode, int64_t outer, int64_t len, int64_t inner, void *out,
               const void *a, const void *b) {
  T *o = static_cast<T *>(out);
  const T *x = static_cast<const T *>(a);
  const T *y = static_cast<const T *>(b);
  if (inner == 1) {
    unsigned blocks = static_cast<unsigned>(outer < 65536 ? outer : 65536);
    softmax_block_kernel<T><<<blocks, kBlock, 0, s>>>(mode, outer, len, o, x, y);
  } else {
    softmax_thread_kernel<T><<<grid_for(outer * inner), kBlock, 0, s>>>(mode, outer, len, inner,
                                                                         o, x, y);
  }
}

// ---- cross-entropy ----------------------------------------------------------------------------
template <class L>
__device__ __forceinline__ bool label_at(const void *labels, int64_t r, int64_t c, int64_t *out) {
  int64_t l = static_cast<int64_t>(static_cast<const L *>(labels)[r]);
  *out = l;
  return l >= 0 && l < c;
}

// A row of c logits, reduced over the block: its max m (NaN wins) and sum of exp(x - m); every
// thread gets both.
template <class T>
__device__ void row_max_sumexp(const T *x, int64_t c, T *sh, T *m_out, T *sum_out) {
  T m = T(-INFINITY);
  for (int64_t k = threadIdx.x; k < c; k += blockDim.x) m = (x[k] > m || x[k] != x[k]) ? x[k] : m;
  m = block_max<T>(m, sh, T(-INFINITY));
  T sum = T(0);
  for (int64_t k = threadIdx.x; k < c; k += blockDim.x) sum += exp(x[k] - m);
  sum = block_sum<T>(sum, sh);
  *m_out = m;
  *sum_out = sum;
}

template <class T, class L>
__global__ void ce_rows_kernel(int64_t n, int64_t c, const T *logits, const void *labels,
                               T *rows, int *err) {
  __shared__ T sh[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T *x = logits + r * c;
    T m, sum;
    row_max_sumexp<T>(x, c, sh, &m, &sum);
    if (threadIdx.x == 0) {
      int64_t l;
      if (!label_at<L>(labels, r, c, &l)) {
        set_device_error(err, 1);
        rows[r] = T(NAN);
      } else {
        rows[r] = m + log(sum) - x[l];
      }
    }
  }
}

template <class T>
__global__ void mean_kernel(int64_t n, const T *rows, T *out) {
  __shared__ T sh[32];
  T acc = T(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += rows[i];
  acc = block_sum<T>(acc, sh);
  if (threadIdx.x == 0) out[0] = acc / T(n);
}

template <class T, class L>
__global__ void ce_grad_kernel(int64_t n, int64_t c, const T *logits, const void *labels,
                               const T *dy, T *out, int *err) {
  __shared__ T sh[32];
  const T scale = dy[0] / T(n);
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T *x = logits + r * c;
    T *o = out + r * c;
    T m, sum;
    row_max_sumexp<T>(x, c, sh, &m, &sum);
    int64_t l;
    bool ok = label_at<L>(labels, r, c, &l);
    if (!ok && threadIdx.x == 0) set_device_error(err, 1);
    const T inv = T(1) / sum;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
      o[k] = (exp(x[k] - m) * inv - (ok && k == l ? T(1) : T(0))) * scale;
  }
}

template <class T>
void ce_t(cudaStream_t s, int label_dtype, int64_t n, int64_t c, const void *logits,
          const void *labels, void *rows, void *out, int *err) {
  unsigned blocks = static_cast<unsigned>(n < 65536 ? n : 65536);
  if (blocks == 0) blocks = 1;
  const T *x = static_cast<const T *>(logits);
  T *r = static_cast<T *>(rows);
  if (n > 0) {
    if (label_dtype == 2) ce_rows_kernel<T, int32_t><<<blocks, kBlock, 0, s>>>(n, c, x, labels, r, err);
    else ce_rows_kernel<T, int64_t><<<blocks, kBlock, 0, s>>>(n, c, x, labels, r, err);
  }
  mean_kernel<T><<<1, 1024, 0, s>>>(n, r, static_cast<T *>(out));
}

template <class T>
void ce_grad_t(cudaStream_t s, int label_dtype, int64_t n, int64_t c, const void *logits,
               const void *labels, const void *dy, void *out, int *err) {
  if (n == 0) return;
  unsigned blocks = static_cast<unsigned>(n < 65536 ? n : 65536);
  const T *x = static_cast<const T *>(logits);
  const T *d = static_cast<const T *>(dy);
  T *o = static_cast<T *>(out);
  if (label_dtype == 2) ce_grad_kernel<T, int32_t><<<blocks, kBlock, 0, s>>>(n, c, x, labels, d, o, err);
  else ce_grad_kernel<T, int64_t><<<blocks, kBlock, 0, s>>>(n, c, x, labels, d, o, err);
}

}  // namespace

void launch_reduce(cudaStream_t s, int kind, int dtype, const RedGeom &g, void *out,
                   const void *in) {
  if (g.n_out == 0) return;
  switch (dtype) {
    case 0: reduce_t<float>(s, kind, g, out, in); break;
    case 1: reduce_t<double>(s, kind, g, out, in); break;
    case 2: reduce_t<int32_t>(s, kind, g, out, in); break;
    default: reduce_t<int64_t>(s, kind, g, out, in); break;
  }
}

void launch_softmax(cudaStream_t s, int mode, int dtype, int64_t outer, int64_t len,
                    int64_t inner, void *out, const void *a, const void *b) {
  if (outer * len * inner == 0) return;
  if (dtype == 0) softmax_t<float>(s, mode, outer, len, inner, out, a, b);
  else softmax_t<double>(s, mode, outer, len, inner, out, a, b);
}

void launch_cross_entropy(cudaStream_t s, int dtype, int label_dtype, int64_t n, int64_t c,
                          const void *logits, const void *labels, void *rows, void *out,
                          int *err) {
  if (dtype == 0) ce_t<float>(s, label_dtype, n, c, logits, labels, rows, out, err);
  else ce_t<double>(s, label_dtype, n, c, logits, labels, rows, out, err);
}

void launch_cross_entropy_grad(cudaStream_t s, int dtype, int label_dtype, int64_t n, int64_t c,
                               const void *logits, const void *labels, const void *dy,
                               void *out, int *err) {
  if (dtype == 0) ce_grad_t<float>(s, label_dtype, n, c, logits, labels, dy, out, err);
  else ce_grad_t<double>(s, label_dtype, n, c, logits, labels, dy, out, err);
}

}  // namespace ctn_cuda
