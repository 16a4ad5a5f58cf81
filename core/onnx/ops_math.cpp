// ONNX elementwise ops, activations, comparisons, reductions and softmax, lowered to chutney ops.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <limits>
#include <string>

namespace ctn::onnx {
namespace {

using namespace lower;

void out1(NodeCtx &c, ctn_node y) { c.outs = {y}; }

ctn_node where3(Graph &g, ctn_node cond, ctn_node a, ctn_node b) {
  ctn_node in[3] = {cond, a, b};
  return g.add_op(CTN_OP_WHERE, 3, in, nullptr);
}

ctn_node need_floating(NodeCtx &c, size_t i) {
  ctn_node x = c.in(i);
  if (!dtype_is_float(c.dtype(i))) c.unsupported("input %zu has dtype %s; this op is lowered for float and double only", i, dtype_name(c.dtype(i)));
  return x;
}

// ---- unary --------------------------------------------------------------------------------------
template <const char *Op>
void unary_any(NodeCtx &c) { out1(c, unary(c.g, Op, c.in(0))); }
template <const char *Op>
void unary_float(NodeCtx &c) { out1(c, c.g.op1(Op, need_floating(c, 0))); }

constexpr char kNeg[] = CTN_OP_NEG, kAbs[] = CTN_OP_ABS, kRelu[] = CTN_OP_RELU, kSign[] = CTN_OP_SIGN;
constexpr char kExp[] = CTN_OP_EXP, kLog[] = CTN_OP_LOG, kSqrt[] = CTN_OP_SQRT, kTanh[] = CTN_OP_TANH,
               kSigmoid[] = CTN_OP_SIGMOID, kErf[] = CTN_OP_ERF, kAtan[] = CTN_OP_ATAN,
               kSin[] = CTN_OP_SIN, kCos[] = CTN_OP_COS, kTan[] = CTN_OP_TAN, kAsin[] = CTN_OP_ASIN,
               kAcos[] = CTN_OP_ACOS, kSinh[] = CTN_OP_SINH, kCosh[] = CTN_OP_COSH, kAsinh[] = CTN_OP_ASINH,
               kAcosh[] = CTN_OP_ACOSH, kAtanh[] = CTN_OP_ATANH;

void reciprocal(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  out1(c, c.g.op2(CTN_OP_DIV, scalar_like(c.g, x, 1), x));
}
void softplus_(NodeCtx &c) { out1(c, softplus(c.g, need_floating(c, 0))); }
void softsign(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  out1(c, c.g.op2(CTN_OP_DIV, x, c.g.op2(CTN_OP_ADD, c.g.op1(CTN_OP_ABS, x), scalar_like(c.g, x, 1))));
}
void elu_(NodeCtx &c) { out1(c, elu(c.g, need_floating(c, 0), c.attr_f("alpha", 1.0))); }
void selu(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  double alpha = c.attr_f("alpha", 1.67326319217681884765625), gamma = c.attr_f("gamma", 1.05070102214813232421875);
  out1(c, c.g.op2(CTN_OP_MUL, elu(c.g, x, alpha), scalar_like(c.g, x, gamma)));
}
void celu(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  double alpha = c.attr_f("alpha", 1.0);
  ctn_node a = scalar_like(c.g, x, alpha);
  out1(c, c.g.op2(CTN_OP_MUL, elu(c.g, c.g.op2(CTN_OP_DIV, x, a), 1.0), a));
}
void hardsigmoid_(NodeCtx &c) {
  out1(c, hardsigmoid(c.g, need_floating(c, 0), c.attr_f("alpha", 0.2), c.attr_f("beta", 0.5)));
}
void hardswish(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  out1(c, c.g.op2(CTN_OP_MUL, x, hardsigmoid(c.g, x, 1.0 / 6, 0.5)));
}
void mish(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  out1(c, c.g.op2(CTN_OP_MUL, x, c.g.op1(CTN_OP_TANH, softplus(c.g, x))));
}
void swish(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  ctn_node ax = c.g.op2(CTN_OP_MUL, x, scalar_like(c.g, x, c.attr_f("alpha", 1.0)));
  out1(c, c.g.op2(CTN_OP_MUL, x, c.g.op1(CTN_OP_SIGMOID, ax)));
}
void leaky_relu(NodeCtx &c) {
  ctn_attrs a = attrs_f({c.attr_f("alpha", 0.01)});
  out1(c, c.g.op1(CTN_OP_LEAKY_RELU, need_floating(c, 0), &a));
}
void thresholded_relu(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  ctn_node keep = c.g.op2(CTN_OP_GT, x, scalar_like(c.g, x, c.attr_f("alpha", 1.0)));
  out1(c, where3(c.g, keep, x, scalar_like(c.g, x, 0)));
}
void prelu(NodeCtx &c) {
  ctn_node x = need_floating(c, 0), s = c.in(1);
  ctn_node neg = c.g.op2(CTN_OP_LT, x, scalar_like(c.g, x, 0));
  out1(c, where3(c.g, neg, c.g.op2(CTN_OP_MUL, x, s), x));
}
void gelu(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  std::string approx = c.attr_s("approximate", "none");
  if (approx == "none") return out1(c, c.g.op1(CTN_OP_GELU, x));
  if (approx != "tanh") c.unsupported("approximate='%s'", approx.c_str());
  Graph &g = c.g;
  ctn_node x3 = g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, x, x), x);
  ctn_node inner = g.op2(CTN_OP_MUL, g.op2(CTN_OP_ADD, x, g.op2(CTN_OP_MUL, x3, scalar_like(g, x, 0.044715))),
                         scalar_like(g, x, 0.79788456080286535588 /* sqrt(2 / pi) */));
  ctn_node t = g.op2(CTN_OP_ADD, g.op1(CTN_OP_TANH, inner), scalar_like(g, x, 1));
  out1(c, g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, x, t), scalar_like(g, x, 0.5)));
}
void floor_(NodeCtx &c) { out1(c, floor(c.g, need_floating(c, 0))); }
void ceil_(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  out1(c, c.g.op1(CTN_OP_NEG, floor(c.g, c.g.op1(CTN_OP_NEG, x))));
}
// x rounded to the nearest integer, ties to even (|x| < 2^52 for exactness).
ctn_node round_even(Graph &g, ctn_node x) {
  ctn_node r = floor(g, g.op2(CTN_OP_ADD, x, scalar_like(g, x, 0.5)));
  ctn_node tie = g.op2(CTN_OP_EQ, g.op2(CTN_OP_SUB, r, x), scalar_like(g, x, 0.5));
  ctn_node half = floor(g, g.op2(CTN_OP_MUL, r, scalar_like(g, x, 0.5)));
  ctn_node odd = g.op2(CTN_OP_NE, g.op2(CTN_OP_MUL, half, scalar_like(g, x, 2)), r);
  ctn_node fix = where3(g, tie, cast(g, odd, g.info(x).dtype), scalar_like(g, x, 0));
  return g.op2(CTN_OP_SUB, r, fix);
}
void round_(NodeCtx &c) { out1(c, round_even(c.g, need_floating(c, 0))); }
void isnan(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  out1(c, c.g.op2(CTN_OP_NE, x, x));
}
void isinf(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = need_floating(c, 0);
  bool pos = c.attr_i("detect_positive", 1) != 0, neg = c.attr_i("detect_negative", 1) != 0;
  const double inf = std::numeric_limits<double>::infinity();
  ctn_node p = g.op2(CTN_OP_EQ, x, scalar_like(g, x, inf)), n = g.op2(CTN_OP_EQ, x, scalar_like(g, x, -inf));
  ctn_node f = g.add_scalar(CTN_BOOL, 0);
  if (pos && neg) return out1(c, where3(g, p, p, n));
  out1(c, pos ? p : neg ? n : where3(g, p, f, f));
}

// ---- binary and variadic -------------------------------------------------------------------------
template <const char *Op>
void binary_any(NodeCtx &c) { out1(c, binary(c.g, Op, c.in(0), c.in(1))); }
constexpr char kAdd[] = CTN_OP_ADD, kSub[] = CTN_OP_SUB, kMul[] = CTN_OP_MUL, kDiv[] = CTN_OP_DIV;

void pow_(NodeCtx &c) {
  ctn_node a = c.in(0), b = c.in(1);
  if (dtype_is_float(c.dtype(0))) return out1(c, c.g.op2(CTN_OP_POW, a, cast(c.g, b, c.dtype(0))));
  out1(c, cast(c.g, c.g.op2(CTN_OP_POW, cast(c.g, a, CTN_F64), cast(c.g, b, CTN_F64)), c.dtype(0)));
}
void mod(NodeCtx &c) {
  Graph &g = c.g;
  const bool fmod = c.attr_i("fmod", 0) != 0;
  const int32_t dt = c.dtype(0);
  ctn_node a = cast(g, c.in(0), CTN_F64), b = cast(g, c.in(1), CTN_F64);
  ctn_node q = g.op2(CTN_OP_DIV, a, b);
  ctn_node qi = fmod ? cast(g, cast(g, q, CTN_I64), CTN_F64) : floor(g, q);
  ctn_node r = g.op2(CTN_OP_SUB, a, g.op2(CTN_OP_MUL, b, qi));
  if (!fmod && dtype_is_float(dt)) {
    // numpy's edge cases: x mod +-inf is x when x is 0 or has the divisor's sign, else the
    // divisor; +-inf mod y and x mod 0 are NaN.
    ctn_node zero = g.add_scalar(CTN_F64, 0), inf = g.add_scalar(CTN_F64, std::numeric_limits<double>::infinity());
    ctn_node same = where3(g, g.op2(CTN_OP_EQ, a, zero), g.add_scalar(CTN_BOOL, 1),
                           g.op2(CTN_OP_EQ, g.op2(CTN_OP_LT, a, zero), g.op2(CTN_OP_LT, b, zero)));
    r = where3(g, g.op2(CTN_OP_EQ, g.op1(CTN_OP_ABS, b), inf), where3(g, same, a, b), r);
    ctn_node bad = where3(g, g.op2(CTN_OP_EQ, g.op1(CTN_OP_ABS, a), inf), g.add_scalar(CTN_BOOL, 1), g.op2(CTN_OP_EQ, b, zero));
    r = where3(g, bad, g.add_scalar(CTN_F64, std::numeric_limits<double>::quiet_NaN()), r);
  }
  out1(c, cast(g, r, dt));
}
template <const char *Op>
void variadic(NodeCtx &c) {
  ctn_node acc = c.in(0);
  for (size_t k = 1; k < c.n_in(); ++k) acc = binary(c.g, Op, acc, c.in(k));
  out1(c, acc);
}
constexpr char kMax[] = CTN_OP_MAXIMUM, kMin[] = CTN_OP_MINIMUM;
void mean_(NodeCtx &c) {
  variadic<kAdd>(c);
  c.outs[0] = binary(c.g, CTN_OP_DIV, c.outs[0], scalar_like(c.g, c.outs[0], static_cast<double>(c.n_in())));
}

// ---- comparisons and logic -----------------------------------------------------------------------
template <const char *Op>
void compare(NodeCtx &c) { out1(c, c.g.op2(Op, c.in(0), c.in(1))); }
constexpr char kEq[] = CTN_OP_EQ, kLt[] = CTN_OP_LT, kLe[] = CTN_OP_LE, kGt[] = CTN_OP_GT, kGe[] = CTN_OP_GE;

ctn_node need_bool(NodeCtx &c, size_t i) {
  if (c.dtype(i) != CTN_BOOL) c.invalid("input %zu must be bool, got %s", i, dtype_name(c.dtype(i)));
  return c.in(i);
}
void not_(NodeCtx &c) { out1(c, logical_not(c.g, need_bool(c, 0))); }
void and_(NodeCtx &c) {
  ctn_node a = need_bool(c, 0), b = need_bool(c, 1);
  out1(c, where3(c.g, a, b, c.g.add_scalar(CTN_BOOL, 0)));
}
void or_(NodeCtx &c) {
  ctn_node a = need_bool(c, 0), b = need_bool(c, 1);
  out1(c, where3(c.g, a, c.g.add_scalar(CTN_BOOL, 1), b));
}
void xor_(NodeCtx &c) { out1(c, c.g.op2(CTN_OP_NE, need_bool(c, 0), need_bool(c, 1))); }
void where_(NodeCtx &c) { out1(c, where3(c.g, need_bool(c, 0), c.in(1), c.in(2))); }

// ---- casts and clipping --------------------------------------------------------------------------
// Cast to a float8 type (importer.h, Float8): x rounded to nearest even on the format's grid, as
// an f16 (which holds every float8 value). In f64: the grid step of |x| is 2^(emin - mbits) times
// 2 for every power of two from 2^(emin + 1) up to the largest binade that |x| reaches (a count of
// comparisons against those constants: exact, no log2); |x| is first clipped to twice the largest
// value so that the quotient stays small. Past the largest value: the largest (saturate, as
// ONNX's clip-then-cast reference), else infinity for E5M2 and NaN for the others; NaN stays NaN.
ctn_node cast_to_float8(Graph &g, ctn_node x_in, const Float8 &f, bool saturate) {
  ctn_node x = cast(g, x_in, CTN_F64);
  const Shape s = g.info(x).shape;
  const int emin = 1 - f.bias, top = std::ilogb(f.max);
  std::vector<double> steps;
  for (int e = emin + 1; e <= top; ++e) steps.push_back(std::ldexp(1.0, e));
  Shape sx = s, sp;
  sx[sx.ndim++] = 1;
  sp.ndim = sx.ndim;
  for (uint32_t k = 0; k + 1 < sp.ndim; ++k) sp[k] = 1;
  sp[sp.ndim - 1] = static_cast<int64_t>(steps.size());
  ctn_node a = g.op2(CTN_OP_MINIMUM, g.op1(CTN_OP_ABS, x), g.add_scalar(CTN_F64, 2 * f.max));
  ctn_node n = cast(g, g.op2(CTN_OP_GE, reshape(g, a, sx), const_f(g, CTN_F64, steps, sp)), CTN_F64);
  n = reduce(g, CTN_OP_SUM, n, 1ull << (sx.ndim - 1), false);
  ctn_node q = g.op2(CTN_OP_POW, g.add_scalar(CTN_F64, 2),
                     g.op2(CTN_OP_ADD, n, g.add_scalar(CTN_F64, emin - f.mbits)));
  ctn_node r = g.op2(CTN_OP_MUL, round_even(g, g.op2(CTN_OP_DIV, a, q)), q);
  const double over = saturate ? f.max : f.has_inf ? std::numeric_limits<double>::infinity()
                                                   : std::numeric_limits<double>::quiet_NaN();
  r = where3(g, g.op2(CTN_OP_GT, r, g.add_scalar(CTN_F64, f.max)), g.add_scalar(CTN_F64, over), r);
  r = where3(g, g.op2(CTN_OP_LT, x, g.add_scalar(CTN_F64, 0)), g.op1(CTN_OP_NEG, r), r);
  return cast(g, where3(g, g.op2(CTN_OP_NE, x, x), x, r), CTN_F16);
}

void cast_(NodeCtx &c) {
  int64_t to = c.attr_i("to", -1);
  if (const Float8 *f8 = float8_format(static_cast<int32_t>(to)))
    return out1(c, cast_to_float8(c.g, c.in(0), *f8, c.attr_i("saturate", 1) != 0));
  c.ignore("saturate");
  int32_t dt = dtype_from_onnx(static_cast<int32_t>(to));
  if (dt < 0) c.unsupported("cast to %s (chutney has float, double, float16, bfloat16, int8, int16, int32, int64, uint8, uint16, uint32, uint64 and bool)", data_type_name(static_cast<int32_t>(to)));
  out1(c, cast(c.g, c.in(0), dt));
}
void cast_like(NodeCtx &c) {
  if (const Float8 *f8 = float8_format(c.declared_type(1)))
    return out1(c, cast_to_float8(c.g, c.in(0), *f8, c.attr_i("saturate", 1) != 0));
  c.ignore("saturate");
  out1(c, cast(c.g, c.in(0), c.dtype(1)));
}
void clip(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = c.in(0);
  const int32_t dt = c.dtype(0);
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (c.has_attr("min") || c.has_attr("max")) {  // opsets < 11
    lo = c.attr_f("min", lo);
    hi = c.attr_f("max", hi);
  }
  bool dynamic = (c.has(1) && !c.konst(1)) || (c.has(2) && !c.konst(2));
  if (dynamic) {
    ctn_node y = x;
    if (c.has(1)) y = binary(g, CTN_OP_MAXIMUM, y, c.in(1));
    if (c.has(2)) y = binary(g, CTN_OP_MINIMUM, y, c.in(2));
    return out1(c, y);
  }
  if (c.has(1)) lo = c.reals(1, "min").at(0);
  if (c.has(2)) hi = c.reals(2, "max").at(0);
  ctn_attrs a = attrs_f({lo, hi});
  if (lo > hi) {  // ONNX: every element becomes max
    ctn_attrs b = attrs_f({hi, hi});
    a = b;
  }
  if (dtype_is_float(dt)) return out1(c, g.op1(CTN_OP_CLAMP, x, &a));
  out1(c, cast(g, g.op1(CTN_OP_CLAMP, cast(g, x, CTN_F64), &a), dt));
}

// ---- reductions ----------------------------------------------------------------------------------
struct Reduction {
  uint64_t mask = 0;
  bool keep = true;
  bool noop = false;  // empty axes with noop_with_empty_axes: the identity
};

Reduction reduction(NodeCtx &c) {
  Reduction r;
  const uint32_t nd = c.shape(0).ndim;
  r.keep = c.attr_i("keepdims", 1) != 0;
  bool noop_empty = c.attr_i("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes = c.has_attr("axes") ? c.attr_ints("axes") : c.has(1) ? c.ints(1, "axes") : std::vector<int64_t>{};
  if (axes.empty()) {
    r.noop = noop_empty;
    r.mask = nd ? (1ull << nd) - 1 : 0;
  }
  for (int64_t a : axes) r.mask |= 1ull << c.axis(a, nd);
  return r;
}

ctn_node reduce_to(NodeCtx &c, const Reduction &r, const char *op, ctn_node x) {
  return r.noop ? x : reduce(c.g, op, x, r.mask, r.keep);
}

// A reduction over an empty axis is its identity (0 for sums, -inf for max...), which chutney's
// reductions do not all define: such a node is a constant of the reduced shape.
bool empty_reduction(NodeCtx &c, const Reduction &r, double identity) {
  const Shape s = c.shape(0);
  bool empty = false;
  Shape out;
  for (uint32_t k = 0; k < s.ndim; ++k) {
    const bool red = (r.mask >> k) & 1;
    empty = empty || (red && s[k] == 0);
    if (!red) out[out.ndim++] = s[k];
    else if (r.keep) out[out.ndim++] = 1;
  }
  if (!empty || r.noop) return false;
  ctn_attrs a{};
  for (uint32_t k = 0; k < out.ndim; ++k) a.i[a.ni++] = out[k];
  const int32_t dt = c.dtype(0);
  if (dt == CTN_BOOL) identity = identity > 0 ? 1 : 0;  // max of nothing is false, min true
  ctn_node v = dtype_is_float(dt) ? c.g.add_scalar(dt, identity) : cast(c.g, c.g.add_scalar(CTN_F64, identity), dt);
  out1(c, c.g.op1(CTN_OP_BROADCAST_TO, v, &a));
  return true;
}
constexpr double kInf = std::numeric_limits<double>::infinity();

void reduce_sum(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, 0)) return;
  out1(c, reduce_to(c, r, CTN_OP_SUM, c.in(0)));
}
void reduce_mean(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, std::numeric_limits<double>::quiet_NaN())) return;
  out1(c, reduce_to(c, r, CTN_OP_MEAN, c.in(0)));
}
void reduce_max(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, -kInf)) return;
  out1(c, reduce_to(c, r, CTN_OP_MAX, c.in(0)));
}
void reduce_min_(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, kInf)) return;
  out1(c, r.noop ? c.in(0) : reduce_min(c.g, c.in(0), r.mask, r.keep));
}
void reduce_l1(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, 0)) return;
  out1(c, r.noop ? c.in(0) : reduce_to(c, r, CTN_OP_SUM, unary(c.g, CTN_OP_ABS, c.in(0))));
}
void reduce_sum_square(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, 0)) return;
  ctn_node x = c.in(0);
  out1(c, r.noop ? x : reduce_to(c, r, CTN_OP_SUM, binary(c.g, CTN_OP_MUL, x, x)));
}
void reduce_l2(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, 0)) return;
  ctn_node x = c.in(0);
  if (r.noop) return out1(c, x);
  out1(c, unary(c.g, CTN_OP_SQRT, reduce_to(c, r, CTN_OP_SUM, binary(c.g, CTN_OP_MUL, x, x))));
}
void reduce_log_sum(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, -kInf)) return;
  out1(c, r.noop ? c.in(0) : unary(c.g, CTN_OP_LOG, reduce_to(c, r, CTN_OP_SUM, c.in(0))));
}
void reduce_log_sum_exp(NodeCtx &c) {
  Reduction r = reduction(c);
  if (empty_reduction(c, r, -kInf)) return;
  Graph &g = c.g;
  ctn_node x = c.in(0);
  if (r.noop) return out1(c, x);
  // max-shifted for stability: m + log(sum(exp(x - m))).
  ctn_node m = reduce(g, CTN_OP_MAX, x, r.mask, true);
  ctn_node s = reduce(g, CTN_OP_SUM, unary(g, CTN_OP_EXP, binary(g, CTN_OP_SUB, x, m)), r.mask, true);
  ctn_node y = binary(g, CTN_OP_ADD, unary(g, CTN_OP_LOG, s), m);
  if (!r.keep) y = reshape(g, y, g.info(reduce(g, CTN_OP_SUM, x, r.mask, false)).shape);
  out1(c, y);
}
void reduce_prod(NodeCtx &c) {
  // prod = (-1)^(negatives) exp(sum log|x|), and 0 when any element is 0.
  Reduction r = reduction(c);
  if (empty_reduction(c, r, 1)) return;
  Graph &g = c.g;
  if (r.noop) return out1(c, c.in(0));
  out1(c, cast(g, product(g, c.in(0), [&](ctn_node v) { return reduce(g, CTN_OP_SUM, v, r.mask, r.keep); }), c.dtype(0)));
}

// ArgMax / ArgMin: the first (or last) extreme's index along one axis.
void arg_extreme(NodeCtx &c, bool is_max) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  if (s.ndim == 0) c.invalid("the input must be at least 1-d");
  const int32_t ax = c.axis(c.attr_i("axis", 0), s.ndim);
  const bool keep = c.attr_i("keepdims", 1) != 0, last = c.attr_i("select_last_index", 0) != 0;
  ctn_node y = extreme_index(g, c.in(0), static_cast<uint32_t>(ax), is_max, last);
  if (!keep) y = reshape(g, y, g.info(reduce(g, CTN_OP_SUM, y, 1ull << ax, false)).shape);
  out1(c, cast(g, y, CTN_I64));
}
void argmax(NodeCtx &c) { arg_extreme(c, true); }
void argmin(NodeCtx &c) { arg_extreme(c, false); }

// Cumulative sum of x (floating) along `ax`: a matmul with a triangular 0/1 matrix.
ctn_node cumsum_axis(NodeCtx &c, ctn_node x, int32_t ax, bool excl, bool rev) {
  Graph &g = c.g;
  const Shape s = g.info(x).shape;
  const int32_t wt = g.info(x).dtype;
  const int64_t n = s[static_cast<uint32_t>(ax)];
  if (n > 4096) c.unsupported("%s over an axis of %lld (lowered as a matmul with an n x n triangle; n <= 4096)",
                              std::string(c.node.op_type).c_str(), static_cast<long long>(n));
  std::vector<double> tri(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      bool on = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
      tri[static_cast<size_t>(i * n + j)] = on;
    }
  std::vector<int32_t> perm;
  for (uint32_t k = 0; k < s.ndim; ++k)
    if (static_cast<int32_t>(k) != ax) perm.push_back(static_cast<int32_t>(k));
  perm.push_back(ax);
  x = permute(g, x, perm);
  Shape ps = g.info(x).shape;
  Shape two;
  two.ndim = 2;
  two[0] = n ? ps.numel() / n : 0;
  two[1] = n;
  ctn_node y = g.op2(CTN_OP_MATMUL, reshape(g, x, two), const_f(g, wt, tri, Shape::from(2, std::vector<int64_t>{n, n}.data())));
  y = reshape(g, y, ps);
  std::vector<int32_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int32_t>(k);
  return permute(g, y, inv);
}

// CumSum, and CumProd as exp(cumsum(log|x|)) with the sign's and the zeros' running counts.
void cumulative(NodeCtx &c, bool prod) {
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  const int32_t ax = c.axis(c.ints(1, "axis").at(0), c.shape(0).ndim);
  const bool excl = c.attr_i("exclusive", 0) != 0, rev = c.attr_i("reverse", 0) != 0;
  auto sum = [&](ctn_node v) { return cumsum_axis(c, v, ax, excl, rev); };
  if (prod) return out1(c, cast(g, product(g, c.in(0), sum), dt));
  out1(c, cast(g, sum(cast(g, c.in(0), dtype_is_float(dt) ? dt : CTN_F64)), dt));
}
void cumsum(NodeCtx &c) { cumulative(c, false); }
void cumprod(NodeCtx &c) { cumulative(c, true); }

// ---- Einsum ---------------------------------------------------------------------------------------
// Each operand's dims carry ids (letters; ellipsis dims kEll + k, right-aligned). Repeated ids in
// one operand become a diagonal (mask and sum), ids needed nowhere else are summed at once, and
// operands are combined pairwise as one batched matmul [batch, left, contracted] x [batch,
// contracted, right]; what remains is permuted to the output's order.
constexpr int kEll = 1000;  // above every letter's code

struct EinTerm {
  ctn_node x;
  std::vector<int> ids;
};

std::vector<int> ein_ids(NodeCtx &c, const std::string &t, uint32_t ndim, int ell) {
  std::vector<int> ids;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.compare(i, 3, "...") == 0) {
      int n = ell < 0 ? static_cast<int>(ndim) - static_cast<int>(t.size() - 3) : ell;
      if (n < 0) c.invalid("equation term '%s' has more letters than its input has dims (%u)", t.c_str(), ndim);
      for (int k = 0; k < n; ++k) ids.push_back(kEll + (ell < 0 ? CTN_MAX_DIMS - n + k : CTN_MAX_DIMS - ell + k));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(t[i]))) {
      ids.push_back(t[i]);
    } else {
      c.invalid("equation term '%s' has a character '%c' that is neither a letter nor '...'", t.c_str(), t[i]);
    }
  }
  if (ell < 0 && ids.size() != ndim) c.invalid("equation term '%s' names %zu dims, its input has %u", t.c_str(), ids.size(), ndim);
  return ids;
}

// Sums away the dims of `t` whose id is not in `keep`.
void ein_sum_out(Graph &g, EinTerm &t, const std::vector<int> &keep) {
  uint64_t mask = 0;
  std::vector<int> left;
  for (size_t k = 0; k < t.ids.size(); ++k) {
    if (std::find(keep.begin(), keep.end(), t.ids[k]) == keep.end()) mask |= 1ull << k;
    else left.push_back(t.ids[k]);
  }
  if (mask) t.x = reduce(g, CTN_OP_SUM, t.x, mask, false);
  t.ids = left;
}

// Repeated ids: keep the diagonal (x masked by an identity over the two dims, summed over one).
void ein_diagonals(Graph &g, EinTerm &t) {
  for (size_t p = 0; p < t.ids.size(); ++p)
    for (size_t q = p + 1; q < t.ids.size(); ++q) {
      if (t.ids[p] != t.ids[q]) continue;
      const Shape s = g.info(t.x).shape;
      const int64_t n = s[static_cast<uint32_t>(p)];
      if (s[static_cast<uint32_t>(q)] != n)
        fail(CTN_ERR_SHAPE, "label '%c' is repeated over dims of %lld and %lld", t.ids[p] < kEll ? t.ids[p] : '.',
             static_cast<long long>(n), static_cast<long long>(s[static_cast<uint32_t>(q)]));
      ctn_node eye = g.op2(CTN_OP_EQ, ramp(g, n, s.ndim, static_cast<uint32_t>(p)), ramp(g, n, s.ndim, static_cast<uint32_t>(q)));
      t.x = reduce(g, CTN_OP_SUM, g.op2(CTN_OP_MUL, t.x, cast(g, eye, g.info(t.x).dtype)), 1ull << q, false);
      t.ids.erase(t.ids.begin() + static_cast<long>(q));
      --q;
    }
}

// `t` permuted to the ids `order` (each present once) and reshaped to the products of `groups`.
ctn_node ein_arrange(Graph &g, const EinTerm &t, const std::vector<std::vector<int>> &groups, std::vector<int64_t> *dims_out) {
  std::vector<int32_t> perm;
  Shape s = g.info(t.x).shape, r;
  for (const auto &grp : groups) {
    int64_t n = 1;
    for (int id : grp) {
      auto k = static_cast<uint32_t>(std::find(t.ids.begin(), t.ids.end(), id) - t.ids.begin());
      perm.push_back(static_cast<int32_t>(k));
      n *= s[k];
      if (dims_out) dims_out->push_back(s[k]);
    }
    r[r.ndim++] = n;
  }
  return reshape(g, permute(g, t.x, perm), r);
}

EinTerm ein_pair(NodeCtx &c, EinTerm a, EinTerm b, const std::vector<int> &needed) {
  Graph &g = c.g;
  auto in = [](const std::vector<int> &v, int id) { return std::find(v.begin(), v.end(), id) != v.end(); };
  std::vector<int> batch, left, contract, right;
  for (int id : a.ids) (in(b.ids, id) ? (in(needed, id) ? batch : contract) : left).push_back(id);
  for (int id : b.ids)
    if (!in(a.ids, id)) right.push_back(id);
  // Broadcast size-1 batch dims (ellipsis) of one side to the other's size.
  auto widen = [&](EinTerm &t, const EinTerm &o) {
    Shape s = g.info(t.x).shape, os = g.info(o.x).shape, w = s;
    for (size_t k = 0; k < t.ids.size(); ++k) {
      auto j = std::find(o.ids.begin(), o.ids.end(), t.ids[k]);
      if (j == o.ids.end()) continue;
      int64_t od = os[static_cast<uint32_t>(j - o.ids.begin())];
      if (s[static_cast<uint32_t>(k)] == 1 && od != 1) w[static_cast<uint32_t>(k)] = od;
      else if (od != 1 && od != s[static_cast<uint32_t>(k)]) c.invalid("dims of label '%c' differ: %lld and %lld",
          t.ids[k] < kEll ? t.ids[k] : '.', static_cast<long long>(s[static_cast<uint32_t>(k)]), static_cast<long long>(od));
    }
    if (w != s) {
      ctn_attrs at{};
      for (uint32_t k = 0; k < w.ndim; ++k) at.i[at.ni++] = w[k];
      t.x = g.op1(CTN_OP_BROADCAST_TO, t.x, &at);
    }
  };
  widen(a, b);
  widen(b, a);
  std::vector<int64_t> da, db;
  ctn_node x = ein_arrange(g, a, {batch, left, contract}, &da);
  ctn_node y = ein_arrange(g, b, {batch, contract, right}, &db);
  ctn_node z = g.op2(CTN_OP_MATMUL, x, y);
  EinTerm r;
  r.ids = batch;
  r.ids.insert(r.ids.end(), left.begin(), left.end());
  r.ids.insert(r.ids.end(), right.begin(), right.end());
  Shape rs;
  for (size_t k = 0; k < batch.size() + left.size(); ++k) rs[rs.ndim++] = da[k];
  for (size_t k = batch.size() + contract.size(); k < db.size(); ++k) rs[rs.ndim++] = db[k];
  r.x = reshape(g, z, rs);
  return r;
}

void einsum(NodeCtx &c) {
  Graph &g = c.g;
  std::string eq;
  for (char ch : c.attr_s("equation", "")) if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t comma = lhs.find(',', p);
    terms.push_back(lhs.substr(p, comma == std::string::npos ? std::string::npos : comma - p));
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  if (terms.size() != c.n_in()) c.invalid("the equation '%s' has %zu terms for %zu inputs", eq.c_str(), terms.size(), c.n_in());
  int32_t dt = c.dtype(0);
  const int32_t wt = dtype_is_float(dt) ? dt : CTN_F64;
  std::vector<EinTerm> ops;
  int ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    EinTerm t{cast(g, c.in(i), wt), ein_ids(c, terms[i], c.shape(i).ndim, -1)};
    for (int id : t.ids) ell = std::max(ell, id >= kEll ? CTN_MAX_DIMS - (id - kEll) : 0);
    ein_diagonals(g, t);
    ops.push_back(t);
  }
  std::vector<int> out;
  if (arrow != std::string::npos) {
    out = ein_ids(c, eq.substr(arrow + 2), 0, ell);
    for (size_t k = 0; k < out.size(); ++k)
      if (std::count(out.begin(), out.end(), out[k]) > 1) c.invalid("output label '%c' appears more than once", out[k] < kEll ? out[k] : '.');
  } else {  // implicit: ellipsis dims, then the letters used once, alphabetically
    for (int k = 0; k < ell; ++k) out.push_back(kEll + CTN_MAX_DIMS - ell + k);
    std::map<int, int> count;
    for (const EinTerm &t : ops) for (int id : t.ids) if (id < kEll) ++count[id];
    for (auto [id, n] : count) if (n == 1) out.push_back(id);
  }
  // Ids wanted by the output or by operands at or after `from`.
  auto needed = [&](size_t from) {
    std::vector<int> v = out;
    for (size_t j = from; j < ops.size(); ++j) v.insert(v.end(), ops[j].ids.begin(), ops[j].ids.end());
    return v;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    std::vector<int> keep = out;
    for (size_t j = 0; j < ops.size(); ++j) if (j != i) keep.insert(keep.end(), ops[j].ids.begin(), ops[j].ids.end());
    ein_sum_out(g, ops[i], keep);
  }
  EinTerm acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) acc = ein_pair(c, acc, ops[i], needed(i + 1));
  ein_sum_out(g, acc, out);
  std::vector<int32_t> perm;
  for (int id : out) {
    auto it = std::find(acc.ids.begin(), acc.ids.end(), id);
    if (it == acc.ids.end()) c.invalid("output label '%c' is not in any input", id < kEll ? id : '.');
    perm.push_back(static_cast<int32_t>(it - acc.ids.begin()));
  }
  out1(c, cast(g, perm.empty() ? acc.x : permute(g, acc.x, perm), dt));
}

// ---- bitwise ops -----------------------------------------------------------------------------------
// Integers are f64 here: bit k of x is floor(x / 2^k) mod 2 (floor division is the arithmetic
// shift, so negatives have their two's-complement bits), and K bits recombine with the top bit
// weighing -2^(K-1) for signed dtypes. K is the dtype's width. Exact for (u)int8, (u)int16, int32 and uint32;
// int64 and uint64 are refused, because f64 holds its values only below 2^53 and a wrong answer would be silent:
// it needs integer kernels.
struct IntKind {
  int bits;
  bool is_signed;
};
IntKind int_kind(NodeCtx &c, int32_t dt) {
  switch (dt) {
    case CTN_U8: return {8, false};
    case CTN_I8: return {8, true};
    case CTN_I32: return {32, true};
    case CTN_I16: return {16, true};
    case CTN_U16: return {16, false};
    case CTN_U32: return {32, false};
    default:
      c.unsupported("dtype %s (bitwise ops take int8, int16, int32, uint8, uint16 and uint32: they run through f64 "
                    "bit planes, which cannot hold every int64 or uint64)", dtype_name(dt));
  }
}

ctn_node bit_planes(Graph &g, ctn_node x, int bits) {  // x f64 -> x.shape + [bits] of 0/1
  Shape s = g.info(x).shape, p;
  s[s.ndim++] = 1;
  p.ndim = s.ndim;
  for (uint32_t k = 0; k + 1 < p.ndim; ++k) p[k] = 1;
  p[p.ndim - 1] = bits;
  std::vector<double> pw(static_cast<size_t>(bits));
  for (int k = 0; k < bits; ++k) pw[static_cast<size_t>(k)] = std::ldexp(1.0, k);
  ctn_node q = floor(g, g.op2(CTN_OP_DIV, reshape(g, x, s), const_f(g, CTN_F64, pw, p)));
  return g.op2(CTN_OP_SUB, q, g.op2(CTN_OP_MUL, floor(g, g.op2(CTN_OP_MUL, q, g.add_scalar(CTN_F64, 0.5))), g.add_scalar(CTN_F64, 2)));
}

ctn_node from_bit_planes(Graph &g, ctn_node planes, IntKind k) {
  Shape p;
  p.ndim = g.info(planes).shape.ndim;
  for (uint32_t d = 0; d + 1 < p.ndim; ++d) p[d] = 1;
  p[p.ndim - 1] = k.bits;
  std::vector<double> w(static_cast<size_t>(k.bits));
  for (int b = 0; b < k.bits; ++b) w[static_cast<size_t>(b)] = std::ldexp(k.is_signed && b == k.bits - 1 ? -1.0 : 1.0, b);
  return reduce(g, CTN_OP_SUM, g.op2(CTN_OP_MUL, planes, const_f(g, CTN_F64, w, p)), 1ull << (p.ndim - 1), false);
}

// x (f64) wrapped to the dtype's range, as the integer arithmetic of a shift does.
ctn_node wrap_int(Graph &g, ctn_node x, IntKind k) {
  const double m = std::ldexp(1.0, k.bits), h = k.is_signed ? std::ldexp(1.0, k.bits - 1) : 0;
  ctn_node v = g.op2(CTN_OP_ADD, x, g.add_scalar(CTN_F64, h));
  v = g.op2(CTN_OP_SUB, v, g.op2(CTN_OP_MUL, floor(g, g.op2(CTN_OP_DIV, v, g.add_scalar(CTN_F64, m))), g.add_scalar(CTN_F64, m)));
  return g.op2(CTN_OP_SUB, v, g.add_scalar(CTN_F64, h));
}

template <int Kind>  // 0 and, 1 or, 2 xor
void bitwise(NodeCtx &c) {
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  if (c.dtype(1) != dt) c.invalid("inputs are %s and %s", dtype_name(dt), dtype_name(c.dtype(1)));
  const IntKind k = int_kind(c, dt);
  ctn_node a = bit_planes(g, cast(g, c.in(0), CTN_F64), k.bits), b = bit_planes(g, cast(g, c.in(1), CTN_F64), k.bits);
  ctn_node r = Kind == 0 ? g.op2(CTN_OP_MUL, a, b) : Kind == 1 ? g.op2(CTN_OP_MAXIMUM, a, b) : g.op1(CTN_OP_ABS, g.op2(CTN_OP_SUB, a, b));
  out1(c, cast(g, from_bit_planes(g, r, k), dt));
}

void bitwise_not(NodeCtx &c) {  // ~x = -x - 1 (signed), 2^n - 1 - x (unsigned)
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  const IntKind k = int_kind(c, dt);
  const double top = k.is_signed ? -1.0 : std::ldexp(1.0, k.bits) - 1;
  out1(c, cast(g, g.op2(CTN_OP_SUB, g.add_scalar(CTN_F64, top), cast(g, c.in(0), CTN_F64)), dt));
}

// BitShift (numpy's semantics, as the reference: shifts outside [0, width) give 0, or -1 for a
// right shift of a negative); LEFT multiplies by 2^s and wraps, RIGHT floor-divides.
void bit_shift(NodeCtx &c) {
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  const IntKind k = int_kind(c, dt);
  const std::string dir = c.attr_s("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") c.invalid("direction must be LEFT or RIGHT, not '%s'", dir.c_str());
  const int width = k.bits;
  ctn_node x = cast(g, c.in(0), CTN_F64), s = cast(g, c.in(1), CTN_F64);
  ctn_node p = g.op2(CTN_OP_POW, g.add_scalar(CTN_F64, 2), s);
  ctn_node out_of_range = where3(g, g.op2(CTN_OP_LT, s, g.add_scalar(CTN_F64, 0)), g.add_scalar(CTN_BOOL, 1),
                                 g.op2(CTN_OP_GE, s, g.add_scalar(CTN_F64, width)));
  ctn_node y, fill;
  if (dir == "LEFT") {
    y = wrap_int(g, g.op2(CTN_OP_MUL, x, p), k);
    fill = g.add_scalar(CTN_F64, 0);
  } else {
    y = floor(g, g.op2(CTN_OP_DIV, x, p));
    fill = g.op1(CTN_OP_NEG, cast(g, g.op2(CTN_OP_LT, x, g.add_scalar(CTN_F64, 0)), CTN_F64));
  }
  out1(c, cast(g, where3(g, out_of_range, fill, y), dt));
}

// ---- softmax family -------------------------------------------------------------------------------
void softmax_like(NodeCtx &c, const char *op) {
  Graph &g = c.g;
  ctn_node x = need_floating(c, 0);
  const Shape s = c.shape(0);
  if (s.ndim == 0) c.invalid("the input must be at least 1-d");
  if (c.opset >= 13) {
    ctn_attrs a = attrs_i({c.axis(c.attr_i("axis", -1), s.ndim)});
    return out1(c, g.op1(op, x, &a));
  }
  // Before opset 13 the input is coerced to 2-d at `axis` and normalised over the second part.
  const int32_t ax = c.axis(c.attr_i("axis", 1), s.ndim);
  int64_t outer = 1, inner = 1;
  for (uint32_t k = 0; k < s.ndim; ++k) (static_cast<int32_t>(k) < ax ? outer : inner) *= s[k];
  ctn_attrs a = attrs_i({1});
  ctn_node y = g.op1(op, reshape(g, x, Shape::from(2, std::vector<int64_t>{outer, inner}.data())), &a);
  out1(c, reshape(g, y, s));
}
void softmax(NodeCtx &c) { softmax_like(c, CTN_OP_SOFTMAX); }
void log_softmax(NodeCtx &c) { softmax_like(c, CTN_OP_LOG_SOFTMAX); }

void hardmax(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = need_floating(c, 0);
  const Shape s = c.shape(0);
  if (s.ndim == 0) c.invalid("the input must be at least 1-d");
  if (c.opset < 13) c.unsupported("opset %lld's 2-d coercion", static_cast<long long>(c.opset));
  const int32_t ax = c.axis(c.attr_i("axis", -1), s.ndim);
  ctn_node first = extreme_index(g, x, static_cast<uint32_t>(ax), true, false);
  ctn_node hot = one_hot(g, first, s[static_cast<uint32_t>(ax)], static_cast<uint32_t>(ax));
  out1(c, cast(g, hot, g.info(x).dtype));
}

void shrink(NodeCtx &c) {
  Graph &g = c.g;
  const int32_t dt = c.dtype(0);
  ctn_node x = cast(g, c.in(0), CTN_F64);
  const double lambd = c.attr_f("lambd", 0.5), bias = c.attr_f("bias", 0.0);
  ctn_node zero = g.add_scalar(CTN_F64, 0);
  ctn_node lo = g.op2(CTN_OP_LT, x, g.add_scalar(CTN_F64, -lambd)), hi = g.op2(CTN_OP_GT, x, g.add_scalar(CTN_F64, lambd));
  ctn_node y = where3(g, hi, g.op2(CTN_OP_SUB, x, g.add_scalar(CTN_F64, bias)), zero);
  y = where3(g, lo, g.op2(CTN_OP_ADD, x, g.add_scalar(CTN_F64, bias)), y);
  out1(c, cast(g, y, dt));
}

// Det: Gaussian elimination with partial pivoting, unrolled over the (static) matrix size on the
// batch [B, n, n]: per column, the pivot row (first largest |a|) is swapped to the top by one-hot
// masks, the determinant takes the pivot (and a sign flip for a swap) and the rows below are
// eliminated. A zero column gives a zero pivot (the elimination then divides by 1).
void det(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const int32_t dt = c.dtype(0);
  if (!dtype_is_float(dt)) c.unsupported("dtype %s (float and double only)", dtype_name(dt));
  if (s.ndim < 2 || s[s.ndim - 1] != s[s.ndim - 2]) c.invalid("the input %s must be [..., n, n]", shape_str(s).c_str());
  const int64_t n = s[s.ndim - 1];
  if (n < 1 || n > 256) c.unsupported("matrices of size %lld (1 to 256)", static_cast<long long>(n));
  Shape out;
  for (uint32_t k = 0; k + 2 < s.ndim; ++k) out[out.ndim++] = s[k];
  const int64_t B = out.numel();
  auto k = [&](double v) { return g.add_scalar(dt, v); };
  ctn_node rows = reshape(g, c.in(0), Shape::from(3, std::vector<int64_t>{B, n, n}.data()));
  ctn_node d = CTN_NODE_NONE;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t m = n - j;  // rows left
    ctn_node col = slice(g, rows, 2, j, j + 1, 1);  // [B, m, 1]
    ctn_node p = extreme_index(g, g.op1(CTN_OP_ABS, col), 1, true, false);  // [B, 1, 1] f64
    ctn_node oh = cast(g, one_hot(g, p, m, 1), dt);  // [B, m, 1]
    ctn_node prow = reduce(g, CTN_OP_SUM, g.op2(CTN_OP_MUL, oh, rows), 1ull << 1, true);  // [B, 1, n]
    ctn_node top = slice(g, rows, 1, 0, 1, 1);
    // Row p takes the top row, then the top row becomes the pivot row.
    rows = g.op2(CTN_OP_ADD, rows, g.op2(CTN_OP_MUL, oh, g.op2(CTN_OP_SUB, top, prow)));
    ctn_node pivot = slice(g, prow, 2, j, j + 1, 1);  // [B, 1, 1]
    ctn_node flip = g.op2(CTN_OP_SUB, k(1), g.op2(CTN_OP_MUL, k(2), cast(g, g.op2(CTN_OP_GT, p, g.add_scalar(CTN_F64, 0)), dt)));
    ctn_node f = g.op2(CTN_OP_MUL, pivot, flip);
    d = d == CTN_NODE_NONE ? f : g.op2(CTN_OP_MUL, d, f);
    if (m == 1) break;
    ctn_node zero = g.op2(CTN_OP_EQ, pivot, k(0));
    ctn_node in3[3] = {zero, k(1), pivot};
    ctn_node safe = g.add_op(CTN_OP_WHERE, 3, in3, nullptr);
    ctn_node below = slice(g, rows, 1, 1, m, 1);  // [B, m - 1, n]
    ctn_node factor = g.op2(CTN_OP_DIV, slice(g, below, 2, j, j + 1, 1), safe);
    rows = g.op2(CTN_OP_SUB, below, g.op2(CTN_OP_MUL, factor, prow));
  }
  c.outs = {reshape(g, d, out)};
}

const OpEntry kMath[] = {
    {"Det", det},
    {"Hardmax", hardmax},
    {"Shrink", shrink},
    {"Abs", unary_any<kAbs>},
    {"Neg", unary_any<kNeg>},
    {"Relu", unary_any<kRelu>},
    {"Sign", unary_any<kSign>},
    {"Exp", unary_float<kExp>},
    {"Log", unary_float<kLog>},
    {"Sqrt", unary_float<kSqrt>},
    {"Tanh", unary_float<kTanh>},
    {"Sigmoid", unary_float<kSigmoid>},
    {"Reciprocal", reciprocal},
    {"Softplus", softplus_},
    {"Softsign", softsign},
    {"Elu", elu_},
    {"Selu", selu},
    {"Celu", celu},
    {"HardSigmoid", hardsigmoid_},
    {"HardSwish", hardswish},
    {"Mish", mish},
    {"Swish", swish},
    {"LeakyRelu", leaky_relu},
    {"ThresholdedRelu", thresholded_relu},
    {"PRelu", prelu},
    {"Gelu", gelu},
    {"Erf", unary_float<kErf>},
    {"Atan", unary_float<kAtan>},
    {"Sin", unary_float<kSin>},
    {"Cos", unary_float<kCos>},
    {"Tan", unary_float<kTan>},
    {"Asin", unary_float<kAsin>},
    {"Acos", unary_float<kAcos>},
    {"Sinh", unary_float<kSinh>},
    {"Cosh", unary_float<kCosh>},
    {"Asinh", unary_float<kAsinh>},
    {"Acosh", unary_float<kAcosh>},
    {"Atanh", unary_float<kAtanh>},
    {"Floor", floor_},
    {"Ceil", ceil_},
    {"Round", round_},
    {"IsNaN", isnan},
    {"IsInf", isinf},
    {"Add", binary_any<kAdd>},
    {"Sub", binary_any<kSub>},
    {"Mul", binary_any<kMul>},
    {"Div", binary_any<kDiv>},
    {"Pow", pow_},
    {"Mod", mod},
    {"Sum", variadic<kAdd>},
    {"Max", variadic<kMax>},
    {"Min", variadic<kMin>},
    {"Mean", mean_},
    {"Equal", compare<kEq>},
    {"Less", compare<kLt>},
    {"LessOrEqual", compare<kLe>},
    {"Greater", compare<kGt>},
    {"GreaterOrEqual", compare<kGe>},
    {"Not", not_},
    {"And", and_},
    {"Or", or_},
    {"Xor", xor_},
    {"Where", where_},
    {"Cast", cast_},
    {"CastLike", cast_like},
    {"Clip", clip},
    {"ReduceSum", reduce_sum},
    {"ReduceMean", reduce_mean},
    {"ReduceMax", reduce_max},
    {"ReduceMin", reduce_min_},
    {"ReduceL1", reduce_l1},
    {"ReduceL2", reduce_l2},
    {"ReduceSumSquare", reduce_sum_square},
    {"ReduceLogSum", reduce_log_sum},
    {"ReduceLogSumExp", reduce_log_sum_exp},
    {"ReduceProd", reduce_prod},
    {"ArgMax", argmax},
    {"ArgMin", argmin},
    {"CumSum", cumsum},
    {"CumProd", cumprod},
    {"Einsum", einsum},
    {"BitwiseAnd", bitwise<0>},
    {"BitwiseOr", bitwise<1>},
    {"BitwiseXor", bitwise<2>},
    {"BitwiseNot", bitwise_not},
    {"BitShift", bit_shift},
    {"Softmax", softmax},
    {"LogSoftmax", log_softmax},
};

}  // namespace

std::span<const OpEntry> math_ops() { return kMath; }

}  // namespace ctn::onnx
