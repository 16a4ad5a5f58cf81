// Device helpers shared by the .cu files: launch geometry and block-wide reductions.
#ifndef CTN_CUDA_K_COMMON_CUH
#define CTN_CUDA_K_COMMON_CUH

#include <cuda_runtime.h>

#include <cstdint>

namespace ctn_cuda {

constexpr int kBlock = 256;

// Grid of a grid-stride loop over n items: enough blocks to fill an H100 several times over,
// capped so that huge tensors loop instead of launching millions of blocks.
inline dim3 grid_for(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  if (b > 65536) b = 65536;
  if (b < 1) b = 1;
  return dim3(static_cast<unsigned>(b));
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = (w > v || w != w) ? w : v;
  }
  return v;
}

// Block-wide sum / max for blockDim.x a multiple of 32 (<= 1024); every thread gets the result.
// `sh` holds 32 values of T. Safe to call repeatedly (it syncs before reusing `sh`).
template <class T>
__device__ __forceinline__ T block_sum(T v, T *sh) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : T(0);
  return warp_sum(v);
}

template <class T>
__device__ __forceinline__ T block_max(T v, T *sh, T lowest) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : lowest;
  return warp_max(v);
}

// Records the first device error code (see DeviceError in cuda_backend.h).
__device__ __forceinline__ void set_device_error(int *err, int code) {
  if (err) atomicCAS(err, 0, code);
}

}  // namespace ctn_cuda

#endif
