#include "onnx/lower.h"

#include <chutney/ops.h>

#include "util/status.h"

#include <cmath>
#include <cstring>

namespace ctn::onnx::lower {

namespace {
bool is_float(Graph &g, ctn_node x) { return dtype_is_float(g.info(x).dtype); }
}  // namespace

ctn_node cast(Graph &g, ctn_node x, int32_t dtype) {
  if (g.info(x).dtype == dtype) return x;
  ctn_attrs a = attrs_i({dtype});
  return g.op1(CTN_OP_CAST, x, &a);
}

ctn_node scalar_like(Graph &g, ctn_node ref, double v) { return g.add_scalar(g.info(ref).dtype, v); }

ctn_node const_i64(Graph &g, const std::vector<int64_t> &v, const Shape &s) {
  Tensor t = Tensor::empty(CTN_I64, s);
  if (static_cast<int64_t>(v.size()) != s.numel()) fail(CTN_ERR_INTERNAL, "const_i64: %zu values for %s", v.size(), shape_str(s).c_str());
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return g.add_constant(t);
}

ctn_node const_f(Graph &g, int32_t dtype, const std::vector<double> &v, const Shape &s) {
  Tensor t = Tensor::empty(CTN_F64, s);
  if (static_cast<int64_t>(v.size()) != s.numel()) fail(CTN_ERR_INTERNAL, "const_f: %zu values for %s", v.size(), shape_str(s).c_str());
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(double));
  if (dtype == CTN_F64) return g.add_constant(t);
  Tensor f = Tensor::empty(CTN_F32, s);
  for (size_t k = 0; k < v.size(); ++k) reinterpret_cast<float *>(f.data())[k] = static_cast<float>(v[k]);
  return cast(g, g.add_constant(f), dtype);
}

ctn_node unary(Graph &g, const char *op, ctn_node x) {
  if (is_float(g, x)) return g.op1(op, x);
  const int32_t dt = g.info(x).dtype;
  return cast(g, g.op1(op, cast(g, x, CTN_F64)), dt);
}

ctn_node binary(Graph &g, const char *op, ctn_node a, ctn_node b) {
  if (is_float(g, a)) return g.op2(op, a, b);
  const int32_t dt = g.info(a).dtype;
  return cast(g, g.op2(op, cast(g, a, CTN_F64), cast(g, b, CTN_F64)), dt);
}

ctn_node reduce(Graph &g, const char *op, ctn_node x, uint64_t mask, bool keep) {
  ctn_attrs a = attrs_i({static_cast<int64_t>(mask), keep ? 1 : 0});
  if (g.info(x).shape.ndim == 0) a.i[0] = 0;
  if (is_float(g, x)) return g.op1(op, x, &a);
  const int32_t dt = g.info(x).dtype;
  return cast(g, g.op1(op, cast(g, x, CTN_F64), &a), dt);
}

ctn_node reduce_min(Graph &g, ctn_node x, uint64_t mask, bool keep) {
  const int32_t dt = g.info(x).dtype;
  const int32_t wt = dtype_is_float(dt) ? dt : CTN_F64;  // negating a bool or uint8 must not wrap
  ctn_node m = reduce(g, CTN_OP_MAX, g.op1(CTN_OP_NEG, cast(g, x, wt)), mask, keep);
  return cast(g, g.op1(CTN_OP_NEG, m), dt);
}

ctn_node reshape(Graph &g, ctn_node x, const Shape &s) {
  if (g.info(x).shape == s) return x;
  ctn_attrs a{};
  for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
  return g.op1(CTN_OP_RESHAPE, x, &a);
}

ctn_node permute(Graph &g, ctn_node x, const std::vector<int32_t> &perm) {
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == static_cast<int32_t>(k);
  if (identity) return x;
  ctn_attrs a{};
  for (int32_t p : perm) a.i[a.ni++] = p;
  return g.op1(CTN_OP_PERMUTE, x, &a);
}

ctn_node slice(Graph &g, ctn_node x, int32_t axis, int64_t start, int64_t stop, int64_t step) {
  const int64_t n = g.info(x).shape[static_cast<uint32_t>(axis)];
  if (start == 0 && stop >= n && step == 1) return x;
  ctn_attrs a = attrs_i({axis, start, stop, step});
  return g.op1(CTN_OP_SLICE, x, &a);
}

ctn_node take(Graph &g, ctn_node x, ctn_node idx, int32_t axis) {
  const Shape xs = g.info(x).shape, is = g.info(idx).shape;
  const int32_t dt = g.info(x).dtype;
  const uint32_t nd = xs.ndim;
  if (nd - 1 + is.ndim > CTN_MAX_DIMS) fail(CTN_ERR_UNSUPPORTED, "gather: the result would have more than %d dims", CTN_MAX_DIMS);
  // Move `axis` to the front and flatten the rest: the embedding table [n, rest].
  std::vector<int32_t> front{axis};
  for (uint32_t k = 0; k < nd; ++k)
    if (static_cast<int32_t>(k) != axis) front.push_back(static_cast<int32_t>(k));
  int64_t rest = 1;
  for (uint32_t k = 0; k < nd; ++k)
    if (static_cast<int32_t>(k) != axis) rest *= xs[k];
  if (rest == 0 || xs[static_cast<uint32_t>(axis)] == 0)
    fail(CTN_ERR_UNSUPPORTED, "gather: empty tensors are not supported (%s)", shape_str(xs).c_str());
  ctn_node table = reshape(g, permute(g, x, front), Shape::from(2, std::vector<int64_t>{xs[static_cast<uint32_t>(axis)], rest}.data()));
  const bool f = dtype_is_float(dt);
  if (!f) table = cast(g, table, CTN_F64);
  ctn_node ids = g.info(idx).dtype == CTN_I32 ? idx : cast(g, idx, CTN_I64);
  ctn_node y = g.op2(CTN_OP_EMBEDDING, table, ids);  // [is..., rest]
  // Unflatten to [is..., x dims but axis] and move the index dims to where `axis` was.
  Shape us = is;
  for (uint32_t k = 0; k < nd; ++k)
    if (static_cast<int32_t>(k) != axis) us[us.ndim++] = xs[k];
  y = reshape(g, y, us);
  std::vector<int32_t> perm;
  const int32_t ni = static_cast<int32_t>(is.ndim);
  for (int32_t k = 0; k < axis; ++k) perm.push_back(ni + k);
  for (int32_t k = 0; k < ni; ++k) perm.push_back(k);
  for (int32_t k = axis; k < static_cast<int32_t>(nd) - 1; ++k) perm.push_back(ni + k);
  y = permute(g, y, perm);
  return f ? y : cast(g, y, dt);
}

ctn_node reverse(Graph &g, ctn_node x, int32_t axis) {
  const int64_t n = g.info(x).shape[static_cast<uint32_t>(axis)];
  if (n <= 1) return x;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) idx[static_cast<size_t>(k)] = n - 1 - k;
  return take(g, x, const_i64(g, idx, Shape::from(1, &n)), axis);
}

ctn_node pad_axis(Graph &g, ctn_node x, int32_t axis, int64_t before, int64_t after, int mode, double value) {
  const uint32_t ax = static_cast<uint32_t>(axis);
  int64_t n = g.info(x).shape[ax];
  // Negative pads crop.
  if (before < 0 || after < 0) {
    int64_t b = before < 0 ? -before : 0, e = after < 0 ? -after : 0;
    if (b + e > n) fail(CTN_ERR_SHAPE, "pad: cropping %lld + %lld elements from an axis of %lld", static_cast<long long>(b),
                        static_cast<long long>(e), static_cast<long long>(n));
    x = slice(g, x, axis, b, n - e, 1);
    n -= b + e;
    before = before < 0 ? 0 : before;
    after = after < 0 ? 0 : after;
  }
  if (before == 0 && after == 0) return x;
  if (mode == 0) {
    std::vector<ctn_node> parts;
    auto block = [&](int64_t len) {
      Shape s = g.info(x).shape;
      s[ax] = len;
      ctn_attrs a{};
      for (uint32_t k = 0; k < s.ndim; ++k) a.i[a.ni++] = s[k];
      return g.op1(CTN_OP_BROADCAST_TO, scalar_like(g, x, value), &a);
    };
    if (before) parts.push_back(block(before));
    parts.push_back(x);
    if (after) parts.push_back(block(after));
    ctn_attrs a = attrs_i({axis});
    return g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(parts.size()), parts.data(), &a);
  }
  if (n == 0) fail(CTN_ERR_SHAPE, "pad: edge, reflect and wrap modes need a non-empty axis");
  if (mode == 2 && n == 1) mode = 1;  // reflecting a single element repeats it
  if (static_cast<double>(before) + static_cast<double>(after) + static_cast<double>(n) > 1e9)
    fail(CTN_ERR_UNSUPPORTED, "pad: %lld + %lld elements of padding", static_cast<long long>(before), static_cast<long long>(after));
  std::vector<int64_t> idx;
  for (int64_t j = -before; j < n + after; ++j) {
    int64_t s = j;
    if (mode == 1) {
      s = j < 0 ? 0 : (j >= n ? n - 1 : j);
    } else if (mode == 2) {
      const int64_t period = 2 * (n - 1);
      s = ((j % period) + period) % period;
      if (s >= n) s = period - s;
    } else {
      s = ((j % n) + n) % n;
    }
    idx.push_back(s);
  }
  const int64_t len = static_cast<int64_t>(idx.size());
  return take(g, x, const_i64(g, idx, Shape::from(1, &len)), axis);
}

ctn_node softplus(Graph &g, ctn_node x) {
  // relu(x) + log(1 + exp(-|x|)): no overflow for large |x|.
  ctn_node e = g.op1(CTN_OP_EXP, g.op1(CTN_OP_NEG, g.op1(CTN_OP_ABS, x)));
  return g.op2(CTN_OP_ADD, g.op1(CTN_OP_RELU, x), g.op1(CTN_OP_LOG, g.op2(CTN_OP_ADD, e, scalar_like(g, x, 1))));
}

ctn_node elu(Graph &g, ctn_node x, double alpha) {
  // exp of min(x, 0): the branch where() drops must stay finite or its zero gradient becomes NaN.
  ctn_node zero = scalar_like(g, x, 0);
  ctn_node neg = g.op2(CTN_OP_MUL, g.op2(CTN_OP_SUB, g.op1(CTN_OP_EXP, g.op2(CTN_OP_MINIMUM, x, zero)), scalar_like(g, x, 1)),
                       scalar_like(g, x, alpha));
  ctn_node in[3] = {g.op2(CTN_OP_GT, x, zero), x, neg};
  return g.add_op(CTN_OP_WHERE, 3, in, nullptr);
}

ctn_node hardsigmoid(Graph &g, ctn_node x, double alpha, double beta) {
  ctn_node y = g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, x, scalar_like(g, x, alpha)), scalar_like(g, x, beta));
  ctn_attrs a = attrs_f({0.0, 1.0});
  return g.op1(CTN_OP_CLAMP, y, &a);
}

ctn_node floor(Graph &g, ctn_node x) {
  const int32_t dt = g.info(x).dtype;
  ctn_node t = cast(g, cast(g, x, CTN_I64), dt);  // truncation toward zero
  return g.op2(CTN_OP_SUB, t, cast(g, g.op2(CTN_OP_GT, t, x), dt));
}

ctn_node logical_not(Graph &g, ctn_node b) { return g.op2(CTN_OP_EQ, b, g.add_scalar(CTN_BOOL, 0)); }

ctn_node ramp(Graph &g, int64_t n, uint32_t ndim, uint32_t axis) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = static_cast<double>(k);
  Shape s;
  s.ndim = ndim;
  for (uint32_t k = 0; k < ndim; ++k) s[k] = k == axis ? n : 1;
  return const_f(g, CTN_F64, v, s);
}

ctn_node one_hot(Graph &g, ctn_node idx, int64_t n, uint32_t axis) {
  return g.op2(CTN_OP_EQ, cast(g, idx, CTN_F64), ramp(g, n, g.info(idx).shape.ndim, axis));
}

ctn_node extreme_index(Graph &g, ctn_node x, uint32_t axis, bool is_max, bool last) {
  // Compare with the reduced extreme, then take the min (or max) of the matching ramp entries.
  x = cast(g, x, CTN_F64);
  const uint64_t mask = 1ull << axis;
  const int64_t n = g.info(x).shape[axis];
  ctn_node ext = is_max ? reduce(g, CTN_OP_MAX, x, mask, true) : reduce_min(g, x, mask, true);
  ctn_node in[3] = {g.op2(CTN_OP_EQ, x, ext), ramp(g, n, g.info(x).shape.ndim, axis),
                    g.add_scalar(CTN_F64, last ? -1.0 : static_cast<double>(n))};
  ctn_node cand = g.add_op(CTN_OP_WHERE, 3, in, nullptr);
  return last ? reduce(g, CTN_OP_MAX, cand, mask, true) : reduce_min(g, cand, mask, true);
}

ctn_node product(Graph &g, ctn_node x, const std::function<ctn_node(ctn_node)> &sum) {
  const bool integral = !dtype_is_float(g.info(x).dtype);
  x = cast(g, x, CTN_F64);
  ctn_node zero = g.add_scalar(CTN_F64, 0);
  ctn_node is0 = g.op2(CTN_OP_EQ, x, zero);
  ctn_node in[3] = {is0, g.add_scalar(CTN_F64, 1), g.op1(CTN_OP_ABS, x)};
  ctn_node mag = g.op1(CTN_OP_EXP, sum(g.op1(CTN_OP_LOG, g.add_op(CTN_OP_WHERE, 3, in, nullptr))));
  ctn_node nneg = sum(cast(g, g.op2(CTN_OP_LT, x, zero), CTN_F64));
  ctn_node half = g.op2(CTN_OP_MUL, nneg, g.add_scalar(CTN_F64, 0.5));
  ctn_node odd = g.op2(CTN_OP_NE, floor(g, half), half);
  ctn_node any0 = g.op2(CTN_OP_GT, sum(cast(g, is0, CTN_F64)), zero);
  ctn_node signed_in[3] = {odd, g.op1(CTN_OP_NEG, mag), mag};
  ctn_node y = g.add_op(CTN_OP_WHERE, 3, signed_in, nullptr);
  ctn_node zeroed_in[3] = {any0, zero, y};
  y = g.add_op(CTN_OP_WHERE, 3, zeroed_in, nullptr);
  if (integral) y = floor(g, g.op2(CTN_OP_ADD, y, g.add_scalar(CTN_F64, 0.5)));
  return y;
}

void moments(Graph &g, ctn_node x, uint64_t mask, ctn_node *mean, ctn_node *var) {
  *mean = reduce(g, CTN_OP_MEAN, x, mask, true);
  ctn_node d = g.op2(CTN_OP_SUB, x, *mean);
  *var = reduce(g, CTN_OP_MEAN, g.op2(CTN_OP_MUL, d, d), mask, true);
}

}  // namespace ctn::onnx::lower
