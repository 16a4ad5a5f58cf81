// int8 quantization kernels (ops.h, "int8 quantization"): quantize_linear, dequantize_linear,
// and the integer matmul and convolution (matmul_integer, qlinear_matmul, conv2d_integer,
// qlinear_conv2d). The integer products run in igemm.cpp's micro-kernels: operands less their
// zero points packed as int16, i32 sums, then an epilogue per tile (i32 store, or requantisation:
// float multiplier, round to nearest even, saturate). Scales and zero points are read from the
// inputs on every call.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_backend.h"
#include "k_quant.h"

namespace ctn_cpu {
namespace {

// ---- quantize_linear / dequantize_linear ---------------------------------------------------------

// Where element i of the data finds its scale and zero point: one value, one per element, one per
// index of a single axis (per channel), or a general broadcast.
struct ParamMap {
  enum Kind { kOne, kSame, kAxis, kGeneral } kind = kOne;
  int64_t inner = 1, count = 1;
  std::vector<int64_t> dims, strides;  // kGeneral: the data's dims and the parameter's strides
  int64_t index(int64_t i) const {
    switch (kind) {
      case kOne: return 0;
      case kSame: return i;
      case kAxis: return (i / inner) % count;
      case kGeneral: break;
    }
    int64_t r = 0;
    for (size_t d = dims.size(); d-- > 0;) {
      r += (i % dims[d]) * strides[d];
      i /= dims[d];
    }
    return r;
  }
};

ParamMap param_map(const ctn_tensor_desc &data, const ctn_tensor_desc &param) {
  ParamMap m;
  const int64_t n = desc_numel(param);
  if (n == 1) return m;
  if (n == desc_numel(data)) {
    m.kind = ParamMap::kSame;
    return m;
  }
  // Right-aligned dims of the parameter against the data's; at most one above 1 is an axis.
  const uint32_t off = data.ndim - param.ndim;
  int axis = -1, non_one = 0;
  m.dims.assign(data.shape, data.shape + data.ndim);
  m.strides.assign(data.ndim, 0);
  int64_t stride = 1;
  for (uint32_t k = param.ndim; k-- > 0;) {
    if (param.shape[k] != 1) {
      axis = static_cast<int>(k + off);
      ++non_one;
      m.strides[k + off] = stride;
    }
    stride *= param.shape[k];
  }
  if (non_one != 1) {
    m.kind = ParamMap::kGeneral;
    return m;
  }
  m.kind = ParamMap::kAxis;
  m.count = data.shape[axis];
  for (uint32_t k = static_cast<uint32_t>(axis) + 1; k < data.ndim; ++k) m.inner *= data.shape[k];
  return m;
}

struct AffineState : KernelBase {
  ParamMap map;
  int64_t numel = 0;
};

// quantize_linear: T x, T scale, Q zero point -> Q; dequantize_linear: Q x, T scale, Q zero point -> T.
template <class T, class Q, bool kQuantize>
struct AffineCall {
  const AffineState *st;
  const ctn_kernel_args *args;
  void range(int64_t a, int64_t b) const {
    const T *scale = desc_ptr<const T>(args->inputs[1]);
    const Q *zp = desc_ptr<const Q>(args->inputs[2]);
    if (st->map.kind == ParamMap::kOne) return range_one(a, b, scale[0], static_cast<int32_t>(zp[0]));
    if constexpr (kQuantize) {
      const T *x = desc_ptr<const T>(args->inputs[0]);
      Q *y = desc_ptr<Q>(args->outputs[0]);
      for (int64_t i = a; i < b; ++i) {
        const int64_t p = st->map.index(i);
        y[i] = saturate_round<Q>(x[i] / scale[p], static_cast<int32_t>(zp[p]));
      }
    } else {
      const Q *x = desc_ptr<const Q>(args->inputs[0]);
      T *y = desc_ptr<T>(args->outputs[0]);
      for (int64_t i = a; i < b; ++i) {
        const int64_t p = st->map.index(i);
        y[i] = static_cast<T>(static_cast<int64_t>(x[i]) - static_cast<int64_t>(zp[p])) * scale[p];
      }
    }
  }
  // One scale and zero point: a loop the compiler vectorises.
  void range_one(int64_t a, int64_t b, T scale, int32_t zp) const {
    if constexpr (kQuantize) {
      const T *x = desc_ptr<const T>(args->inputs[0]);
      Q *y = desc_ptr<Q>(args->outputs[0]);
      const T lo = static_cast<T>(qmin<Q>() - zp), hi = static_cast<T>(qmax<Q>() - zp);
      for (int64_t i = a; i < b; ++i) {
        const T v = x[i] / scale;
        y[i] = static_cast<Q>(round_clamped(std::max(lo, std::min(hi, v))) + zp);
      }
    } else {
      const Q *x = desc_ptr<const Q>(args->inputs[0]);
      T *y = desc_ptr<T>(args->outputs[0]);
      using W = std::conditional_t<sizeof(Q) == 4, int64_t, int32_t>;  // x - zp of an i32 needs 33 bits
      for (int64_t i = a; i < b; ++i) y[i] = static_cast<T>(static_cast<W>(x[i]) - static_cast<W>(zp)) * scale;
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) { static_cast<const AffineCall *>(ctx)->range(a, b); }
};

template <class T, class Q, bool kQuantize>
ctn_status affine_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const AffineState *>(state);
  AffineCall<T, Q, kQuantize> call{st, args};
  if (st->numel >= kParallelThreshold && st->be->pool->size() > 1)
    st->be->pool->parallel_for(st->numel, 8192, AffineCall<T, Q, kQuantize>::part, &call);
  else
    call.range(0, st->numel);
  return CTN_OK;
}

template <class T, bool kQuantize>
ctn_kernel_fn affine_for(int32_t qdt) {
  switch (qdt) {
    case CTN_U8: return affine_kernel<T, uint8_t, kQuantize>;
    case CTN_I8: return affine_kernel<T, int8_t, kQuantize>;
    default: return kQuantize ? nullptr : affine_kernel<T, int32_t, kQuantize>;
  }
}

ctn_status make_affine(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool quantize) {
  const ctn_tensor_desc &x = sig->inputs[0], &scale = sig->inputs[1], &zp = sig->inputs[2];
  if (scale.dtype != CTN_F32 && scale.dtype != CTN_F64)
    return be->host->set_error(CTN_ERR_UNSUPPORTED, "cpu %s: scale dtype %s (f32 and f64 run here)", sig->op,
                               dtype_name(scale.dtype));
  const int32_t qdt = quantize ? zp.dtype : x.dtype;
  ctn_kernel_fn fn = scale.dtype == CTN_F32 ? (quantize ? affine_for<float, true>(qdt) : affine_for<float, false>(qdt))
                                            : (quantize ? affine_for<double, true>(qdt) : affine_for<double, false>(qdt));
  if (!fn)
    return be->host->set_error(CTN_ERR_DTYPE, "cpu %s: zero point dtype %s", sig->op,
                               dtype_name(qdt));
  auto st = new_state<AffineState>(be);
  st->map = param_map(x, scale);
  st->numel = desc_numel(x);
  kernel_set(out, fn, st.release());
  return CTN_OK;
}

// ---- qlinear_add ----------------------------------------------------------------------------------

// onnxruntime's QLinearAdd (ops.h): ra, rb and the constant term c of one call.
struct QAddParams {
  float ra, rb, c;
};

struct QAddState : KernelBase {
  ParamMap ma, mb;  // where output element i reads a and b
  int64_t numel = 0;
  bool same = false;  // a and b have the output's elements in its order (no broadcast)
  int32_t dt = 0;
};

// One element: fma(a, ra, fma(b, rb, c)) rounded half to even, saturated; a value past the i32
// range (the conversion's integer indefinite) is the minimum, as onnxruntime's pack gives it.
template <class Q>
inline __attribute__((always_inline)) Q qadd_one(int32_t a, int32_t b, const QAddParams &p) {
  const float v = std::fma(static_cast<float>(a), p.ra, std::fma(static_cast<float>(b), p.rb, p.c));
  if (!(v >= -2147483648.0f && v < 2147483648.0f)) return static_cast<Q>(qmin<Q>());
  const float lo = static_cast<float>(qmin<Q>()), hi = static_cast<float>(qmax<Q>());
  return static_cast<Q>(round_clamped(std::max(lo, std::min(hi, v))));
}

// n elements of a and b of one shape (compiled per ISA below; AVX-512 by hand).
template <class Q>
inline __attribute__((always_inline)) void qadd_same_body(const Q *a, const Q *b, int64_t n, const QAddParams &p,
                                                          Q *y) {
  for (int64_t i = 0; i < n; ++i) y[i] = qadd_one<Q>(a[i], b[i], p);
}
template <class Q>
using QAddFn = void (*)(const Q *, const Q *, int64_t, const QAddParams &, Q *);
#define CTN_QADD_VARIANT(suffix, ...)                                                                    \
  __VA_ARGS__ void qadd_u8_##suffix(const uint8_t *a, const uint8_t *b, int64_t n, const QAddParams &p, \
                                    uint8_t *y) {                                                        \
    qadd_same_body(a, b, n, p, y);                                                                       \
  }                                                                                                      \
  __VA_ARGS__ void qadd_i8_##suffix(const int8_t *a, const int8_t *b, int64_t n, const QAddParams &p,   \
                                    int8_t *y) {                                                         \
    qadd_same_body(a, b, n, p, y);                                                                       \
  }
CTN_QADD_VARIANT(generic)
#if defined(__x86_64__)
CTN_QADD_VARIANT(avx2, __attribute__((target("avx2,fma"))))

// 16 elements a step, masked tail: the conversion rounds half to even and gives the integer
// indefinite past the i32 range, which the clamp turns into the minimum (onnxruntime's packs).
template <class Q>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void qadd_avx512(const Q *a, const Q *b, int64_t n,
                                                                      const QAddParams &p, Q *y) {
  const __m512 ra = _mm512_set1_ps(p.ra), rb = _mm512_set1_ps(p.rb), c = _mm512_set1_ps(p.c);
  const __m512i lo = _mm512_set1_epi32(qmin<Q>()), hi = _mm512_set1_epi32(qmax<Q>());
  const __mmask16 all = 0xFFFF;  // maskz forms: gcc 12 warns about the plain ones' undefined halves
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m128i va = _mm_maskz_loadu_epi8(k, a + i), vb = _mm_maskz_loadu_epi8(k, b + i);
    const __m512i ia = std::is_same_v<Q, int8_t> ? _mm512_maskz_cvtepi8_epi32(all, va) : _mm512_maskz_cvtepu8_epi32(all, va);
    const __m512i ib = std::is_same_v<Q, int8_t> ? _mm512_maskz_cvtepi8_epi32(all, vb) : _mm512_maskz_cvtepu8_epi32(all, vb);
    const __m512 fb = _mm512_maskz_fmadd_ps(all, _mm512_maskz_cvtepi32_ps(all, ib), rb, c);
    const __m512 v = _mm512_maskz_fmadd_ps(all, _mm512_maskz_cvtepi32_ps(all, ia), ra, fb);
    const __m512i r = _mm512_maskz_min_epi32(all, _mm512_maskz_max_epi32(all, _mm512_maskz_cvtps_epi32(all, v), lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(y + i, k, r);
  }
}
void qadd_u8_avx512(const uint8_t *a, const uint8_t *b, int64_t n, const QAddParams &p, uint8_t *y) {
  qadd_avx512<uint8_t>(a, b, n, p, y);
}
void qadd_i8_avx512(const int8_t *a, const int8_t *b, int64_t n, const QAddParams &p, int8_t *y) {
  qadd_avx512<int8_t>(a, b, n, p, y);
}
#endif

template <class Q>
ctn_status qadd_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const QAddState *>(state);
  const ctn_tensor_desc *in = args->inputs;
  const float sy = *desc_ptr<const float>(in[6]);
  QAddParams p;
  p.ra = *desc_ptr<const float>(in[1]) / sy;
  p.rb = *desc_ptr<const float>(in[4]) / sy;
  p.c = static_cast<float>(int_at(in[7], 0)) -
        std::fma(p.ra, static_cast<float>(int_at(in[2], 0)), p.rb * static_cast<float>(int_at(in[5], 0)));
  const Q *a = desc_ptr<const Q>(in[0]), *b = desc_ptr<const Q>(in[3]);
  Q *y = desc_ptr<Q>(args->outputs[0]);
  QAddFn<Q> same;
  if constexpr (std::is_same_v<Q, uint8_t>)
    same = CTN_ISA_VARIANT(QAddFn<Q>, st->be->gemm_isa.load()->name, qadd_u8);
  else
    same = CTN_ISA_VARIANT(QAddFn<Q>, st->be->gemm_isa.load()->name, qadd_i8);
  auto part = [&](int64_t i0, int64_t i1) {
    if (st->same) return same(a + i0, b + i0, i1 - i0, p, y + i0);
    for (int64_t i = i0; i < i1; ++i) y[i] = qadd_one<Q>(a[st->ma.index(i)], b[st->mb.index(i)], p);
  };
  struct Ctx {
    decltype(part) *f;
    static void run(void *c, int64_t i0, int64_t i1, int) { (*static_cast<Ctx *>(c)->f)(i0, i1); }
  } ctx{&part};
  if (st->numel >= 4 * kParallelThreshold && st->be->pool->size() > 1)
    st->be->pool->parallel_for(st->numel, 16384, Ctx::run, &ctx);
  else
    part(0, st->numel);
  return CTN_OK;
}

// x's dims, right-aligned against y's, are 1 or y's.
bool broadcasts_to(const ctn_tensor_desc &x, const ctn_tensor_desc &y) {
  if (x.ndim > y.ndim) return false;
  for (uint32_t k = 0; k < x.ndim; ++k)
    if (x.shape[k] != 1 && x.shape[k] != y.shape[k + y.ndim - x.ndim]) return false;
  return true;
}

ctn_status make_qadd(Backend *be, const ctn_op_signature *sig, ctn_kernel *out) {
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[3], &y = *sig->output;
  if (!broadcasts_to(a, y) || !broadcasts_to(b, y) || a.dtype != y.dtype || b.dtype != y.dtype ||
      (y.dtype != CTN_U8 && y.dtype != CTN_I8))
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu %s: a and b must broadcast to the output, of its dtype",
                               sig->op);
  auto st = new_state<QAddState>(be);
  st->numel = desc_numel(y);
  st->ma = param_map(y, a);
  st->mb = param_map(y, b);
  st->same = desc_numel(a) == st->numel && desc_numel(b) == st->numel;
  kernel_set(out, y.dtype == CTN_U8 ? qadd_kernel<uint8_t> : qadd_kernel<int8_t>, st.release());
  return CTN_OK;
}

// The operand counts and ranks the kernels index by (the core's inference checks the rest;
// a direct caller of get_kernel gets an error, never a read out of bounds).
bool quant_signature_ok(const ctn_op_signature *sig, uint32_t n_in, uint32_t rank, uint32_t ix, uint32_t iw) {
  if (sig->n_inputs != n_in) return false;
  if (rank == 0) return sig->output->ndim >= sig->inputs[ix].ndim && sig->output->ndim >= sig->inputs[iw].ndim;
  if (sig->inputs[ix].ndim < rank || sig->inputs[iw].ndim < rank || sig->output->ndim < rank) return false;
  return rank != 4 || (sig->inputs[ix].ndim == 4 && sig->inputs[iw].ndim == 4 && sig->output->ndim == 4);
}

struct QuantOp {
  const char *name;
  uint32_t n_in, rank, ix, iw;
};
constexpr QuantOp kQuantOps[] = {{CTN_OP_QUANTIZE_LINEAR, 3, 0, 0, 0}, {CTN_OP_DEQUANTIZE_LINEAR, 3, 0, 0, 0},
                                 {CTN_OP_MATMUL_INTEGER, 4, 2, 0, 1},  {CTN_OP_QLINEAR_MATMUL, 9, 2, 0, 3},
                                 {CTN_OP_CONV2D_INTEGER, 4, 4, 0, 1},  {CTN_OP_QLINEAR_CONV2D, 9, 4, 0, 3},
                                 {CTN_OP_QLINEAR_ADD, 8, 0, 0, 3}};

}  // namespace

ctn_status make_quant_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const char *op = sig->op;
  const QuantOp *q = nullptr;
  for (const QuantOp &k : kQuantOps)
    if (!std::strcmp(op, k.name)) q = &k;
  if (!q) return CTN_OK;
  *handled = true;
  if (!quant_signature_ok(sig, q->n_in, q->rank, q->ix, q->iw))
    return be->host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu %s: needs %u inputs of the ranks ops.h gives", op,
                               q->n_in);
  if (!std::strcmp(op, CTN_OP_QUANTIZE_LINEAR)) return make_affine(be, sig, out, true);
  if (!std::strcmp(op, CTN_OP_DEQUANTIZE_LINEAR)) return make_affine(be, sig, out, false);
  if (!std::strcmp(op, CTN_OP_MATMUL_INTEGER)) return make_int_matmul(be, sig, out, false);
  if (!std::strcmp(op, CTN_OP_QLINEAR_MATMUL)) return make_int_matmul(be, sig, out, true);
  if (!std::strcmp(op, CTN_OP_CONV2D_INTEGER)) return make_int_conv(be, sig, out, false);
  if (!std::strcmp(op, CTN_OP_QLINEAR_ADD)) return make_qadd(be, sig, out);
  return make_int_conv(be, sig, out, true);
}

}  // namespace ctn_cpu
