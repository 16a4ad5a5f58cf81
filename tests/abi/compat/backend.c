/* A third-party backend as written in any ABI 1.x era, kept unchanged (the frozen compatibility
 * suite, docs/ABI.md "Compatibility policy"): only the 1.0 slots and host API, plain C99,
 * designated initialisers. Built with -std=c99 -Wall -Wextra -pedantic -Werror against the
 * frozen 1.0, 1.1 and 1.2 headers (backends "vend10", "vend11", "vend12") and the current ones
 * ("vendsrc"). Runs add, mul, div (numpy broadcasting) and neg in f32 and f64 out of buffers in
 * host memory that it does not declare as such (the host moves data with upload/download, as
 * for a device); declines every other op with CTN_ERR_UNSUPPORTED and a reason.
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign in C99 */
#include <stdlib.h>
#include <string.h>

#include <chutney/backend.h>

#ifndef COMPAT_NAME
#error "define COMPAT_NAME"
#endif

static const ctn_host_api *vend_host;

static ctn_status vend_init(const ctn_host_api *host, const ctn_backend_config *config,
                            void **out_state) {
  (void)host;
  (void)config;
  *out_state = &vend_host; /* no state; any non-NULL pointer */
  return CTN_OK;
}

static void vend_shutdown(void *state) { (void)state; }

static const char *vend_describe(void *state) {
  (void)state;
  return COMPAT_NAME ": compatibility-suite backend (add, mul, div, neg; f32, f64)";
}

static ctn_status vend_alloc(void *state, uint64_t bytes, void **out_handle) {
  void *p = NULL;
  (void)state;
  if (bytes == 0) bytes = 64;
  if (bytes != (size_t)bytes || posix_memalign(&p, 64, (size_t)bytes) != 0) p = NULL;
  if (!p)
    return vend_host->set_error(CTN_ERR_OUT_OF_MEMORY, COMPAT_NAME ": cannot allocate %llu bytes",
                                (unsigned long long)bytes);
  *out_handle = p;
  return CTN_OK;
}

static void vend_free(void *state, void *handle) {
  (void)state;
  free(handle);
}

static ctn_status vend_upload(void *state, void *handle, uint64_t offset, const void *src,
                              uint64_t bytes) {
  (void)state;
  if (bytes) memcpy((char *)handle + offset, src, (size_t)bytes);
  return CTN_OK;
}

static ctn_status vend_download(void *state, void *handle, uint64_t offset, void *dst,
                                uint64_t bytes) {
  (void)state;
  if (bytes) memcpy(dst, (const char *)handle + offset, (size_t)bytes);
  return CTN_OK;
}

enum { VEND_ADD, VEND_MUL, VEND_DIV, VEND_NEG };
static const int vend_codes[] = {VEND_ADD, VEND_MUL, VEND_DIV, VEND_NEG};

/* Element offset into `in` (strides in elements, broadcast against `out`) of output index idx. */
static int64_t vend_offset(const ctn_tensor_desc *in, const ctn_tensor_desc *out,
                           const int64_t *idx) {
  int64_t off = 0;
  uint32_t lead = out->ndim - in->ndim, k;
  for (k = 0; k < in->ndim; ++k)
    if (in->shape[k] != 1) off += idx[k + lead] * in->strides[k];
  return off;
}

static int64_t vend_numel(const ctn_tensor_desc *t) {
  int64_t n = 1;
  uint32_t k;
  for (k = 0; k < t->ndim; ++k) n *= t->shape[k];
  return n;
}

#define VEND_KERNEL(T, NAME)                                                                  \
  static ctn_status NAME(void *state, const ctn_kernel_args *args) {                          \
    const ctn_tensor_desc *a = &args->inputs[0], *y = &args->outputs[0];                      \
    const ctn_tensor_desc *b = args->n_inputs > 1 ? &args->inputs[1] : a;                     \
    const T *ap = (const T *)(const void *)((const char *)a->data + a->offset);              \
    const T *bp = (const T *)(const void *)((const char *)b->data + b->offset);              \
    T *yp = (T *)(void *)((char *)y->data + y->offset);                                       \
    int64_t idx[CTN_MAX_DIMS] = {0}, i, n = vend_numel(y);                                    \
    int code = *(const int *)state, k;                                                        \
    for (i = 0; i < n; ++i) {                                                                 \
      T u = ap[vend_offset(a, y, idx)], v = bp[vend_offset(b, y, idx)];                       \
      yp[i] = code == VEND_ADD ? u + v : code == VEND_MUL ? u * v : code == VEND_DIV ? u / v  \
                                                                              : -u;           \
      for (k = (int)y->ndim - 1; k >= 0; --k) {                                               \
        if (++idx[k] < y->shape[k]) break;                                                    \
        idx[k] = 0;                                                                           \
      }                                                                                       \
    }                                                                                         \
    return CTN_OK;                                                                            \
  }

VEND_KERNEL(float, vend_f32)
VEND_KERNEL(double, vend_f64)

static ctn_status vend_get_kernel(void *state, const ctn_op_signature *sig, ctn_kernel *out) {
  static const char *const names[] = {"add", "mul", "div", "neg"};
  int32_t dt = sig->output->dtype;
  int op = -1, k;
  uint32_t i;
  (void)state;
  for (k = 0; k < 4; ++k)
    if (strcmp(sig->op, names[k]) == 0) op = k;
  if (op < 0)
    return vend_host->set_error(CTN_ERR_UNSUPPORTED, COMPAT_NAME ": op %s is not implemented",
                                sig->op);
  for (i = 0; i < sig->n_inputs; ++i)
    if (sig->inputs[i].dtype != dt) dt = -1;
  if (dt != CTN_F32 && dt != CTN_F64)
    return vend_host->set_error(CTN_ERR_UNSUPPORTED,
                                COMPAT_NAME ": %s is implemented for f32 and f64 only", sig->op);
  out->fn = dt == CTN_F32 ? vend_f32 : vend_f64;
  out->state = (void *)&vend_codes[op];
  out->release = NULL;
  out->workspace_size = 0;
  out->flags = 0;
  out->reserved = 0;
  return CTN_OK;
}

static const ctn_backend_desc vend_desc = {
    .header = {sizeof(ctn_backend_desc), CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_BACKEND, 0,
               COMPAT_NAME},
    .init = vend_init,
    .shutdown = vend_shutdown,
    .describe = vend_describe,
    .buffer_alloc = vend_alloc,
    .buffer_free = vend_free,
    .upload = vend_upload,
    .download = vend_download,
    .get_kernel = vend_get_kernel,
};

CTN_PLUGIN_EXPORT const ctn_plugin_header *ctn_plugin_query(uint32_t host_abi_version,
                                                            const ctn_host_api *host) {
  (void)host_abi_version;
  vend_host = host;
  return &vend_desc.header;
}
