// Elementwise device kernels: unary, binary with broadcasting, comparisons, where, cast and the
// matmul epilogue. One kernel per element type with the op chosen by a switch on a uniform
// value: every thread of a launch takes the same branch, so the switch costs next to nothing
// while the number of template instances (and nvcc's compile time) stays small.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda_kernels.h"
#include "k_common.cuh"

namespace ctn_cuda {
namespace {

template <class T>
__device__ __forceinline__ T unary_op(int op, T x, T f0, T f1) {
  switch (op) {
    case kNeg: return -x;
    case kAbs: return x < T(0) ? T(-x) : x;
    case kSign: return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
    case kRelu: return x > T(0) ? x : T(0);
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case kExp: return exp(x);
      case kLog: return log(x);
      case kSqrt: return sqrt(x);
      case kTanh: return tanh(x);
      case kSigmoid: {
        if (x >= T(0)) return T(1) / (T(1) + exp(-x));
        T e = exp(x);
        return e / (T(1) + e);
      }
      case kGelu: return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
      case kLeakyRelu: return x > T(0) ? x : x * f0;
      case kClamp: return x < f0 ? f0 : x > f1 ? f1 : x;
      default: break;
    }
  }
  return x;
}

template <class T>
__device__ __forceinline__ T binary_op(int op, T a, T b, T f0, T f1) {
  switch (op) {
    case kAdd: return a + b;
    case kSub: return a - b;
    case kMul: return a * b;
    case kMaximum: return (a > b || a != a) ? a : b;  // NaN propagates, as on the CPU
    case kMinimum: return (a < b || a != a) ? a : b;
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case kDiv: return a / b;
      case kPow: return pow(a, b);
      case kReluGrad: return a > T(0) ? b : T(0);
      case kLeakyReluGrad: return a > T(0) ? b : b * f0;
      case kGeluGrad: {
        T cdf = T(0.5) * (T(1) + erf(a * T(0.70710678118654752440)));
        T pdf = exp(T(-0.5) * a * a) * T(0.39894228040143267794);
        return b * (cdf + a * pdf);
      }
      case kClampGrad: return (a >= f0 && a <= f1) ? b : T(0);
      case kTanhGrad: return b * (T(1) - a * a);
      case kSigmoidGrad: return b * a * (T(1) - a);
      default: break;
    }
  }
  return a;
}

template <class T>
__device__ __forceinline__ uint8_t compare_op(int op, T a, T b) {
  switch (op) {
    case kEq: return a == b;
    case kNe: return a != b;
    case kLt: return a < b;
    case kLe: return a <= b;
    case kGt: return a > b;
    default: return a >= b;
  }
}

// Offset of output element i in input j (general walk).
__device__ __forceinline__ int64_t ew_offset(const EwGeom &g, int j, int64_t i) {
  int64_t off = 0;
  for (int k = g.nd - 1; k >= 0; --k) {
    int64_t d = g.shape[k];
    int64_t q = i / d;
    off += (i - q * d) * g.str[j][k];
    i = q;
  }
  return off;
}

__device__ __forceinline__ int64_t ew_index(const EwGeom &g, int j, int64_t i) {
  if (g.general) return ew_offset(g, j, i);
  return g.mode[j] == 0 ? i : 0;
}

template <class T>
__global__ void unary_kernel(EwGeom g, int op, T *out, const T *a, T f0, T f1) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = unary_op<T>(op, a[ew_index(g, 0, i)], f0, f1);
}

template <class T>
__global__ void binary_kernel(EwGeom g, int op, T *out, const T *a, const T *b, T f0, T f1) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = binary_op<T>(op, a[ew_index(g, 0, i)], b[ew_index(g, 1, i)], f0, f1);
}

template <class T>
__global__ void compare_kernel(EwGeom g, int op, uint8_t *out, const T *a, const T *b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = compare_op<T>(op, a[ew_index(g, 0, i)], b[ew_index(g, 1, i)]);
}

template <class T>
__global__ void where_kernel(EwGeom g, T *out, const uint8_t *c, const T *a, const T *b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = c[ew_index(g, 0, i)] ? a[ew_index(g, 1, i)] : b[ew_index(g, 2, i)];
}

template <class TO, class TI>
__device__ __forceinline__ TO cast_one(TI x) {
  if constexpr (std::is_same_v<TO, bool>) {
    return x != TI(0);
  } else if constexpr (std::is_floating_point_v<TI> && std::is_integral_v<TO>) {
    if (x != x) return TO(0);
    constexpr TO lo = std::numeric_limits<TO>::min(), hi = std::numeric_limits<TO>::max();
    if (x <= TI(lo)) return lo;
    if (x >= TI(hi)) return hi;
    return static_cast<TO>(x);
  } else {
    return static_cast<TO>(x);
  }
}

template <class TO, class TI>
__global__ void cast_kernel(int64_t n, TO *out, const TI *in) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = cast_one<TO, TI>(in[i]);
}

template <class T>
__global__ void bias_act_kernel(int64_t rows, int64_t cols, T *out, const T *bias, int act) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    T v = out[i] + bias[i % cols];
    if (act == 1) v = v > T(0) ? v : T(0);
    else if (act == 2) v = T(0.5) * v * (T(1) + erf(v * T(0.70710678118654752440)));
    out[i] = v;
  }
}

template <class TO>
void cast_from(cudaStream_t s, int from, int64_t n, void *out, const void *in) {
  const dim3 grid = grid_for(n), block(kBlock);
  TO *o = static_cast<TO *>(out);
  switch (from) {
    case 0: cast_kernel<TO, float><<<grid, block, 0, s>>>(n, o, static_cast<const float *>(in)); break;
    case 1: cast_kernel<TO, double><<<grid, block, 0, s>>>(n, o, static_cast<const double *>(in)); break;
    case 2: cast_kernel<TO, int32_t><<<grid, block, 0, s>>>(n, o, static_cast<const int32_t *>(in)); break;
    case 3: cast_kernel<TO, int64_t><<<grid, block, 0, s>>>(n, o, static_cast<const int64_t *>(in)); break;
    case 4: cast_kernel<TO, uint8_t><<<grid, block, 0, s>>>(n, o, static_cast<const uint8_t *>(in)); break;
    default: cast_kernel<TO, bool><<<grid, block, 0, s>>>(n, o, static_cast<const bool *>(in)); break;
  }
}

}  // namespace

void launch_unary(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                  double f0, double f1) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n), block(kBlock);
  switch (dtype) {
    case 0: unary_kernel<float><<<grid, block, 0, s>>>(g, op, static_cast<float *>(out), static_cast<const float *>(a), float(f0), float(f1)); break;
    case 1: unary_kernel<double><<<grid, block, 0, s>>>(g, op, static_cast<double *>(out), static_cast<const double *>(a), f0, f1); break;
    case 2: unary_kernel<int32_t><<<grid, block, 0, s>>>(g, op, static_cast<int32_t *>(out), static_cast<const int32_t *>(a), 0, 0); break;
    default: unary_kernel<int64_t><<<grid, block, 0, s>>>(g, op, static_cast<int64_t *>(out), static_cast<const int64_t *>(a), 0, 0); break;
  }
}

void launch_binary(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                   const void *b, double f0, double f1) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n), block(kBlock);
  switch (dtype) {
    case 0: binary_kernel<float><<<grid, block, 0, s>>>(g, op, static_cast<float *>(out), static_cast<const float *>(a), static_cast<const float *>(b), float(f0), float(f1)); break;
    case 1: binary_kernel<double><<<grid, block, 0, s>>>(g, op, static_cast<double *>(out), static_cast<const double *>(a), static_cast<const double *>(b), f0, f1); break;
    case 2: binary_kernel<int32_t><<<grid, block, 0, s>>>(g, op, static_cast<int32_t *>(out), static_cast<const int32_t *>(a), static_cast<const int32_t *>(b), 0, 0); break;
    default: binary_kernel<int64_t><<<grid, block, 0, s>>>(g, op, static_cast<int64_t *>(out), static_cast<const int64_t *>(a), static_cast<const int64_t *>(b), 0, 0); break;
  }
}

void launch_compare(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                    const void *b) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n), block(kBlock);
  uint8_t *o = static_cast<uint8_t *>(out);
  switch (dtype) {
    case 0: compare_kernel<float><<<grid, block, 0, s>>>(g, op, o, static_cast<const float *>(a), static_cast<const float *>(b)); break;
    case 1: compare_kernel<double><<<grid, block, 0, s>>>(g, op, o, static_cast<const double *>(a), static_cast<const double *>(b)); break;
    case 2: compare_kernel<int32_t><<<grid, block, 0, s>>>(g, op, o, static_cast<const int32_t *>(a), static_cast<const int32_t *>(b)); break;
    case 3: compare_kernel<int64_t><<<grid, block, 0, s>>>(g, op, o, static_cast<const int64_t *>(a), static_cast<const int64_t *>(b)); break;
    default: compare_kernel<uint8_t><<<grid, block, 0, s>>>(g, op, o, static_cast<const uint8_t *>(a), static_cast<const uint8_t *>(b)); break;
  }
}

void launch_where(cudaStream_t s, int elem_size, const EwGeom &g, void *out, const void *cond,
                  const void *a, const void *b) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n), block(kBlock);
  const uint8_t *c = static_cast<const uint8_t *>(cond);
  switch (elem_size) {
    case 1: where_kernel<uint8_t><<<grid, block, 0, s>>>(g, static_cast<uint8_t *>(out), c, static_cast<const uint8_t *>(a), static_cast<const uint8_t *>(b)); break;
    case 4: where_kernel<uint32_t><<<grid, block, 0, s>>>(g, static_cast<uint32_t *>(out), c, static_cast<const uint32_t *>(a), static_cast<const uint32_t *>(b)); break;
    default: where_kernel<uint64_t><<<grid, block, 0, s>>>(g, static_cast<uint64_t *>(out), c, static_cast<const uint64_t *>(a), static_cast<const uint64_t *>(b)); break;
  }
}

void launch_cast(cudaStream_t s, int from, int to, int64_t n, void *out, const void *in) {
  if (n == 0) return;
  switch (to) {
    case 0: cast_from<float>(s, from, n, out, in); break;
    case 1: cast_from<double>(s, from, n, out, in); break;
    case 2: cast_from<int32_t>(s, from, n, out, in); break;
    case 3: cast_from<int64_t>(s, from, n, out, in); break;
    case 4: cast_from<uint8_t>(s, from, n, out, in); break;
    default: cast_from<bool>(s, from, n, out, in); break;
  }
}

void launch_bias_act(cudaStream_t s, int dtype, int64_t rows, int64_t cols, void *out,
                     const void *bias, int act) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  const dim3 grid = grid_for(n), block(kBlock);
  if (dtype == 0)
    bias_act_kernel<float><<<grid, block, 0, s>>>(rows, cols, static_cast<float *>(out), static_cast<const float *>(bias), act);
  else
    bias_act_kernel<double><<<grid, block, 0, s>>>(rows, cols, static_cast<double *>(out), static_cast<const double *>(bias), act);
}

}  // namespace ctn_cuda
