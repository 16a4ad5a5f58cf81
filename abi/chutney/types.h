/* chutney: types shared by the user API, backend plugins and op libraries. C99.
 *
 * Everything here is part of ABI v1: existing fields never move (tests/abi/c11_headers.c pins
 * every offset with static asserts); new enum values and attribute meanings may be added in a
 * minor version.
 */
#ifndef CHUTNEY_TYPES_H
#define CHUTNEY_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Export / visibility
 * ------------------------------------------------------------------------------------------- */
#if defined(_WIN32)
#define CTN_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define CTN_EXPORT __attribute__((visibility("default")))
#else
#define CTN_EXPORT
#endif

#ifdef CTN_BUILDING_LIBRARY
#define CTN_API CTN_EXPORT
#else
#define CTN_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Status codes
 *
 * Every function of the C ABI returns a ctn_status: 0 is success; on failure a human-readable
 * message is available from ctn_last_error() on the calling thread (user API) or was recorded
 * through ctn_host_api.set_error (plugins). Out-parameters are left untouched on failure.
 * ------------------------------------------------------------------------------------------- */
typedef int32_t ctn_status;

enum {
  CTN_OK = 0,
  CTN_ERR_INVALID_ARGUMENT = 1, /* a bad value: null handle, unknown name, out-of-range index */
  CTN_ERR_SHAPE = 2,            /* shapes do not agree */
  CTN_ERR_DTYPE = 3,            /* dtypes do not agree or are not supported by the op */
  CTN_ERR_OUT_OF_MEMORY = 4,    /* host or device allocation failed */
  CTN_ERR_UNAVAILABLE = 5,      /* a backend/device/driver is not present on this machine */
  CTN_ERR_UNSUPPORTED = 6,      /* a backend does not implement the op/dtype combination */
  CTN_ERR_PLUGIN = 7,           /* a plugin was rejected: missing symbol, ABI mismatch, init */
  CTN_ERR_IO = 8,               /* a file could not be read or written */
  CTN_ERR_CORRUPT = 9,          /* a file or buffer is malformed (checkpoint, dataset) */
  CTN_ERR_STATE = 10,           /* the call is not valid in the object's current state */
  CTN_ERR_INTERNAL = 11,        /* a bug or an unexpected exception; the message says more */
  /* since 1.3 */
  CTN_ERR_CANCELLED = 12,       /* a run was cancelled or passed its deadline (ctn_run_options);
                                   the variables are as they were before the run */
  CTN_ERR_NUMERICS = 13         /* a run with CTN_RUN_CHECK_NUMERICS met a NaN or an infinity; the
                                   message names the step, its op, its node and its inputs */
};

/* ---------------------------------------------------------------------------------------------
 * Data types
 * ------------------------------------------------------------------------------------------- */
typedef enum ctn_dtype {
  CTN_F32 = 0,
  CTN_F64 = 1,
  CTN_I32 = 2,
  CTN_I64 = 3,
  CTN_U8 = 4,
  CTN_BOOL = 5, /* one byte per element, 0 or 1 */
  CTN_DTYPE_COUNT_V1 = 6,
  /* since 1.5: the reduced-precision and quantized types (docs/ABI.md, "Dtypes added after 1.0").
   * The host never hands a tensor of these to a plugin built against an older minor: such a
   * plugin's kernels see only the six dtypes above. */
  CTN_F16 = 6,  /* IEEE 754 binary16, two bytes (numpy float16, ONNX FLOAT16) */
  CTN_BF16 = 7, /* bfloat16: the upper half of an f32 (ONNX BFLOAT16); converted with
                   round-to-nearest-even */
  CTN_I8 = 8,   /* signed 8-bit integer (quantized tensors; CTN_U8 is the unsigned one) */
  CTN_DTYPE_COUNT_V5 = 9, /* since 1.5 */
  /* since 1.6: integer dtypes (the ONNX integer tensor types; docs/ABI.md, "What 1.6 adds").
   * Two's complement / unsigned binary, native byte order. Arithmetic on them wraps around as C's
   * unsigned types do. As for the 1.5 dtypes, the host never hands a tensor of these to a plugin
   * built against an older minor. */
  CTN_I16 = 9,  /* signed 16-bit integer (numpy int16, ONNX INT16) */
  CTN_U16 = 10, /* unsigned 16-bit integer (numpy uint16, ONNX UINT16) */
  CTN_U32 = 11, /* unsigned 32-bit integer (numpy uint32, ONNX UINT32) */
  CTN_U64 = 12, /* unsigned 64-bit integer (numpy uint64, ONNX UINT64) */
  CTN_DTYPE_COUNT_V6 = 13 /* since 1.6 */
} ctn_dtype;

/* Maximum number of dimensions of a tensor. */
#define CTN_MAX_DIMS 8

/* A graph (opaque; see chutney.h). Declared here once: C99 forbids repeating a typedef. */
typedef struct ctn_graph ctn_graph;

/* A node of a graph, valid only together with the graph that created it. */
typedef uint32_t ctn_node;
#define CTN_NODE_NONE ((ctn_node)0xffffffffu)

/* ---------------------------------------------------------------------------------------------
 * Op attributes: a fixed-size, plain-old-data bag. Each op documents which slots it reads
 * (see ops.h). Unused slots must be zero. Passed by pointer; the callee copies what it keeps.
 * ------------------------------------------------------------------------------------------- */
#define CTN_ATTR_INTS 16
#define CTN_ATTR_FLOATS 4
typedef struct ctn_attrs {
  int64_t i[CTN_ATTR_INTS];
  double f[CTN_ATTR_FLOATS];
  uint32_t ni; /* how many of i[] are meaningful */
  uint32_t nf; /* how many of f[] are meaningful */
} ctn_attrs;

/* ---------------------------------------------------------------------------------------------
 * Tensor descriptor handed to kernels: where the data is and how it is laid out.
 * `data` is backend-specific: a host pointer for host-memory backends (the CPU backend, op
 * libraries' CPU kernels), an opaque device handle otherwise (cl_mem, VkBuffer...). The first
 * element is at byte `offset` from `data`. Strides are in elements, may be zero (broadcast).
 * ------------------------------------------------------------------------------------------- */
typedef struct ctn_tensor_desc {
  void *data;
  uint64_t offset;
  int32_t dtype; /* ctn_dtype */
  uint32_t ndim;
  int64_t shape[CTN_MAX_DIMS];
  int64_t strides[CTN_MAX_DIMS];
} ctn_tensor_desc;

/* Arguments of one kernel call. Pointers are valid for the duration of the call only. */
typedef struct ctn_kernel_args {
  uint32_t n_inputs;
  uint32_t n_outputs;
  const ctn_tensor_desc *inputs;
  const ctn_tensor_desc *outputs;
  const ctn_attrs *attrs;
  void *workspace;        /* scratch memory requested by the kernel (host ptr or device handle) */
  uint64_t workspace_size;
} ctn_kernel_args;

/* A kernel: returns CTN_OK or an error recorded through the host's set_error. It must not throw
 * or abort; the host wraps calls in a try/catch wall anyway. */
typedef ctn_status (*ctn_kernel_fn)(void *state, const ctn_kernel_args *args);

typedef struct ctn_kernel {
  ctn_kernel_fn fn;
  void *state;                   /* passed back to fn; may be NULL */
  void (*release)(void *state);  /* (optional) frees state; NULL when there is nothing to free */
  uint64_t workspace_size;       /* scratch bytes the host provides in args.workspace */
  uint32_t flags;                /* CTN_KERNEL_* */
  uint32_t reserved;
} ctn_kernel;

/* The kernel may write its output over its first input (the planner may then alias them). */
#define CTN_KERNEL_INPLACE_OK 1u

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_TYPES_H */
