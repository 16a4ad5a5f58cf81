// ONNX elementwise ops, activations, comparisons, reductions and softmax, lowered to chutney ops.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <cmath>
#include <limits>

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
               kSigmoid[] = CTN_OP_SIGMOID;

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
void erf_(NodeCtx &c) { out1(c, erf(c.g, need_floating(c, 0))); }
void floor_(NodeCtx &c) { out1(c, floor(c.g, need_floating(c, 0))); }
void ceil_(NodeCtx &c) {
  ctn_node x = need_floating(c, 0);
  out1(c, c.g.op1(CTN_OP_NEG, floor(c.g, c.g.op1(CTN_OP_NEG, x))));
}
void round_(NodeCtx &c) {  // half to even
  Graph &g = c.g;
  ctn_node x = need_floating(c, 0);
  ctn_node r = floor(g, g.op2(CTN_OP_ADD, x, scalar_like(g, x, 0.5)));
  ctn_node tie = g.op2(CTN_OP_EQ, g.op2(CTN_OP_SUB, r, x), scalar_like(g, x, 0.5));
  ctn_node half = floor(g, g.op2(CTN_OP_MUL, r, scalar_like(g, x, 0.5)));
  ctn_node odd = g.op2(CTN_OP_NE, g.op2(CTN_OP_MUL, half, scalar_like(g, x, 2)), r);
  ctn_node fix = where3(g, tie, cast(g, odd, g.info(x).dtype), scalar_like(g, x, 0));
  out1(c, g.op2(CTN_OP_SUB, r, fix));
}
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
  out1(c, cast(g, g.op2(CTN_OP_SUB, a, g.op2(CTN_OP_MUL, b, qi)), dt));
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
void cast_(NodeCtx &c) {
  int64_t to = c.attr_i("to", -1);
  c.ignore("saturate");
  int32_t dt = dtype_from_onnx(static_cast<int32_t>(to));
  if (dt < 0) c.unsupported("cast to %s (chutney has float, double, int32, int64, uint8 and bool)", data_type_name(static_cast<int32_t>(to)));
  out1(c, cast(c.g, c.in(0), dt));
}
void cast_like(NodeCtx &c) {
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
  const int32_t dt = c.dtype(0);
  ctn_node x = cast(g, c.in(0), CTN_F64);
  ctn_node zero = g.add_scalar(CTN_F64, 0);
  ctn_node is0 = g.op2(CTN_OP_EQ, x, zero);
  ctn_node ax = where3(g, is0, g.add_scalar(CTN_F64, 1), g.op1(CTN_OP_ABS, x));
  ctn_node mag = g.op1(CTN_OP_EXP, reduce(g, CTN_OP_SUM, g.op1(CTN_OP_LOG, ax), r.mask, r.keep));
  ctn_node nneg = reduce(g, CTN_OP_SUM, cast(g, g.op2(CTN_OP_LT, x, zero), CTN_F64), r.mask, r.keep);
  ctn_node half = g.op2(CTN_OP_MUL, nneg, g.add_scalar(CTN_F64, 0.5));
  ctn_node odd = g.op2(CTN_OP_NE, floor(g, half), half);
  ctn_node any0 = g.op2(CTN_OP_GT, reduce(g, CTN_OP_SUM, cast(g, is0, CTN_F64), r.mask, r.keep), zero);
  ctn_node y = where3(g, odd, g.op1(CTN_OP_NEG, mag), mag);
  y = where3(g, any0, zero, y);
  if (!dtype_is_float(dt)) y = floor(g, g.op2(CTN_OP_ADD, y, g.add_scalar(CTN_F64, 0.5)));
  out1(c, cast(g, y, dt));
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

// CumSum: a matmul with a triangular 0/1 matrix along the axis.
void cumsum(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const int32_t dt = c.dtype(0);
  const int32_t ax = c.axis(c.ints(1, "axis").at(0), s.ndim);
  const bool excl = c.attr_i("exclusive", 0) != 0, rev = c.attr_i("reverse", 0) != 0;
  const int64_t n = s[static_cast<uint32_t>(ax)];
  if (n > 4096) c.unsupported("CumSum over an axis of %lld (lowered as a matmul with an n x n triangle; n <= 4096)",
                              static_cast<long long>(n));
  const int32_t wt = dtype_is_float(dt) ? dt : CTN_F64;
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
  ctn_node x = permute(g, cast(g, c.in(0), wt), perm);
  Shape ps = g.info(x).shape;
  Shape two;
  two.ndim = 2;
  two[0] = n ? ps.numel() / n : 0;
  two[1] = n;
  ctn_node y = g.op2(CTN_OP_MATMUL, reshape(g, x, two), const_f(g, wt, tri, Shape::from(2, std::vector<int64_t>{n, n}.data())));
  y = reshape(g, y, ps);
  std::vector<int32_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int32_t>(k);
  out1(c, cast(g, permute(g, y, inv), dt));
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

const OpEntry kMath[] = {
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
    {"Erf", erf_},
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
    {"Softmax", softmax},
    {"LogSoftmax", log_softmax},
};

}  // namespace

std::span<const OpEntry> math_ops() { return kMath; }

}  // namespace ctn::onnx
