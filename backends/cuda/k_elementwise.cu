// Elementwise device kernels: unary, binary with broadcasting, comparisons, where, cast and the
// matmul epilogue. One kernel per element type with the op chosen by a switch on a uniform
// value: every thread of a launch takes the same branch, so the switch costs next to nothing
// while the number of template instances (and nvcc's compile time) stays small.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda_ew_ops.h"
#include "cuda_kernels.h"
#include "k_common.cuh"

namespace ctn_cuda {
namespace {

// The switches hold one case per CTN_EW_* code of the generated list (cuda_ew_ops.h: the
// arithmetic cases are CTN_EW_CASES_*, generated from the formulas of backends/common/ew_ops.py)
// and no default: a code without a case (an integer dtype for a float-only op, or a code the list
// does not hold) sets *bad, and the kernel reports kDevErrOpCode (cuda_backend.h) at synchronize.
template <class T>
__device__ __forceinline__ T unary_op(int op, T x, T f0, T f1, bool *bad) {
  switch (op) { CTN_EW_CASES_UNARY_INT(x, f0, f1) }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) { CTN_EW_CASES_UNARY_FLOAT(x, f0, f1) }
  }
  *bad = true;
  return T(0);
}

template <class T>
__device__ __forceinline__ T binary_op(int op, T a, T b, T f0, T f1, bool *bad) {
  switch (op) { CTN_EW_CASES_BINARY_INT(a, b, f0, f1) }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      CTN_EW_CASES_BINARY_FLOAT(a, b, f0, f1)
      CTN_EW_CASES_GRAD_FLOAT(a, b, f0, f1)
    }
  }
  *bad = true;
  return T(0);
}

template <class T>
__device__ __forceinline__ uint8_t compare_op(int op, T a, T b, bool *bad) {
  switch (op) {
    case CTN_EW_EQ: return a == b;
    case CTN_EW_NE: return a != b;
    case CTN_EW_LT: return a < b;
    case CTN_EW_LE: return a <= b;
    case CTN_EW_GT: return a > b;
    case CTN_EW_GE: return a >= b;
  }
  *bad = true;
  return 0;
}

constexpr int kDevErrOpCode = 4;  // cuda_backend.h DeviceError

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
__global__ void unary_kernel(EwGeom g, int op, T *out, const T *a, T f0, T f1, int *err) {
  bool bad = false;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = unary_op<T>(op, a[ew_index(g, 0, i)], f0, f1, &bad);
  if (bad) set_device_error(err, kDevErrOpCode);
}

template <class T>
__global__ void binary_kernel(EwGeom g, int op, T *out, const T *a, const T *b, T f0, T f1,
                              int *err) {
  bool bad = false;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = binary_op<T>(op, a[ew_index(g, 0, i)], b[ew_index(g, 1, i)], f0, f1, &bad);
  if (bad) set_device_error(err, kDevErrOpCode);
}

template <class T>
__global__ void compare_kernel(EwGeom g, int op, uint8_t *out, const T *a, const T *b, int *err) {
  bool bad = false;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = compare_op<T>(op, a[ew_index(g, 0, i)], b[ew_index(g, 1, i)], &bad);
  if (bad) set_device_error(err, kDevErrOpCode);
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
                  double f0, double f1, int *err) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n), block(kBlock);
  switch (dtype) {
    case 0: unary_kernel<float><<<grid, block, 0, s>>>(g, op, static_cast<float *>(out), static_cast<const float *>(a), float(f0), float(f1), err); break;
    case 1: unary_kernel<double><<<grid, block, 0, s>>>(g, op, static_cast<double *>(out), static_cast<const double *>(a), f0, f1, err); break;
    case 2: unary_kernel<int32_t><<<grid, block, 0, s>>>(g, op, static_cast<int32_t *>(out), static_cast<const int32_t *>(a), 0, 0, err); break;
    default: unary_kernel<int64_t><<<grid, block, 0, s>>>(g, op, static_cast<int64_t *>(out), static_cast<const int64_t *>(a), 0, 0, err); break;
  }
}

void launch_binary(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                   const void *b, double f0, double f1, int *err) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n), block(kBlock);
  switch (dtype) {
    case 0: binary_kernel<float><<<grid, block, 0, s>>>(g, op, static_cast<float *>(out), static_cast<const float *>(a), static_cast<const float *>(b), float(f0), float(f1), err); break;
    case 1: binary_kernel<double><<<grid, block, 0, s>>>(g, op, static_cast<double *>(out), static_cast<const double *>(a), static_cast<const double *>(b), f0, f1, err); break;
    case 2: binary_kernel<int32_t><<<grid, block, 0, s>>>(g, op, static_cast<int32_t *>(out), static_cast<const int32_t *>(a), static_cast<const int32_t *>(b), 0, 0, err); break;
    default: binary_kernel<int64_t><<<grid, block, 0, s>>>(g, op, static_cast<int64_t *>(out), static_cast<const int64_t *>(a), static_cast<const int64_t *>(b), 0, 0, err); break;
  }
}

void launch_compare(cudaStream_t s, int op, int dtype, const EwGeom &g, void *out, const void *a,
                    const void *b, int *err) {
  if (g.n == 0) return;
  const dim3 grid = grid_for(g.n), block(kBlock);
  uint8_t *o = static_cast<uint8_t *>(out);
  switch (dtype) {
    case 0: compare_kernel<float><<<grid, block, 0, s>>>(g, op, o, static_cast<const float *>(a), static_cast<const float *>(b), err); break;
    case 1: compare_kernel<double><<<grid, block, 0, s>>>(g, op, o, static_cast<const double *>(a), static_cast<const double *>(b), err); break;
    case 2: compare_kernel<int32_t><<<grid, block, 0, s>>>(g, op, o, static_cast<const int32_t *>(a), static_cast<const int32_t *>(b), err); break;
    case 3: compare_kernel<int64_t><<<grid, block, 0, s>>>(g, op, o, static_cast<const int64_t *>(a), static_cast<const int64_t *>(b), err); break;
    default: compare_kernel<uint8_t><<<grid, block, 0, s>>>(g, op, o, static_cast<const uint8_t *>(a), static_cast<const uint8_t *>(b), err); break;
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
