/* chutney: exchanging tensors through DLPack 1.1. C99.
 *
 * The DLPack definitions below are written for chutney from the DLPack 1.1 specification (the
 * versioned DLManagedTensorVersioned; Debian's libdlpack-dev is 0.6, which predates it). They
 * are guarded by DLPack's own include guard, so a program that includes the upstream dlpack.h
 * (1.0 or newer) first keeps its definitions; the layouts are identical and pinned by static
 * asserts in tests/abi/c11_headers.c and core/capi/capi_dlpack.cpp.
 *
 * The conventions of chutney.h apply: every function returns a ctn_status (message from
 * ctn_last_error()), nothing aborts or throws.
 */
#ifndef CHUTNEY_DLPACK_H
#define CHUTNEY_DLPACK_H

#include "chutney.h"

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;

typedef struct {
  uint8_t code;   /* DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;     /* in elements; NULL means compact row-major */
  uint64_t byte_offset; /* from data to the first element */
} DLTensor;

/* The unversioned (pre-1.0) managed tensor, for completeness; chutney uses the versioned one. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLPACK_DLPACK_H_ */

#ifdef __cplusplus
extern "C" {
#endif

/* Wraps a DLPack tensor without copying. Accepted: version.major 1 (any minor), a CPU device
 * (kDLCPU, kDLCUDAHost, kDLROCMHost), lanes 1 and a dtype chutney has: float 32/64, int 32/64,
 * uint 8, bool 8 (also kDLUInt 8 read as uint8); since 1.5 float 16 (CTN_F16), bfloat 16
 * (CTN_BF16) and int 8 (CTN_I8), which ctn_tensor_to_dlpack exports the same way. Any element
 * strides (NULL: compact), any byte offset. Ownership of `managed` passes to chutney on every
 * path: on success its deleter is called exactly once, when the last chutney view of the
 * storage goes (the returned tensor and any slice/permute/reshape view of it, graphs' constants
 * copy); on failure it is called before this function returns. With DLPACK_FLAG_BITMASK_READ_ONLY the tensor and its views refuse
 * ctn_tensor_write and being a ctn_plan_run output (CTN_ERR_STATE); the pointer of
 * ctn_tensor_data is then for reading only.
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL, a NULL deleter is fine), CTN_ERR_UNSUPPORTED (major
 * version, device, lanes, dtype, more than CTN_MAX_DIMS dims; the message names the value).
 * Thread-safety: the deleter may run on whichever thread releases the last view. since 1.2 */
CTN_API ctn_status ctn_tensor_from_dlpack(DLManagedTensorVersioned *managed, ctn_tensor **out);

/* Request a compact row-major export (copying a non-contiguous view). */
#define CTN_DLPACK_CONTIGUOUS 1u

/* Exports `t` as a DLPack 1.1 tensor sharing its storage (no copy): the result keeps the
 * storage alive until the consumer calls its deleter (exactly once; the tensor handle itself may
 * be released before that). Version 1.1, device kDLCPU, the tensor's own strides and offset.
 * With CTN_DLPACK_CONTIGUOUS a non-contiguous tensor is copied first and the result carries
 * DLPACK_FLAG_BITMASK_IS_COPIED; a tensor imported read-only exports READ_ONLY.
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL, unknown flags). since 1.2 */
CTN_API ctn_status ctn_tensor_to_dlpack(const ctn_tensor *t, uint32_t flags, DLManagedTensorVersioned **out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_DLPACK_H */
