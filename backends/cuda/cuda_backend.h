// Internal declarations shared by the CUDA backend's host files. Nothing here crosses the ABI.
//
// The plugin links the CUDA runtime statically (cudart_static: it dlopens libcuda.so.1 itself on
// first use) and reaches cuBLAS and cuDNN through dlopen-ed function tables, so the .so loads on
// any machine; init reports "unavailable: <reason>" when the driver, a GPU or a library is absent.
#ifndef CTN_CUDA_BACKEND_H
#define CTN_CUDA_BACKEND_H

#include <chutney/backend.h>
#include <chutney/ops.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include "../common/kernel_util.h"

namespace ctn_cuda {

// Shared descriptor helpers and kernel-maker scaffolding (backends/common/desc_util.h,
// kernel_util.h).
using namespace ctn_backend_util;

// ---- dlopen-ed libraries --------------------------------------------------------------------
// Each table entry has the exact type of the header's declaration (decltype), so a signature
// change in a new toolkit is a compile error here rather than a crash at run time.
#define CTN_CUBLAS_FUNCS(X)                                                                    \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetWorkspace_v2)        \
  X(cublasSetMathMode) X(cublasGetStatusString)                  \
  X(cublasGetVersion_v2)

#define CTN_CUDNN_FUNCS(X)                                                                     \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)   \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor) \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor) \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)                       \
  X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)                              \
  X(cudnnDestroyConvolutionDescriptor)                                                         \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionForwardWorkspaceSize)         \
  X(cudnnConvolutionForward)                                                                   \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                                               \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize) X(cudnnConvolutionBackwardData)              \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                             \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionBackwardFilter)          \
  X(cudnnCreatePoolingDescriptor) X(cudnnSetPooling2dDescriptor)                               \
  X(cudnnDestroyPoolingDescriptor) X(cudnnPoolingForward) X(cudnnPoolingBackward)              \
  X(cudnnDeriveBNTensorDescriptor) X(cudnnBatchNormalizationForwardTraining)                   \
  X(cudnnBatchNormalizationBackward)

#define CTN_DECLARE_FN(f) decltype(&::f) f = nullptr;

// cublasGemmStridedBatchedEx has a C++ overload (legacy cudaDataType compute type): the C entry
// point is named by its exact type.
using GemmStridedBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
    const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long,
    const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,
    cublasGemmAlgo_t);

struct CublasApi {
  void *lib = nullptr;
  CTN_CUBLAS_FUNCS(CTN_DECLARE_FN)
  GemmStridedBatchedExFn cublasGemmStridedBatchedEx = nullptr;
};

struct CudnnApi {
  void *lib = nullptr;
  CTN_CUDNN_FUNCS(CTN_DECLARE_FN)
};

#undef CTN_DECLARE_FN

// Opens `names` in turn and resolves every symbol; on failure returns false with `why` set
// ("libcudnn.so.9: cannot open shared object file..." or "missing symbol cudnnFoo").
bool load_cublas(CublasApi *api, std::string *why);
bool load_cudnn(CudnnApi *api, std::string *why);
void unload_cublas(CublasApi *api);
void unload_cudnn(CudnnApi *api);
// True when libcuda.so.1 can be opened; the handle stays open in *handle until shutdown.
bool probe_driver(void **handle, std::string *why);

// ---- the backend ----------------------------------------------------------------------------
enum class Placement { kAlways, kAuto };

struct Backend {
  const ctn_host_api *host = nullptr;
  int device = 0;
  cudaDeviceProp prop{};
  cudaStream_t stream = nullptr;
  void *driver = nullptr;
  CublasApi cublas;
  CudnnApi cudnn;
  bool have_cublas = false, have_cudnn = false;
  std::string cublas_why, cudnn_why;  // why a library is missing: ops needing it decline
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
  void *blas_workspace = nullptr;  // cuBLAS must not allocate while a graph is captured
  // Kernels that find bad data (a label or id out of range) cannot fail synchronously: they
  // record a code in this mapped host word, and synchronize() turns it into an error.
  int *err_host = nullptr;
  int *err_dev = nullptr;
  // Pinned staging for upload/download of pageable host memory.
  void *pinned = nullptr;
  size_t pinned_bytes = 0;
  bool tf32 = false;
  bool graphs = true;
  Placement placement = Placement::kAuto;
  std::string description;
};

// Device error codes written by kernels into Backend::err_dev (first one wins).
enum DeviceError : int {
  kDevErrNone = 0,
  kDevErrLabel = 1,      // cross_entropy: label outside [0, C)
  kDevErrEmbedding = 2,  // embedding: id outside [0, V)
  kDevErrStep = 3,       // adam_apply: step < 1
  kDevErrOpCode = 4,     // an elementwise kernel got an op code it has no case for
};

// Common head of every kernel state; `release` deletes through the virtual destructor.
struct KernelBase {
  Backend *be = nullptr;
  const char *op = "";
  virtual ~KernelBase() = default;
};

void kernel_release(void *state);
void kernel_set(ctn_kernel *kernel, ctn_kernel_fn fn, KernelBase *state, uint32_t flags = 0,
                uint64_t workspace = 0);

// Turns the status of the launches just made into a chutney status (launch errors surface
// through cudaGetLastError; an error inside a running kernel shows at synchronize).
ctn_status check_launch(Backend *be, const char *op);
ctn_status cuda_fail(Backend *be, cudaError_t e, const char *what);
// The "ctn_cuda_interop" extra (interop.cpp, abi/chutney/cuda.h); nullptr for other names.
void *interop_proc(const char *name);
ctn_status cublas_fail(Backend *be, cublasStatus_t s, const char *what);
ctn_status cudnn_fail(Backend *be, cudnnStatus_t s, const char *what);



// Device address of a descriptor's first element (kernels get a cudaMalloc pointer + offset).
template <class T = void>
inline T *dptr(const ctn_tensor_desc &d) {
  return reinterpret_cast<T *>(static_cast<char *>(d.data) + d.offset);
}


// Right-aligned numpy broadcast of `in` to `out`: element strides indexed by out's axes (0 on
// broadcast axes). False when they do not broadcast.

// get_kernel makers, one per op family: they set *handled when the op is theirs and then
// return OK with *out filled or an error with a reason (CTN_ERR_UNSUPPORTED lets the op fall to
// the next backend).
using Maker = ctn_status (*)(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);
ctn_status make_elementwise_kernel(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);
ctn_status make_reduce_kernel(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);
ctn_status make_shape_kernel(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);
ctn_status make_matmul_kernel(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);
ctn_status make_dnn_kernel(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);
ctn_status make_train_kernel(Backend *, const ctn_op_signature *, ctn_kernel *, bool *);

}  // namespace ctn_cuda

#endif
