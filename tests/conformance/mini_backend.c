/* "mini": a backend that implements four ops, for the conformance suite in vendor mode.
 *
 * A vendor's first backend runs a handful of ops; the suite run against it must report every
 * other op as unsupported, never as a failure, and must really run the four. Ops: add, mul, div
 * (numpy broadcasting) and neg, in f32 and f64; anything else is declined with
 * CTN_ERR_UNSUPPORTED and a reason. Buffers live in host memory but the backend does not say so
 * (no CTN_BACKEND_HOST_MEMORY): the host moves data with upload/download as for a device.
 *
 * Plain C99 against abi/ only (desc.h for the descriptor arithmetic), never libchutney; exports
 * nothing but ctn_plugin_query. Slow on purpose: one multi-index step per element.
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign in C99 */
#include <stdlib.h>
#include <string.h>

#include <chutney/backend.h>
#include <chutney/desc.h>

static const ctn_host_api *mini_host;

static ctn_status mini_init(const ctn_host_api *host, const ctn_backend_config *config, void **out_state) {
  (void)host;
  (void)config;
  *out_state = &mini_host; /* no state; any non-NULL pointer */
  return CTN_OK;
}

static void mini_shutdown(void *state) { (void)state; }

static const char *mini_describe(void *state) {
  (void)state;
  return "mini test backend: add, mul, div, neg (f32, f64) in host memory";
}

static ctn_status mini_alloc(void *state, uint64_t bytes, void **out_handle) {
  uint64_t rounded = bytes == 0 ? 64 : bytes;
  void *p = NULL;
  (void)state;
  if (rounded != (size_t)rounded || posix_memalign(&p, 64, (size_t)rounded) != 0) p = NULL;
  if (!p) return mini_host->set_error(CTN_ERR_OUT_OF_MEMORY, "mini: cannot allocate %llu bytes", (unsigned long long)bytes);
  *out_handle = p;
  return CTN_OK;
}

static void mini_free(void *state, void *handle) {
  (void)state;
  free(handle);
}

static ctn_status mini_upload(void *state, void *handle, uint64_t offset, const void *src, uint64_t bytes) {
  (void)state;
  if (bytes) memcpy((char *)handle + offset, src, (size_t)bytes);
  return CTN_OK;
}

static ctn_status mini_download(void *state, void *handle, uint64_t offset, void *dst, uint64_t bytes) {
  (void)state;
  if (bytes) memcpy(dst, (const char *)handle + offset, (size_t)bytes);
  return CTN_OK;
}

/* ---- kernels ---------------------------------------------------------------------------------- */

enum { MINI_ADD, MINI_MUL, MINI_DIV, MINI_NEG };

/* The op code travels in the kernel state pointer (an index into this array). */
static const int mini_codes[] = {MINI_ADD, MINI_MUL, MINI_DIV, MINI_NEG};

#define MINI_BINARY(T, NAME)                                                                  \
  static ctn_status NAME(void *state, const ctn_kernel_args *args) {                          \
    const ctn_tensor_desc *a = &args->inputs[0], *b = &args->inputs[1], *y = &args->outputs[0]; \
    const T *ap = (const T *)ctn_desc_host_ptr(a), *bp = (const T *)ctn_desc_host_ptr(b);    \
    T *yp = (T *)ctn_desc_host_ptr(y);                                                        \
    int64_t sa[CTN_MAX_DIMS], sb[CTN_MAX_DIMS], idx[CTN_MAX_DIMS] = {0}, off[2] = {0, 0};     \
    const int64_t *st[2];                                                                     \
    int64_t i, n = ctn_desc_numel(y);                                                         \
    int code = *(const int *)state;                                                           \
    char sha[64], shb[64], shy[64];                                                           \
    if (!ctn_desc_broadcast_strides(a, y, sa) || !ctn_desc_broadcast_strides(b, y, sb))       \
      return mini_host->set_error(CTN_ERR_SHAPE, "mini: %s and %s do not broadcast to %s",    \
                                  ctn_desc_shape_str(a, sha, sizeof sha),                    \
                                  ctn_desc_shape_str(b, shb, sizeof shb),                    \
                                  ctn_desc_shape_str(y, shy, sizeof shy));                   \
    st[0] = sa;                                                                               \
    st[1] = sb;                                                                               \
    for (i = 0; i < n; ++i, ctn_desc_next_index(y->ndim, y->shape, idx, 2, st, off)) {        \
      T u = ap[off[0]], v = bp[off[1]];                                                       \
      yp[i] = code == MINI_ADD ? u + v : code == MINI_MUL ? u * v : u / v;                    \
    }                                                                                         \
    return CTN_OK;                                                                            \
  }

MINI_BINARY(float, mini_binary_f32)
MINI_BINARY(double, mini_binary_f64)

#define MINI_NEG_KERNEL(T, NAME)                                                   \
  static ctn_status NAME(void *state, const ctn_kernel_args *args) {               \
    const T *x = (const T *)ctn_desc_host_ptr(&args->inputs[0]);                   \
    T *y = (T *)ctn_desc_host_ptr(&args->outputs[0]);                              \
    int64_t i, n = ctn_desc_numel(&args->outputs[0]);                              \
    (void)state;                                                                   \
    for (i = 0; i < n; ++i) y[i] = -x[i];                                          \
    return CTN_OK;                                                                 \
  }

MINI_NEG_KERNEL(float, mini_neg_f32)
MINI_NEG_KERNEL(double, mini_neg_f64)

static ctn_status mini_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  static const char *const names[] = {"add", "mul", "div", "neg"};
  int32_t dt = sig->output->dtype;
  int op = -1, k;
  uint32_t i;
  (void)state;
  for (k = 0; k < 4; ++k)
    if (strcmp(sig->op, names[k]) == 0) op = k;
  if (op < 0) return mini_host->set_error(CTN_ERR_UNSUPPORTED, "mini: op %s is not implemented", sig->op);
  /* The host's inference already checked arity, shapes and matching dtypes (ops.h). */
  for (i = 0; i < sig->n_inputs; ++i)
    if (sig->inputs[i].dtype != dt) dt = -1;
  if (dt != CTN_F32 && dt != CTN_F64)
    return mini_host->set_error(CTN_ERR_UNSUPPORTED, "mini: %s for %s is not implemented (f32 and f64 only)", sig->op,
                                ctn_desc_dtype_name(sig->output->dtype));
  if (mini_codes[op] == MINI_NEG)
    out->fn = dt == CTN_F32 ? mini_neg_f32 : mini_neg_f64;
  else
    out->fn = dt == CTN_F32 ? mini_binary_f32 : mini_binary_f64;
  out->state = (void *)&mini_codes[op];
  out->release = NULL;
  out->workspace_size = 0;
  out->flags = 0;
  out->reserved = 0;
  return CTN_OK;
}

/* Designated initialisers: slots a newer header appends stay NULL (absent). */
static const ctn_backend_desc mini_desc = {
    .header = {sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0, "mini"},
    .init = mini_init,
    .shutdown = mini_shutdown,
    .describe = mini_describe,
    .buffer_alloc = mini_alloc,
    .buffer_free = mini_free,
    .upload = mini_upload,
    .download = mini_download,
    .get_kernel = mini_get_kernel,
};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version, const ctn_host_api *host) {
  (void)host_abi_version;
  mini_host = host;
  return &mini_desc.header;
}
