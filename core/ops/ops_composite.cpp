// Composite ops: ops the core defines as a decomposition into other ops. When ctn_op adds one,
// the graph receives its parts instead (Graph::add_composite), so
//  - every backend runs it with the kernels it already has (no backend code, no op code),
//  - its gradient is the parts' gradient (no autodiff rule),
//  - folding, fusion, placement and eager execution see ordinary nodes.
// A part may itself be a composite (mish uses softplus).
//
// Adding one (docs/ADDING_AN_OP.md): a function and a row of kOps below, the name in
// abi/chutney/ops.h, a row of tests/conformance/composite_cases.cpp and a row in docs/OPS.md.
// Write the numerically stable form: no exp of a large positive value, no 1 + tiny, and no
// branch of a `where` whose unused side overflows (its gradient is 0 * inf = NaN).
#include <chutney/ops.h>

#include "graph/graph.h"
#include "tensor/tensor.h"
#include "util/status.h"

#include <initializer_list>

namespace ctn {

namespace {

// Builds parts in the caller's graph. Constants take the dtype of the composite's input.
class Parts {
 public:
  Parts(Graph &g, int32_t dtype) : g_(g), dt_(dtype) {}
  int32_t dtype() const { return dt_; }
  ctn_node k(double v) { return g_.add_scalar(dt_, v); }
  ctn_node op(const char *name, std::initializer_list<ctn_node> in, const ctn_attrs *a = nullptr) {
    return g_.add_op(name, static_cast<uint32_t>(in.size()), in.begin(), a);
  }
  ctn_node add(ctn_node a, ctn_node b) { return op(CTN_OP_ADD, {a, b}); }
  ctn_node sub(ctn_node a, ctn_node b) { return op(CTN_OP_SUB, {a, b}); }
  ctn_node mul(ctn_node a, ctn_node b) { return op(CTN_OP_MUL, {a, b}); }
  ctn_node div(ctn_node a, ctn_node b) { return op(CTN_OP_DIV, {a, b}); }
  ctn_node minimum(ctn_node a, ctn_node b) { return op(CTN_OP_MINIMUM, {a, b}); }
  ctn_node gt(ctn_node a, ctn_node b) { return op(CTN_OP_GT, {a, b}); }
  ctn_node lt(ctn_node a, ctn_node b) { return op(CTN_OP_LT, {a, b}); }
  ctn_node where(ctn_node c, ctn_node a, ctn_node b) { return op(CTN_OP_WHERE, {c, a, b}); }
  ctn_node neg(ctn_node a) { return op(CTN_OP_NEG, {a}); }
  ctn_node exp(ctn_node a) { return op(CTN_OP_EXP, {a}); }
  ctn_node log(ctn_node a) { return op(CTN_OP_LOG, {a}); }
  ctn_node abs(ctn_node a) { return op(CTN_OP_ABS, {a}); }
  ctn_node tanh(ctn_node a) { return op(CTN_OP_TANH, {a}); }
  ctn_node relu(ctn_node a) { return op(CTN_OP_RELU, {a}); }
  ctn_node clamp(ctn_node a, double lo, double hi) {
    ctn_attrs at = attrs_f({lo, hi});
    return op(CTN_OP_CLAMP, {a}, &at);
  }

 private:
  Graph &g_;
  int32_t dt_;
};

// One composite's parts: x = the inputs, a = the attributes as its infer normalised them.
#define CTN_COMPOSITE(fn) ctn_node fn([[maybe_unused]] Parts &p, const ctn_node *x, [[maybe_unused]] const ctn_attrs &a)

// ---- inference: (x) -> same dtype and shape, f32|f64 ------------------------------------------

// A composite with float attributes lists their defaults: a call that gives none gets them; one
// that gives some must give all.
ValueInfo unary_float(const OpDef &op, const ValueInfo *in, ctn_attrs &a, uint32_t nf, const double *defaults) {
  if (!dtype_is_float(in[0].dtype))
    fail(CTN_ERR_DTYPE, "%s: the input has dtype %s; this op needs f32 or f64", op.name.c_str(), dtype_name(in[0].dtype));
  if (a.nf == 0)
    for (uint32_t k = 0; k < nf; ++k) a.f[k] = defaults[k];
  else if (a.nf != nf)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: takes %u float attributes (or none for the defaults), got %u", op.name.c_str(),
         nf, a.nf);
  a.nf = nf;
  return in[0];
}


template <auto F>
ctn_node expand(Graph &g, const OpDef &, const ctn_node *in, uint32_t, const ctn_attrs &a) {
  Parts p(g, g.info(in[0]).dtype);
  return F(p, in, a);
}

// ---- the composites ---------------------------------------------------------------------------

// x / (1 + |x|)
CTN_COMPOSITE(softsign) { return p.div(x[0], p.add(p.k(1.0), p.abs(x[0]))); }

// log(1 + e^x) = m + log1p(e^(x - 2m)), m = max(x, 0), so the exponent is -|x| <= 0 (no
// overflow) and the gradient is sigmoid(x) also at 0 (written with |x| = 2m - x, the subgradients
// of relu and abs at 0 would give 0). log1p(e) for e = e^-|x| in (0, 1]: log(1 + e) where 1 + e
// keeps e's digits, else the series e - e^2/2 + e^3/3 (relative error e^3/4 against eps/e: the
// threshold balances both: 2^-12 for f64, 2^-5 for f32, 2^-2 for f16 and bf16, whose
// eps/e is large).
CTN_COMPOSITE(softplus) {
  ctn_node m = p.relu(x[0]);
  ctn_node e = p.exp(p.sub(x[0], p.add(m, m)));
  ctn_node direct = p.log(p.add(p.k(1.0), e));
  ctn_node series = p.mul(e, p.sub(p.k(1.0), p.mul(e, p.sub(p.k(0.5), p.mul(e, p.k(1.0 / 3))))));
  ctn_node small = p.lt(e, p.k(p.dtype() == CTN_F64 ? 0x1p-12 : p.dtype() == CTN_F32 ? 0x1p-5 : 0x1p-2));
  return p.add(m, p.where(small, series, direct));
}

// x > 0 ? x : alpha (e^x - 1). The exponent is min(x, 0), so the unused branch never overflows
// (its gradient would be 0 * inf = NaN). elu'(0) = alpha (the x <= 0 branch; min's tie goes to x).
CTN_COMPOSITE(elu) {
  ctn_node neg_part = p.mul(p.k(a.f[0]), p.sub(p.exp(p.minimum(x[0], p.k(0.0))), p.k(1.0)));
  return p.where(p.gt(x[0], p.k(0.0)), x[0], neg_part);
}

// scale * elu(x, alpha) with the constants of Klambauer et al. (2017), self-normalising.
CTN_COMPOSITE(selu) {
  ctn_attrs alpha = attrs_f({1.6732632423543772848170429916717});
  return p.mul(p.k(1.0507009873554804934193349852946), p.op(CTN_OP_ELU, {x[0]}, &alpha));
}

// clamp(alpha x + beta, 0, 1); the defaults (1/6, 1/2) are relu6(x + 3) / 6 as in PyTorch and
// hardswish; ONNX HardSigmoid's are (0.2, 0.5). The gradient is alpha on [0, 1] inclusive.
CTN_COMPOSITE(hardsigmoid) { return p.clamp(p.add(p.mul(x[0], p.k(a.f[0])), p.k(a.f[1])), 0.0, 1.0); }

// x hardsigmoid(x) = x relu6(x + 3) / 6 (PyTorch, ONNX HardSwish).
CTN_COMPOSITE(hardswish) { return p.mul(x[0], p.op(CTN_OP_HARDSIGMOID, {x[0]})); }

// x tanh(softplus(x)) (Misra, 2019), on the stable softplus above.
CTN_COMPOSITE(mish) { return p.mul(x[0], p.tanh(p.op(CTN_OP_SOFTPLUS, {x[0]}))); }

// 1 / x (inf at 0, as div).
CTN_COMPOSITE(reciprocal) { return p.div(p.k(1.0), x[0]); }

// ---- the table ----------------------------------------------------------------------------------

// COMPOSITE(name, function, default of f[0], default of f[1], ...): a unary floating composite.
// The defaults go into a captureless lambda, not template arguments: floating-point template
// parameters need clang 18 (the asan and fuzz stages build with Debian 12's clang 14).
#define COMPOSITE_INFER(...)                                                              \
  [](const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {                      \
    static constexpr double d[] = {__VA_OPT__(__VA_ARGS__, ) 0.0};                         \
    return unary_float(op, in, a, static_cast<uint32_t>(sizeof d / sizeof d[0] - 1), d); \
  }
#define COMPOSITE(nm, fn, ...) \
  OpDef{.name = nm, .n_inputs = 1, .infer = COMPOSITE_INFER(__VA_ARGS__), .expand = expand<fn>}
// The same with the attribute slots it reads, as ctn_context_op_info reports them.
#define COMPOSITE_ATTRS(nm, fn, attrs, ...) \
  OpDef{.name = nm, .n_inputs = 1, .infer = COMPOSITE_INFER(__VA_ARGS__), .attributes = attrs, .expand = expand<fn>}

const OpDef kOps[] = {
    COMPOSITE(CTN_OP_SOFTSIGN, softsign),
    COMPOSITE(CTN_OP_SOFTPLUS, softplus),
    COMPOSITE_ATTRS(CTN_OP_ELU, elu, "f[0] alpha (default 1)", 1.0),
    COMPOSITE(CTN_OP_SELU, selu),
    COMPOSITE_ATTRS(CTN_OP_HARDSIGMOID, hardsigmoid, "f[0] alpha (default 1/6), f[1] beta (default 1/2)", 1.0 / 6, 0.5),
    COMPOSITE(CTN_OP_HARDSWISH, hardswish),
    COMPOSITE(CTN_OP_MISH, mish),
    COMPOSITE(CTN_OP_RECIPROCAL, reciprocal),
};

}  // namespace

OpTable composite_op_table() { return {kOps, sizeof kOps / sizeof kOps[0]}; }

}  // namespace ctn
