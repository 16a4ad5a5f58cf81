/* A tiny host-memory backend shared by the test plugins (C11 and C++20).
 *
 * Each plugin that includes this defines its own descriptor (that is what the tests vary: its
 * size, versions, kind) and reuses these slots. Ops: "add" (f32, numpy broadcasting), "relu"
 * (f32), "copy" (f32), enabled per plugin with TB_OP_* bits passed to tb_get_kernel_for.
 * Deliberately simple and slow: the tests only care where a step ran and that values are right.
 */
#ifndef CTN_TEST_TINY_BACKEND_H
#define CTN_TEST_TINY_BACKEND_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chutney/backend.h>

#define TB_OP_ADD 1u
#define TB_OP_RELU 2u
#define TB_OP_COPY 4u

/* Set by ctn_plugin_query; the host table lives until the plugin is unloaded. */
static const ctn_host_api *tb_host;

typedef struct tb_state {
  char description[96];
} tb_state;

static inline ctn_status tb_init_named(const char *name, const ctn_host_api *host,
                                       const ctn_backend_config *config, void **out_state) {
  tb_state *s = (tb_state *)calloc(1, sizeof(tb_state));
  (void)config;
  if (!s) return host->set_error(CTN_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  snprintf(s->description, sizeof s->description, "%s (test backend, host memory)", name);
  *out_state = s;
  return CTN_OK;
}

static inline void tb_shutdown(void *state) { free(state); }

static inline const char *tb_describe(void *state) {
  return ((tb_state *)state)->description;
}

static inline ctn_status tb_buffer_alloc(void *state, uint64_t bytes, void **out_handle) {
  /* aligned_alloc needs a size that is a multiple of the alignment (and not zero). */
  uint64_t rounded = bytes == 0 ? 64 : (bytes + 63u) / 64u * 64u;
  void *p = aligned_alloc(64, (size_t)rounded);
  (void)state;
  if (!p) return tb_host->set_error(CTN_ERR_OUT_OF_MEMORY, "cannot allocate %llu bytes",
                                    (unsigned long long)bytes);
  *out_handle = p;
  return CTN_OK;
}

static inline void tb_buffer_free(void *state, void *handle) {
  (void)state;
  free(handle);
}

static inline ctn_status tb_upload(void *state, void *handle, uint64_t offset, const void *src,
                                   uint64_t bytes) {
  (void)state;
  if (bytes) memcpy((char *)handle + offset, src, (size_t)bytes);
  return CTN_OK;
}

static inline ctn_status tb_download(void *state, void *handle, uint64_t offset, void *dst,
                                     uint64_t bytes) {
  (void)state;
  if (bytes) memcpy(dst, (const char *)handle + offset, (size_t)bytes);
  return CTN_OK;
}

static inline int64_t tb_numel(const ctn_tensor_desc *t) {
  int64_t n = 1;
  uint32_t k;
  for (k = 0; k < t->ndim; ++k) n *= t->shape[k];
  return n;
}

static inline float *tb_f32(const ctn_tensor_desc *t) {
  return (float *)((char *)t->data + t->offset);
}

/* Element offset in `in` (contiguous, right-aligned against `out`) of output index idx. */
static inline int64_t tb_bcast_offset(const ctn_tensor_desc *in, const ctn_tensor_desc *out,
                                      const int64_t *idx) {
  int64_t off = 0, stride = 1;
  int k;
  for (k = (int)in->ndim - 1; k >= 0; --k) {
    int64_t i = in->shape[k] == 1 ? 0 : idx[k + (int)(out->ndim - in->ndim)];
    off += i * stride;
    stride *= in->shape[k];
  }
  return off;
}

static inline ctn_status tb_add_f32(void *state, const ctn_kernel_args *args) {
  const ctn_tensor_desc *a = &args->inputs[0], *b = &args->inputs[1], *y = &args->outputs[0];
  int64_t idx[CTN_MAX_DIMS] = {0};
  int64_t i, n = tb_numel(y);
  (void)state;
  for (i = 0; i < n; ++i) {
    int k;
    tb_f32(y)[i] = tb_f32(a)[tb_bcast_offset(a, y, idx)] + tb_f32(b)[tb_bcast_offset(b, y, idx)];
    for (k = (int)y->ndim - 1; k >= 0; --k) {
      if (++idx[k] < y->shape[k]) break;
      idx[k] = 0;
    }
  }
  return CTN_OK;
}

static inline ctn_status tb_relu_f32(void *state, const ctn_kernel_args *args) {
  int64_t i, n = tb_numel(&args->outputs[0]);
  const float *x = tb_f32(&args->inputs[0]);
  float *y = tb_f32(&args->outputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return CTN_OK;
}

static inline ctn_status tb_copy_f32(void *state, const ctn_kernel_args *args) {
  (void)state;
  memmove(tb_f32(&args->outputs[0]), tb_f32(&args->inputs[0]),
          (size_t)tb_numel(&args->outputs[0]) * sizeof(float));
  return CTN_OK;
}

/* get_kernel for a backend called `name` that offers the ops in `ops`; `add_fn` lets a plugin
 * substitute its own add kernel (kernel_throws does). */
static inline ctn_status tb_get_kernel_for(const char *name, unsigned ops, ctn_kernel_fn add_fn,
                                           const ctn_op_signature *sig, ctn_kernel *out) {
  ctn_kernel_fn fn = NULL;
  uint32_t k;
  if (sig->output->dtype != CTN_F32)
    return tb_host->set_error(CTN_ERR_UNSUPPORTED, "%s: only f32 (asked %s)", name, sig->op);
  for (k = 0; k < sig->n_inputs; ++k)
    if (sig->inputs[k].dtype != CTN_F32)
      return tb_host->set_error(CTN_ERR_UNSUPPORTED, "%s: only f32 (asked %s)", name, sig->op);
  if ((ops & TB_OP_ADD) && strcmp(sig->op, "add") == 0 && sig->n_inputs == 2) fn = add_fn;
  if ((ops & TB_OP_RELU) && strcmp(sig->op, "relu") == 0 && sig->n_inputs == 1) fn = tb_relu_f32;
  if ((ops & TB_OP_COPY) && strcmp(sig->op, "copy") == 0 && sig->n_inputs == 1) fn = tb_copy_f32;
  if (!fn)
    return tb_host->set_error(CTN_ERR_UNSUPPORTED, "%s: op %s not implemented", name, sig->op);
  out->fn = fn;
  out->state = NULL;
  out->release = NULL;
  out->workspace_size = 0;
  out->flags = 0;
  out->reserved = 0;
  return CTN_OK;
}

/* A value a host must never call or dereference: slots it should not know about carry it. */
#define TB_POISON ((uintptr_t)0xdead0bad)

#endif /* CTN_TEST_TINY_BACKEND_H */
