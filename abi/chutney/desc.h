/* chutney descriptor helpers for backends and op libraries. Header-only C99 (since 1.2).
 *
 * Small functions every plugin otherwise writes again: element count, shape equality, the
 * strides of an input seen through numpy broadcasting, dtype size and name, shape formatting
 * for error messages, and (since 1.5) conversions to and from the 16-bit floats. Everything is `static inline`: nothing here is exported by libchutney, a
 * plugin that uses it does not link libchutney, and a plugin built against one version of this
 * header keeps working with any host of the same ABI major.
 *
 * This header is API, not ABI: its functions may gain siblings and change their code between
 * releases (each plugin carries the copy it was compiled with); the structs it reads
 * (ctn_tensor_desc) are the ABI's, defined in types.h. Names start with ctn_desc_.
 *
 * Conventions (types.h): shapes have at most CTN_MAX_DIMS dims, strides are in elements, and a
 * kernel's inputs and output are contiguous row-major (ops.h), so a host-memory kernel finds its
 * first element at (char *)data + offset (ctn_desc_host_ptr).
 */
#ifndef CHUTNEY_DESC_H
#define CHUTNEY_DESC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of elements: the product of the dims (1 for a 0-d tensor, 0 when a dim is 0). */
static inline int64_t ctn_desc_numel(const ctn_tensor_desc *t) {
  int64_t n = 1;
  uint32_t k;
  for (k = 0; k < t->ndim; ++k) n *= t->shape[k];
  return n;
}

/* 1 when a and b have the same ndim and dims, else 0 (dtype and strides are not compared). */
static inline int ctn_desc_same_shape(const ctn_tensor_desc *a, const ctn_tensor_desc *b) {
  uint32_t k;
  if (a->ndim != b->ndim) return 0;
  for (k = 0; k < a->ndim; ++k)
    if (a->shape[k] != b->shape[k]) return 0;
  return 1;
}

/* Bytes per element; 0 for an unknown dtype. */
static inline size_t ctn_desc_dtype_size(int32_t dtype) {
  switch (dtype) {
    case CTN_F32: return 4;
    case CTN_F64: return 8;
    case CTN_I32: return 4;
    case CTN_I64: return 8;
    case CTN_U8: return 1;
    case CTN_BOOL: return 1;
    case CTN_F16: return 2;  /* since 1.5 */
    case CTN_BF16: return 2; /* since 1.5 */
    case CTN_I8: return 1;   /* since 1.5 */
    case CTN_I16: return 2;  /* since 1.6 */
    case CTN_U16: return 2;  /* since 1.6 */
    case CTN_U32: return 4;  /* since 1.6 */
    case CTN_U64: return 8;  /* since 1.6 */
    default: return 0;
  }
}

/* "f32", "f64", "i32", "i64", "u8", "bool", since 1.5 "f16", "bf16", "i8", and since 1.6 "i16",
 * "u16", "u32", "u64"; "?" for an unknown dtype (the core's spelling). */
static inline const char *ctn_desc_dtype_name(int32_t dtype) {
  switch (dtype) {
    case CTN_F32: return "f32";
    case CTN_F64: return "f64";
    case CTN_I32: return "i32";
    case CTN_I64: return "i64";
    case CTN_U8: return "u8";
    case CTN_BOOL: return "bool";
    case CTN_F16: return "f16";
    case CTN_BF16: return "bf16";
    case CTN_I8: return "i8";
    case CTN_I16: return "i16";
    case CTN_U16: return "u16";
    case CTN_U32: return "u32";
    case CTN_U64: return "u64";
    default: return "?";
  }
}

/* 1 for f32 and f64 (unchanged in 1.5: a plugin that branches on it keeps its meaning when it is
 * rebuilt; the 16-bit floats have their own test below). */
static inline int ctn_desc_is_float(int32_t dtype) { return dtype == CTN_F32 || dtype == CTN_F64; }

/* 1 for the 16-bit floats CTN_F16 and CTN_BF16 (since 1.5). */
static inline int ctn_desc_is_half(int32_t dtype) { return dtype == CTN_F16 || dtype == CTN_BF16; }

/* ---- 16-bit floats (since 1.5) -------------------------------------------------------------
 * Scalar conversions between the stored bits of CTN_F16 / CTN_BF16 and f32 / f64. To a 16-bit
 * float: round to nearest, ties to even; NaN stays a (quiet) NaN with its sign; a finite value
 * past the largest one rounds to infinity (f16: |x| >= 65520; bf16 at the f32 limit); values
 * below the smallest normal become subnormals (then zero), as IEEE 754 says. From f64 the
 * rounding is direct (through a round-to-odd f32, so never twice). Widening is exact. */
static inline uint32_t ctn_desc_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float ctn_desc_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float ctn_desc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return ctn_desc_bits_f32(sign | 0x7f800000u | (m << 13)); /* inf, NaN */
  if (e != 0) return ctn_desc_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return ctn_desc_bits_f32(sign);
  e = 113u; /* subnormal: normalise */
  while (!(m & 0x400u)) {
    m <<= 1;
    --e;
  }
  return ctn_desc_bits_f32(sign | (e << 23) | ((m & 0x3ffu) << 13));
}

/* r, the value truncated to a multiple of 2^shift, rounded to nearest even by its remainder. */
static inline uint32_t ctn_desc_round_shift(uint32_t v, uint32_t shift) {
  uint32_t r = v >> shift, rem = v & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return r + (rem > half || (rem == half && (r & 1u)));
}

static inline uint16_t ctn_desc_f32_to_f16(float f) {
  uint32_t x = ctn_desc_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* NaN */
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and inf): inf */
  if (ax >= 0x38800000u) /* normal: rebias the exponent, round off 13 bits */
    return (uint16_t)(sign | ctn_desc_round_shift(ax - (112u << 23), 13));
  if (ax < 0x33000000u) return (uint16_t)sign; /* at most 2^-25: to zero (the tie is even) */
  return (uint16_t)(sign | ctn_desc_round_shift((ax & 0x7fffffu) | 0x800000u, 126u - (ax >> 23)));
}

static inline float ctn_desc_bf16_to_f32(uint16_t h) { return ctn_desc_bits_f32((uint32_t)h << 16); }

static inline uint16_t ctn_desc_f32_to_bf16(float f) {
  uint32_t x = ctn_desc_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* f64 to f32 rounding to odd: exact values stay, others get their last bit set, so that a
 * second rounding to a narrower float is the correct rounding of the f64. */
static inline float ctn_desc_f64_to_f32_odd(double d) {
  float f = (float)d;
  double af = f < 0 ? -(double)f : (double)f, ad = d < 0 ? -d : d;
  uint32_t u;
  if ((double)f == d || d != d) return f;
  u = ctn_desc_f32_bits(f);
  if (af > ad) u -= 1u; /* rounded away from zero (inf included): the value below it */
  return ctn_desc_bits_f32(u | 1u);
}
static inline uint16_t ctn_desc_f64_to_f16(double d) { return ctn_desc_f32_to_f16(ctn_desc_f64_to_f32_odd(d)); }
static inline uint16_t ctn_desc_f64_to_bf16(double d) { return ctn_desc_f32_to_bf16(ctn_desc_f64_to_f32_odd(d)); }

/* Host-memory backends and CPU kernels of op libraries: the address of element 0. */
static inline void *ctn_desc_host_ptr(const ctn_tensor_desc *t) {
  return (void *)((char *)t->data + t->offset);
}

/* Row-major strides (in elements) of a contiguous tensor of t's shape, into strides[0..ndim). */
static inline void ctn_desc_contiguous_strides(const ctn_tensor_desc *t, int64_t *strides) {
  int64_t s = 1;
  uint32_t k;
  for (k = t->ndim; k-- > 0;) {
    strides[k] = s;
    s *= t->shape[k];
  }
}

/* The strides (in elements) with which a contiguous `in` is read when it is broadcast (numpy
 * rules: shapes aligned on the right, a dim of 1 or a missing dim stretches) to the shape of
 * `out`: one stride per dim of `out`, 0 on the stretched dims. The element of `in` for output
 * index idx is then at sum(idx[k] * strides[k]). Returns 1, or 0 (strides untouched) when in's
 * shape does not broadcast to out's. */
static inline int ctn_desc_broadcast_strides(const ctn_tensor_desc *in, const ctn_tensor_desc *out,
                                             int64_t *strides) {
  int64_t tmp[CTN_MAX_DIMS];
  int64_t s = 1;
  uint32_t k, lead;
  if (in->ndim > out->ndim || out->ndim > CTN_MAX_DIMS) return 0;
  lead = out->ndim - in->ndim;
  for (k = out->ndim; k-- > 0;) {
    int64_t d;
    if (k < lead) {
      tmp[k] = 0;
      continue;
    }
    d = in->shape[k - lead];
    if (d != 1 && d != out->shape[k]) return 0;
    tmp[k] = d == 1 ? 0 : s;
    s *= d;
  }
  for (k = 0; k < out->ndim; ++k) strides[k] = tmp[k];
  return 1;
}

/* Steps the row-major multi-index idx[0..ndim) of a tensor of `shape` to the next element and
 * adds the change of each of the n_offsets offsets (offsets[j] moves by strides[j][...]). Use it
 * to walk an output in order while following broadcast inputs:
 *
 *   int64_t idx[CTN_MAX_DIMS] = {0}, off[2] = {0, 0}, sa[CTN_MAX_DIMS], sb[CTN_MAX_DIMS];
 *   const int64_t *st[2] = {sa, sb};
 *   ctn_desc_broadcast_strides(a, y, sa); ctn_desc_broadcast_strides(b, y, sb);
 *   for (i = 0; i < n; ++i, ctn_desc_next_index(y->ndim, y->shape, idx, 2, st, off))
 *     yp[i] = ap[off[0]] + bp[off[1]];
 */
static inline void ctn_desc_next_index(uint32_t ndim, const int64_t *shape, int64_t *idx,
                                       uint32_t n_offsets, const int64_t *const *strides,
                                       int64_t *offsets) {
  uint32_t k, j;
  for (k = ndim; k-- > 0;) {
    if (++idx[k] < shape[k]) {
      for (j = 0; j < n_offsets; ++j) offsets[j] += strides[j][k];
      return;
    }
    for (j = 0; j < n_offsets; ++j) offsets[j] -= strides[j][k] * (shape[k] - 1);
    idx[k] = 0;
  }
}

/* Writes t's shape as "[2, 3]" ("[]" for 0-d; the core's spelling in messages) into buf of
 * `size` bytes (truncated, always terminated when size > 0) and returns buf. */
static inline const char *ctn_desc_shape_str(const ctn_tensor_desc *t, char *buf, size_t size) {
  size_t pos = 0;
  uint32_t k;
  int w;
  if (size == 0) return buf;
  buf[0] = '\0';
  w = snprintf(buf, size, "[");
  if (w > 0) pos = (size_t)w;
  for (k = 0; k < t->ndim && k < CTN_MAX_DIMS && pos < size; ++k) {
    w = snprintf(buf + pos, size - pos, "%s%lld", k > 0 ? ", " : "", (long long)t->shape[k]);
    if (w < 0) break;
    pos += (size_t)w;
  }
  if (pos < size) snprintf(buf + pos, size - pos, "]");
  return buf;
}

/* Sets out's dtype, ndim and shape from src (what an op library's infer returns for an
 * elementwise op); data, offset and strides are left alone. */
static inline void ctn_desc_copy_layout(const ctn_tensor_desc *src, ctn_tensor_desc *out) {
  uint32_t k;
  out->dtype = src->dtype;
  out->ndim = src->ndim;
  for (k = 0; k < src->ndim && k < CTN_MAX_DIMS; ++k) out->shape[k] = src->shape[k];
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_DESC_H */
