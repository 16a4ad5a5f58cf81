// Elementwise kernels: unary, binary with broadcasting, comparisons, where, cast, copy and the
// elementwise backward helpers. Each kernel is a template instance chosen at get_kernel time;
// broadcast strides are precomputed then, so a call is a pointer fetch and a loop.
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu_backend.h"
#include "gemm.h"
#include "half.h"
#include "vmath.h"

namespace ctn_cpu {
namespace {

struct Params {
  double f0 = 0, f1 = 0;
};

constexpr int kMaxIn = kEwMaxIn;

// The output walk (n, nin, mode, general, nd, shape, str: backends/common/kernel_util.h).
struct EwState : KernelBase, EwWalk {
  Params p;
  int64_t threshold = 0;   // parallel above this many elements
  VmathFn vm = nullptr;    // f32 exp/log/tanh/sigmoid: the vectorised array function (vmath.h)
  const HalfIsa *hi = nullptr;  // f16/bf16 operands: the array conversions (half.h)
  int32_t hdt = -1;             // their dtype; for cast the source, hdt_to the target
  int32_t hdt_to = -1;
};

// Runs part(ctx, i0, i1) over the state's n elements: on the calling thread when small.
void ew_run(const EwState *st, void (*part)(void *, int64_t, int64_t, int), void *ctx) {
  if (st->n < st->threshold || st->be->pool->size() == 1) part(ctx, 0, st->n, 0);
  else st->be->pool->parallel_for(st->n, st->threshold / 2, part, ctx);
}

// ---- functors -------------------------------------------------------------------------------
// The arithmetic ones (Neg, Exp, ..., SigmoidGrad: one per formula of backends/common/ew_ops.py)
// and their table rows (CTN_EW_CPU_ROWS) are generated into cpu_ew_ops.h. The f32 exp, log, tanh
// and sigmoid also have vectorised array versions (vmath.h), chosen in make_elementwise_kernel:
// hand-written AVX2/AVX-512 code that a formula does not describe.
#define CTN_EW_CPU_FUNCTORS
#include "cpu_ew_ops.h"

template <class T> struct Eq { Params p; uint8_t operator()(T a, T b) const { return a == b; } };
template <class T> struct Ne { Params p; uint8_t operator()(T a, T b) const { return a != b; } };
template <class T> struct Lt { Params p; uint8_t operator()(T a, T b) const { return a < b; } };
template <class T> struct Le { Params p; uint8_t operator()(T a, T b) const { return a <= b; } };
template <class T> struct Gt { Params p; uint8_t operator()(T a, T b) const { return a > b; } };
template <class T> struct Ge { Params p; uint8_t operator()(T a, T b) const { return a >= b; } };

template <class T> struct Where {
  Params p;
  T operator()(uint8_t c, T a, T b) const { return c ? a : b; }
};

// Float -> integer conversion is undefined out of range in C++: saturate, NaN -> 0.
template <class TO, class TI> struct Cast {
  Params p;
  TO operator()(TI x) const {
    if constexpr (std::is_same_v<TO, bool>) {
      return x != TI(0);
    } else if constexpr (std::is_same_v<TO, F16> || std::is_same_v<TO, BF16>) {
      return TO(static_cast<double>(x));  // one rounding, to nearest even (exact from f32)
    } else if constexpr (std::is_floating_point_v<TI> && std::is_integral_v<TO>) {
      if (x != x) return TO(0);
      if (x <= TI(std::numeric_limits<TO>::min())) return std::numeric_limits<TO>::min();
      if (x >= TI(std::numeric_limits<TO>::max())) return std::numeric_limits<TO>::max();
      return static_cast<TO>(x);
    } else {
      return static_cast<TO>(x);
    }
  }
};

// A bool byte is read as uint8_t: a byte other than 0 or 1 (the contract, types.h) is true, never
// undefined behaviour (found by fuzz_graph: a constant of random bytes cast to f32).
template <class TO> struct CastFromBool {
  Params p;
  TO operator()(uint8_t x) const { return static_cast<TO>(x != 0 ? 1.0f : 0.0f); }
};

// ---- the loops ------------------------------------------------------------------------------
template <class Op, class TO, class TA, class TB, class TC, int NIN>
struct EwCall {
  const EwState *st;
  Op op;
  TO *o;
  const TA *a;
  const TB *b;
  const TC *c;

  void flat(int64_t i0, int64_t i1) const {
    TO *__restrict out = o;
    if constexpr (NIN == 1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = op(a[i]);
    } else if constexpr (NIN == 2) {
      if (st->mode[0] == 0 && st->mode[1] == 0) {
        for (int64_t i = i0; i < i1; ++i) out[i] = op(a[i], b[i]);
      } else if (st->mode[0] == 0) {
        const TB bv = b[0];
        for (int64_t i = i0; i < i1; ++i) out[i] = op(a[i], bv);
      } else {
        const TA av = a[0];
        for (int64_t i = i0; i < i1; ++i) out[i] = op(av, b[i]);
      }
    } else {
      int64_t sa = st->mode[0] == 0, sb = st->mode[1] == 0, sc = st->mode[2] == 0;
      for (int64_t i = i0; i < i1; ++i) out[i] = op(a[i * sa], b[i * sb], c[i * sc]);
    }
  }

  void strided(int64_t i0, int64_t i1) const {
    const int nd = st->nd;
    int64_t idx[CTN_MAX_DIMS];
    ctn_backend_util::unravel(i0, nd, st->shape, idx);
    const int64_t inner = st->shape[nd - 1];
    const int64_t s0 = st->str[0][nd - 1], s1 = st->str[1][nd - 1], s2 = st->str[2][nd - 1];
    int64_t pos = i0;
    while (pos < i1) {
      int64_t off[kMaxIn] = {0, 0, 0};
      for (int k = 0; k < nd; ++k)
        for (int j = 0; j < NIN; ++j) off[j] += idx[k] * st->str[j][k];
      int64_t len = inner - idx[nd - 1];
      if (len > i1 - pos) len = i1 - pos;
      TO *out = o + pos;
      const TA *pa = a + off[0];
      if constexpr (NIN == 1) {
        for (int64_t t = 0; t < len; ++t) out[t] = op(pa[t * s0]);
      } else if constexpr (NIN == 2) {
        const TB *pb = b + off[1];
        if (s0 == 1 && s1 == 1) {
          for (int64_t t = 0; t < len; ++t) out[t] = op(pa[t], pb[t]);
        } else if (s0 == 1 && s1 == 0) {
          const TB bv = pb[0];
          for (int64_t t = 0; t < len; ++t) out[t] = op(pa[t], bv);
        } else if (s0 == 0 && s1 == 1) {
          const TA av = pa[0];
          for (int64_t t = 0; t < len; ++t) out[t] = op(av, pb[t]);
        } else {
          for (int64_t t = 0; t < len; ++t) out[t] = op(pa[t * s0], pb[t * s1]);
        }
      } else {
        const TB *pb = b + off[1];
        const TC *pc = c + off[2];
        for (int64_t t = 0; t < len; ++t) out[t] = op(pa[t * s0], pb[t * s1], pc[t * s2]);
      }
      pos += len;
      idx[nd - 1] += len;
      for (int k = nd - 1; k > 0 && idx[k] >= st->shape[k]; --k) {
        idx[k] = 0;
        ++idx[k - 1];
      }
    }
  }

  void range(int64_t i0, int64_t i1) const {
    if (i0 >= i1) return;  // an empty result: strided() would divide by its zero-length dimension
    if (st->general) strided(i0, i1);
    else flat(i0, i1);
  }
  static void part(void *ctx, int64_t i0, int64_t i1, int) {
    static_cast<const EwCall *>(ctx)->range(i0, i1);
  }
};

template <class Op, class TO, class TA, class TB = TA, class TC = TA, int NIN = 1>
ctn_status ew_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const EwState *>(state);
  EwCall<Op, TO, TA, TB, TC, NIN> call{st, Op{st->p}, desc_ptr<TO>(args->outputs[0]),
                                       desc_ptr<const TA>(args->inputs[0]), nullptr, nullptr};
  if constexpr (NIN >= 2) call.b = desc_ptr<const TB>(args->inputs[1]);
  if constexpr (NIN >= 3) call.c = desc_ptr<const TC>(args->inputs[2]);
  ew_run(st, decltype(call)::part, &call);
  return CTN_OK;
}

// ---- f16 / bf16 ---------------------------------------------------------------------------------
// The 16-bit loops of every formula: blocks of the inputs converted to f32 (vectorised), the f32
// functor (or vmath array function) over the block, the result rounded back. A broadcast that
// needs the strided walk runs the same functor through the scalar storage types instead.
constexpr int64_t kHalfBlock = 256;

template <class Op, int NIN>
struct HalfCall {
  const EwState *st;
  Op op;
  uint16_t *o;
  const uint16_t *in[2];

  void range(int64_t i0, int64_t i1) const {
    float buf[NIN + 1][kHalfBlock];
    const HalfToF32 widen = st->hi->widen(st->hdt);
    for (int64_t b = i0; b < i1; b += kHalfBlock) {
      const int64_t len = std::min(kHalfBlock, i1 - b);
      for (int j = 0; j < NIN; ++j) {
        if (st->mode[j] == 0) {
          widen(in[j] + b, buf[j], len);
        } else {
          widen(in[j], buf[j], 1);  // one element: broadcast
          std::fill(buf[j] + 1, buf[j] + len, buf[j][0]);
        }
      }
      float *__restrict y = buf[NIN];
      if (st->vm) st->vm(buf[0], y, len);
      else if constexpr (NIN == 1) for (int64_t t = 0; t < len; ++t) y[t] = op(buf[0][t]);
      else for (int64_t t = 0; t < len; ++t) y[t] = op(buf[0][t], buf[1][t]);
      st->hi->narrow(st->hdt)(y, o + b, len);
    }
  }
  static void part(void *ctx, int64_t i0, int64_t i1, int) {
    static_cast<const HalfCall *>(ctx)->range(i0, i1);
  }
};

template <class Op, int NIN>
ctn_status ew_half_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const EwState *>(state);
  if (st->general)
    return st->hdt == CTN_F16 ? ew_kernel<Op, F16, F16, F16, F16, NIN>(state, args)
                              : ew_kernel<Op, BF16, BF16, BF16, BF16, NIN>(state, args);
  HalfCall<Op, NIN> call{st, Op{st->p}, desc_ptr<uint16_t>(args->outputs[0]),
                         {desc_ptr<const uint16_t>(args->inputs[0]),
                          NIN > 1 ? desc_ptr<const uint16_t>(args->inputs[1]) : nullptr}};
  ew_run(st, decltype(call)::part, &call);
  return CTN_OK;
}

// Casts among f32, f16 and bf16: the array conversions, through an f32 block between the two
// 16-bit floats.
void half_cast_part(void *ctx, int64_t i0, int64_t i1, int) {
  const auto *c = static_cast<const std::pair<const EwState *, const ctn_kernel_args *> *>(ctx);
  const EwState *st = c->first;
  const char *src = desc_ptr<const char>(c->second->inputs[0]);
  char *dst = desc_ptr<char>(c->second->outputs[0]);
  float buf[kHalfBlock];
  for (int64_t b = i0; b < i1; b += kHalfBlock) {
    const int64_t len = std::min(kHalfBlock, i1 - b);
    const float *f = buf;
    if (st->hdt == CTN_F32) f = reinterpret_cast<const float *>(src) + b;
    else st->hi->widen(st->hdt)(reinterpret_cast<const uint16_t *>(src) + b, buf, len);
    if (st->hdt_to == CTN_F32) std::memcpy(reinterpret_cast<float *>(dst) + b, f, len * sizeof(float));
    else st->hi->narrow(st->hdt_to)(f, reinterpret_cast<uint16_t *>(dst) + b, len);
  }
}

ctn_status half_cast_kernel(void *state, const ctn_kernel_args *args) {
  std::pair<const EwState *, const ctn_kernel_args *> ctx{static_cast<const EwState *>(state), args};
  ew_run(ctx.first, half_cast_part, &ctx);
  return CTN_OK;
}

// f32 exp, log, tanh, sigmoid: the vectorised array functions, in chunks over the pool.
void vm_part(void *ctx, int64_t i0, int64_t i1, int) {
  const auto *c = static_cast<const std::pair<const EwState *, const ctn_kernel_args *> *>(ctx);
  const float *x = desc_ptr<const float>(c->second->inputs[0]);
  float *y = desc_ptr<float>(c->second->outputs[0]);
  c->first->vm(x + i0, y + i0, i1 - i0);
}

ctn_status vm_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const EwState *>(state);
  std::pair<const EwState *, const ctn_kernel_args *> ctx{st, args};
  ew_run(st, vm_part, &ctx);
  return CTN_OK;
}

ctn_status copy_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const EwState *>(state);
  void *dst = desc_ptr<char>(args->outputs[0]);
  const void *src = desc_ptr<const char>(args->inputs[0]);
  if (dst != src) std::memmove(dst, src, static_cast<size_t>(st->n));  // n is bytes here
  return CTN_OK;
}

// ---- kernel choice --------------------------------------------------------------------------
enum Kind { kUnary, kUnaryInt, kBinary, kBinaryInt, kCompare, kGrad, kWhere, kCast, kCopy };

struct OpEntry {
  const char *name;
  Kind kind;
  bool heavy;  // transcendental: worth threads at smaller sizes
  ctn_kernel_fn f32, f64, i32, i64;
  ctn_kernel_fn half;  // f16 and bf16 (the dtype is in the state)
  // The 1.6 integers, from the same functors: i16 as int16_t (int arithmetic, no overflow),
  // u16 in uint32_t (uint16_t would promote to int, where 65535 * 65535 overflows), u32 and u64
  // in their own types; each result is stored modulo 2^bits (wrap-around, as C's unsigned types).
  ctn_kernel_fn i16, u16, u32, u64;
};

// Every formula's row gets its 16-bit kernel from its f32 functor (ew_half_kernel).
// The integer kernels of a formula with integer semantics: storage type S computed as C.
#define CTN_EW_INT(F, S, C, NIN) ew_kernel<F<C>, S, S, S, S, NIN>
#define CTN_EW_INTS(F, NIN)                                                                 \
  CTN_EW_INT(F, int32_t, int32_t, NIN), CTN_EW_INT(F, int64_t, int64_t, NIN),               \
      ew_half_kernel<F<float>, NIN>, CTN_EW_INT(F, int16_t, int16_t, NIN),                  \
      CTN_EW_INT(F, uint16_t, uint32_t, NIN), CTN_EW_INT(F, uint32_t, uint32_t, NIN),       \
      CTN_EW_INT(F, uint64_t, uint64_t, NIN)
#define CTN_UNARY(name, F, heavy)                                              \
  {name, kUnary, heavy, ew_kernel<F<float>, float, float>,                     \
   ew_kernel<F<double>, double, double>, nullptr, nullptr, ew_half_kernel<F<float>, 1>, \
   nullptr, nullptr, nullptr, nullptr}
#define CTN_UNARY_INT(name, F)                                                 \
  {name, kUnaryInt, false, ew_kernel<F<float>, float, float>,                  \
   ew_kernel<F<double>, double, double>, CTN_EW_INTS(F, 1)}
#define CTN_BIN(name, kind, F, heavy)                                          \
  {name, kind, heavy, ew_kernel<F<float>, float, float, float, float, 2>,      \
   ew_kernel<F<double>, double, double, double, double, 2>, nullptr, nullptr,  \
   ew_half_kernel<F<float>, 2>, nullptr, nullptr, nullptr, nullptr}
#define CTN_BIN_INT(name, F)                                                   \
  {name, kBinaryInt, false, ew_kernel<F<float>, float, float, float, float, 2>, \
   ew_kernel<F<double>, double, double, double, double, 2>, CTN_EW_INTS(F, 2)}

const OpEntry kOps[] = {
    CTN_EW_CPU_ROWS,
    {CTN_OP_EQ, kCompare, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_NE, kCompare, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_LT, kCompare, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_LE, kCompare, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_GT, kCompare, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_GE, kCompare, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_WHERE, kWhere, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_CAST, kCast, false, nullptr, nullptr, nullptr, nullptr, nullptr},
    {CTN_OP_COPY, kCopy, false, nullptr, nullptr, nullptr, nullptr, nullptr},
};

// Same kernel for every element type of one size class; comparisons read each dtype exactly.
template <template <class> class F>
ctn_kernel_fn compare_fn(int32_t dtype) {
  switch (dtype) {
    case CTN_F32: return ew_kernel<F<float>, uint8_t, float, float, float, 2>;
    case CTN_F64: return ew_kernel<F<double>, uint8_t, double, double, double, 2>;
    case CTN_I32: return ew_kernel<F<int32_t>, uint8_t, int32_t, int32_t, int32_t, 2>;
    case CTN_I64: return ew_kernel<F<int64_t>, uint8_t, int64_t, int64_t, int64_t, 2>;
    case CTN_I8: return ew_kernel<F<int8_t>, uint8_t, int8_t, int8_t, int8_t, 2>;
    case CTN_I16: return ew_kernel<F<int16_t>, uint8_t, int16_t, int16_t, int16_t, 2>;
    case CTN_U16: return ew_kernel<F<uint16_t>, uint8_t, uint16_t, uint16_t, uint16_t, 2>;
    case CTN_U32: return ew_kernel<F<uint32_t>, uint8_t, uint32_t, uint32_t, uint32_t, 2>;
    case CTN_U64: return ew_kernel<F<uint64_t>, uint8_t, uint64_t, uint64_t, uint64_t, 2>;
    case CTN_F16: return ew_kernel<F<float>, uint8_t, F16, F16, F16, 2>;
    case CTN_BF16: return ew_kernel<F<float>, uint8_t, BF16, BF16, BF16, 2>;
    default: return ew_kernel<F<uint8_t>, uint8_t, uint8_t, uint8_t, uint8_t, 2>;
  }
}

ctn_kernel_fn compare_fn(const char *op, int32_t dtype) {
  if (!std::strcmp(op, CTN_OP_EQ)) return compare_fn<Eq>(dtype);
  if (!std::strcmp(op, CTN_OP_NE)) return compare_fn<Ne>(dtype);
  if (!std::strcmp(op, CTN_OP_LT)) return compare_fn<Lt>(dtype);
  if (!std::strcmp(op, CTN_OP_LE)) return compare_fn<Le>(dtype);
  if (!std::strcmp(op, CTN_OP_GT)) return compare_fn<Gt>(dtype);
  return compare_fn<Ge>(dtype);
}

ctn_kernel_fn where_fn(int32_t dtype) {
  switch (dtype_size(dtype)) {  // a select only moves bits
    case 1: return ew_kernel<Where<uint8_t>, uint8_t, uint8_t, uint8_t, uint8_t, 3>;
    case 2: return ew_kernel<Where<uint16_t>, uint16_t, uint8_t, uint16_t, uint16_t, 3>;
    case 4: return ew_kernel<Where<uint32_t>, uint32_t, uint8_t, uint32_t, uint32_t, 3>;
    default: return ew_kernel<Where<uint64_t>, uint64_t, uint8_t, uint64_t, uint64_t, 3>;
  }
}

template <class TO>
ctn_kernel_fn cast_from(int32_t from) {
  switch (from) {
    case CTN_F32: return ew_kernel<Cast<TO, float>, TO, float>;
    case CTN_F64: return ew_kernel<Cast<TO, double>, TO, double>;
    case CTN_I32: return ew_kernel<Cast<TO, int32_t>, TO, int32_t>;
    case CTN_I64: return ew_kernel<Cast<TO, int64_t>, TO, int64_t>;
    case CTN_U8: return ew_kernel<Cast<TO, uint8_t>, TO, uint8_t>;
    case CTN_I8: return ew_kernel<Cast<TO, int8_t>, TO, int8_t>;
    case CTN_I16: return ew_kernel<Cast<TO, int16_t>, TO, int16_t>;
    case CTN_U16: return ew_kernel<Cast<TO, uint16_t>, TO, uint16_t>;
    case CTN_U32: return ew_kernel<Cast<TO, uint32_t>, TO, uint32_t>;
    case CTN_U64: return ew_kernel<Cast<TO, uint64_t>, TO, uint64_t>;
    // From a 16-bit float: the value as an f32 (exact), then f32's rule.
    case CTN_F16: return ew_kernel<Cast<TO, float>, TO, F16>;
    case CTN_BF16: return ew_kernel<Cast<TO, float>, TO, BF16>;
    default: return ew_kernel<CastFromBool<TO>, TO, uint8_t>;
  }
}

ctn_kernel_fn cast_fn(int32_t from, int32_t to) {
  switch (to) {
    case CTN_F32: return cast_from<float>(from);
    case CTN_F64: return cast_from<double>(from);
    case CTN_I32: return cast_from<int32_t>(from);
    case CTN_I64: return cast_from<int64_t>(from);
    case CTN_U8: return cast_from<uint8_t>(from);
    case CTN_I8: return cast_from<int8_t>(from);
    case CTN_I16: return cast_from<int16_t>(from);
    case CTN_U16: return cast_from<uint16_t>(from);
    case CTN_U32: return cast_from<uint32_t>(from);
    case CTN_U64: return cast_from<uint64_t>(from);
    case CTN_F16: return cast_from<F16>(from);
    case CTN_BF16: return cast_from<BF16>(from);
    default: return cast_from<bool>(from);
  }
}


}  // namespace

ctn_status make_elementwise_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                                   bool *handled) {
  const OpEntry *e = nullptr;
  for (const OpEntry &cand : kOps)
    if (std::strcmp(cand.name, sig->op) == 0) e = &cand;
  if (!e) return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const char *op = sig->op;
  const ctn_tensor_desc &o = *sig->output;
  const ctn_tensor_desc &a = sig->inputs[0];
  auto st = new_state<EwState>(be);
  st->p.f0 = sig->attrs->f[0];
  st->p.f1 = sig->attrs->f[1];
  st->threshold = e->heavy ? kParallelThresholdHeavy : kParallelThreshold;
  ctn_kernel_fn fn = nullptr;
  int32_t dt = a.dtype;
  st->hi = &half_for(be->gemm_isa.load()->name);
  if (ctn_desc_is_half(dt)) st->hdt = dt;
  // f32, f16 and bf16 among themselves: the vectorised array conversions.
  auto f32_or_half = [](int32_t t) { return t == CTN_F32 || ctn_desc_is_half(t); };

  auto pick = [&]() -> ctn_kernel_fn {
    switch (dt) {
      case CTN_F32: return e->f32;
      case CTN_F64: return e->f64;
      case CTN_I32: return e->i32;
      case CTN_I64: return e->i64;
      case CTN_F16:
      case CTN_BF16: return e->half;
      case CTN_I16: return e->i16;
      case CTN_U16: return e->u16;
      case CTN_U32: return e->u32;
      case CTN_U64: return e->u64;
      default: return nullptr;
    }
  };

  switch (e->kind) {
    case kCopy:
    case kCast: {
      const int32_t to = o.dtype;
      if (to == dt) {
        st->n = desc_numel(o) * static_cast<int64_t>(dtype_size(dt));
        kernel_set(out, copy_kernel, st.release(), CTN_KERNEL_INPLACE_OK);
        return CTN_OK;
      }
      if (f32_or_half(dt) && f32_or_half(to)) {
        st->hdt = dt;
        st->hdt_to = to;
        fn = half_cast_kernel;
      } else {
        fn = cast_fn(dt, to);
      }
      break;
    }
    case kUnary:
    case kUnaryInt:
    case kGrad:
    case kBinary:
    case kBinaryInt:
    case kCompare: {
      fn = e->kind == kCompare ? compare_fn(op, dt) : pick();
      if (!fn)
        return host->set_error(CTN_ERR_UNSUPPORTED, "cpu %s: dtype %s is not supported (%s)", op,
                               dtype_name(dt),
                               e->kind == kUnaryInt || e->kind == kBinaryInt
                                   ? "f32, f64, f16, bf16, i16, i32, i64, u16, u32, u64 only"
                                   : "f32, f64, f16 and bf16 only");
      break;
    }
    case kWhere:
      dt = sig->inputs[1].dtype;
      fn = where_fn(dt);
      break;
  }
  static_cast<EwWalk &>(*st) = ew_walk(sig);
  if (e->kind == kUnary && (dt == CTN_F32 || st->hdt >= 0) && !st->general) {
    const VmathIsa &vm = vmath_for(be->gemm_isa.load()->name);
    const bool is_exp = !std::strcmp(op, CTN_OP_EXP), is_log = !std::strcmp(op, CTN_OP_LOG),
               is_tanh = !std::strcmp(op, CTN_OP_TANH), is_sig = !std::strcmp(op, CTN_OP_SIGMOID);
    st->vm = is_exp ? vm.exp : is_log ? vm.log : is_tanh ? vm.tanh : is_sig ? vm.sigmoid : nullptr;
    if (st->vm && dt == CTN_F32) fn = vm_kernel;  // the 16-bit kernel runs vm on its blocks
  }
  uint32_t flags = 0;
  if (e->kind != kWhere && e->kind != kCast && e->kind != kCompare && same_shape(a, o) &&
      a.dtype == o.dtype)
    flags = CTN_KERNEL_INPLACE_OK;
  kernel_set(out, fn, st.release(), flags);
  return CTN_OK;
}

}  // namespace ctn_cpu
