// ONNX shape, indexing and constant-producing ops, lowered to chutney's reshape, permute, slice,
// concat, broadcast_to and embedding (for gathers).
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace ctn::onnx {
namespace {

using namespace lower;

void out1(NodeCtx &c, ctn_node y) { c.outs = {y}; }

Shape to_shape(NodeCtx &c, const std::vector<int64_t> &v, const char *what) {
  if (v.size() > CTN_MAX_DIMS) c.unsupported("%s has %zu dims; chutney supports at most %d", what, v.size(), CTN_MAX_DIMS);
  for (int64_t d : v)
    if (d < 0) c.invalid("%s has a negative dimension %lld", what, static_cast<long long>(d));
  return Shape::from(static_cast<uint32_t>(v.size()), v.data());
}

// Axes from the attribute (older opsets) or from input `i` (newer ones); `empty` when neither.
std::vector<int64_t> axes_of(NodeCtx &c, size_t i) {
  if (c.has_attr("axes")) return c.attr_ints("axes");
  if (c.has(i)) return c.ints(i, "axes");
  return {};
}

void identity(NodeCtx &c) { out1(c, c.in(0)); }

void reshape_(NodeCtx &c) {
  const Shape s = c.shape(0);
  std::vector<int64_t> t = c.has_attr("shape") ? c.attr_ints("shape") : c.ints(1, "shape");
  const bool allowzero = c.attr_i("allowzero", 0) != 0;
  if (t.size() > CTN_MAX_DIMS) c.unsupported("a %zu-d result (chutney supports at most %d dims)", t.size(), CTN_MAX_DIMS);
  for (size_t k = 0; k < t.size(); ++k) {
    if (t[k] == 0 && !allowzero) {
      if (k >= s.ndim) c.invalid("shape[%zu] = 0 copies a dimension the %u-d input lacks", k, s.ndim);
      t[k] = s[static_cast<uint32_t>(k)];
    }
  }
  out1(c, reshape(c.g, c.in(0), resolve_reshape("Reshape", s, static_cast<uint32_t>(t.size()), t.data())));
}

void flatten(NodeCtx &c) {
  const Shape s = c.shape(0);
  int64_t ax = c.attr_i("axis", 1);
  if (ax < 0) ax += s.ndim;
  if (ax < 0 || ax > static_cast<int64_t>(s.ndim)) c.invalid("axis %lld is out of range", static_cast<long long>(ax));
  int64_t a = 1, b = 1;
  for (uint32_t k = 0; k < s.ndim; ++k) (static_cast<int64_t>(k) < ax ? a : b) *= s[k];
  out1(c, reshape(c.g, c.in(0), Shape::from(2, std::vector<int64_t>{a, b}.data())));
}

void transpose(NodeCtx &c) {
  const uint32_t nd = c.shape(0).ndim;
  std::vector<int64_t> p = c.attr_ints("perm");
  std::vector<int32_t> perm;
  if (p.empty())
    for (uint32_t k = 0; k < nd; ++k) perm.push_back(static_cast<int32_t>(nd - 1 - k));
  else
    for (int64_t v : p) perm.push_back(c.axis(v, nd));
  if (perm.size() != nd) c.invalid("perm has %zu entries for a %u-d input", perm.size(), nd);
  out1(c, permute(c.g, c.in(0), perm));
}

void squeeze(NodeCtx &c) {
  const Shape s = c.shape(0);
  std::vector<int64_t> axes = axes_of(c, 1);
  uint64_t mask = 0;
  for (int64_t a : axes) {
    int32_t ax = c.axis(a, s.ndim);
    if (s[static_cast<uint32_t>(ax)] != 1) c.invalid("axis %lld has size %lld, not 1", static_cast<long long>(a),
                                                    static_cast<long long>(s[static_cast<uint32_t>(ax)]));
    mask |= 1ull << ax;
  }
  if (axes.empty())
    for (uint32_t k = 0; k < s.ndim; ++k)
      if (s[k] == 1) mask |= 1ull << k;
  Shape r;
  for (uint32_t k = 0; k < s.ndim; ++k)
    if (!((mask >> k) & 1)) r[r.ndim++] = s[k];
  out1(c, reshape(c.g, c.in(0), r));
}

void unsqueeze(NodeCtx &c) {
  const Shape s = c.shape(0);
  std::vector<int64_t> axes = axes_of(c, 1);
  const uint32_t nd = s.ndim + static_cast<uint32_t>(axes.size());
  if (nd > CTN_MAX_DIMS) c.unsupported("a %u-d result (chutney supports at most %d dims)", nd, CTN_MAX_DIMS);
  uint64_t mask = 0;
  for (int64_t a : axes) {
    int32_t ax = c.axis(a, nd);
    if (mask & (1ull << ax)) c.invalid("axis %lld is listed twice", static_cast<long long>(a));
    mask |= 1ull << ax;
  }
  Shape r;
  r.ndim = nd;
  for (uint32_t k = 0, j = 0; k < nd; ++k) r[k] = ((mask >> k) & 1) ? 1 : s[j++];
  out1(c, reshape(c.g, c.in(0), r));
}

void concat(NodeCtx &c) {
  std::vector<ctn_node> in;
  for (size_t k = 0; k < c.n_in(); ++k)
    if (c.has(k)) in.push_back(c.in(k));
  if (in.empty()) c.invalid("no inputs");
  const uint32_t nd = c.g.info(in[0]).shape.ndim;
  ctn_attrs a = attrs_i({c.axis(c.attr_i("axis", 0), nd)});
  // chutney's concat refuses 0-d pieces; ONNX allows none either, but empty pieces are common.
  std::vector<ctn_node> nonempty;
  for (ctn_node x : in)
    if (c.g.info(x).shape.numel() != 0) nonempty.push_back(x);
  if (nonempty.size() == 1 && c.g.info(nonempty[0]).shape.ndim == nd) {
    Shape total = c.g.info(in[0]).shape;
    total[static_cast<uint32_t>(a.i[0])] = 0;
    for (ctn_node x : in) total[static_cast<uint32_t>(a.i[0])] += c.g.info(x).shape[static_cast<uint32_t>(a.i[0])];
    if (total == c.g.info(nonempty[0]).shape) return out1(c, nonempty[0]);
  }
  out1(c, c.g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(in.size()), in.data(), &a));
}

void split(NodeCtx &c) {
  const Shape s = c.shape(0);
  const int32_t ax = c.axis(c.attr_i("axis", 0), s.ndim);
  const int64_t n = s[static_cast<uint32_t>(ax)];
  std::vector<int64_t> sizes = c.has_attr("split") ? c.attr_ints("split") : c.has(1) ? c.ints(1, "split") : std::vector<int64_t>{};
  const size_t outs = c.node.outputs.size();
  int64_t parts = c.attr_i("num_outputs", static_cast<int64_t>(outs));
  if (sizes.empty()) {
    if (parts <= 0 || parts != static_cast<int64_t>(outs))
      c.invalid("num_outputs %lld for a node with %zu outputs", static_cast<long long>(parts), outs);
    const int64_t chunk = (n + parts - 1) / parts;  // opset 18: the last part may be smaller
    for (int64_t k = 0, left = n; k < parts; ++k, left -= chunk) sizes.push_back(std::max<int64_t>(0, std::min(chunk, left)));
  }
  int64_t total = 0;
  for (int64_t v : sizes) total += v;
  if (total != n || sizes.size() != outs)
    c.invalid("split sizes add up to %lld for an axis of %lld, into %zu outputs", static_cast<long long>(total),
              static_cast<long long>(n), outs);
  int64_t at = 0;
  for (int64_t v : sizes) {
    c.outs.push_back(slice(c.g, c.in(0), ax, at, at + v, 1));
    at += v;
  }
}

void slice_(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10 || c.has_attr("starts")) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    starts = c.ints(1, "starts");
    ends = c.ints(2, "ends");
    if (c.has(3)) axes = c.ints(3, "axes");
    if (c.has(4)) steps = c.ints(4, "steps");
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.invalid("starts, ends, axes and steps differ in length");
  ctn_node x = c.in(0);
  for (size_t k = 0; k < starts.size(); ++k) {
    const int32_t ax = c.axis(axes[k], s.ndim);
    const int64_t n = s[static_cast<uint32_t>(ax)], step = steps[k];
    int64_t b = starts[k], e = ends[k];
    if (step == 0) c.invalid("steps[%zu] is 0", k);
    if (b < 0) b = b < -n ? 0 : b + n;
    if (e < 0) e = e < -n ? -1 : e + n;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      x = slice(g, x, ax, b, std::max(b, e), step);
    } else {
      // Walk the reversed axis forward: index i becomes n-1-i.
      b = std::clamp<int64_t>(b, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      if (n == 0 || b <= e) {
        x = slice(g, x, ax, 0, 0, 1);
        continue;
      }
      x = slice(g, reverse(g, x, ax), ax, n - 1 - b, n - 1 - e, step == std::numeric_limits<int64_t>::min() ? n : -step);
    }
  }
  out1(c, x);
}

// Non-negative indices: constant ones are fixed here, others get n added where negative.
ctn_node fix_indices(NodeCtx &c, ctn_node idx, int64_t n) {
  Graph &g = c.g;
  const Node &node = g.node(idx);
  if (node.kind == NodeKind::Constant) {
    Tensor t = node.value->contiguous();
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    for (size_t k = 0; k < v.size(); ++k) {
      int64_t x = t.dtype == CTN_I32 ? reinterpret_cast<const int32_t *>(t.data())[k] : reinterpret_cast<const int64_t *>(t.data())[k];
      if (x < -n || x >= n) c.invalid("index %lld is out of range for an axis of %lld", static_cast<long long>(x), static_cast<long long>(n));
      v[k] = x < 0 ? x + n : x;
    }
    return const_i64(g, v, t.shape);
  }
  ctn_node f = cast(g, idx, CTN_F64);
  ctn_node neg = cast(g, g.op2(CTN_OP_LT, f, g.add_scalar(CTN_F64, 0)), CTN_F64);
  return cast(g, g.op2(CTN_OP_ADD, f, g.op2(CTN_OP_MUL, neg, g.add_scalar(CTN_F64, static_cast<double>(n)))), CTN_I64);
}

void gather(NodeCtx &c) {
  const Shape s = c.shape(0);
  if (s.ndim == 0) c.invalid("data must be at least 1-d");
  if (c.dtype(1) != CTN_I32 && c.dtype(1) != CTN_I64) c.invalid("indices must be int32 or int64");
  const int32_t ax = c.axis(c.attr_i("axis", 0), s.ndim);
  out1(c, take(c.g, c.in(0), fix_indices(c, c.in(1), s[static_cast<uint32_t>(ax)]), ax));
}

// GatherElements / ScatterElements: the flat index (f64) into data of each element of indices
// (input 1) along `ax`: idx * stride(axis) + the offset of every other coordinate.
ctn_node elements_flat_index(NodeCtx &c, int32_t ax) {
  Graph &g = c.g;
  const Shape s = c.shape(0), is = c.shape(1);
  if (is.ndim != s.ndim) c.invalid("indices must have the rank of data");
  for (uint32_t k = 0; k < s.ndim; ++k)
    if (static_cast<int32_t>(k) != ax && is[k] > s[k]) c.invalid("indices' dim %u (%lld) exceeds data's (%lld)", k,
                                                                 static_cast<long long>(is[k]), static_cast<long long>(s[k]));
  int64_t strides[CTN_MAX_DIMS];
  contiguous_strides(s, strides);
  std::vector<int64_t> base(static_cast<size_t>(is.numel()));
  for (int64_t f = 0; f < is.numel(); ++f) {
    int64_t rem = f, off = 0;
    for (int32_t k = static_cast<int32_t>(is.ndim) - 1; k >= 0; --k) {
      int64_t i = rem % is[static_cast<uint32_t>(k)];
      rem /= is[static_cast<uint32_t>(k)];
      if (k != ax) off += i * strides[k];
    }
    base[static_cast<size_t>(f)] = off;
  }
  ctn_node idx = cast(g, fix_indices(c, c.in(1), s[static_cast<uint32_t>(ax)]), CTN_F64);
  return g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, idx, g.add_scalar(CTN_F64, static_cast<double>(strides[ax]))),
               cast(g, const_i64(g, base, is), CTN_F64));
}

void gather_elements(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  ctn_node flat = elements_flat_index(c, c.axis(c.attr_i("axis", 0), s.ndim));
  const int64_t total = s.numel();
  out1(c, take(g, reshape(g, c.in(0), Shape::from(1, &total)), cast(g, flat, CTN_I64), 0));
}

// ReverseSequence: x[t, b] reads x[L[b] - 1 - t, b] where t < L[b] (sequence_lens, a graph value),
// else x[t, b]: a gather at flat element k + d[t, b] * stride(time), d = L - 1 - 2t or 0.
void reverse_sequence(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  if (s.ndim < 2) c.invalid("input must be at least 2-d");
  const int32_t bax = c.axis(c.attr_i("batch_axis", 1), s.ndim), tax = c.axis(c.attr_i("time_axis", 0), s.ndim);
  if (bax == tax || bax > 1 || tax > 1) c.invalid("batch_axis and time_axis must be 0 and 1 (got %d and %d)", bax, tax);
  if (c.shape(1).ndim != 1 || c.shape(1)[0] != s[static_cast<uint32_t>(bax)])
    c.invalid("sequence_lens must be [%lld]", static_cast<long long>(s[static_cast<uint32_t>(bax)]));
  const int64_t total = s.numel();
  c.limit(static_cast<double>(total), "an index map");
  std::vector<int64_t> iota(static_cast<size_t>(total));
  for (int64_t k = 0; k < total; ++k) iota[static_cast<size_t>(k)] = k;
  int64_t strides[CTN_MAX_DIMS];
  contiguous_strides(s, strides);
  Shape ls;
  ls.ndim = s.ndim;
  for (uint32_t k = 0; k < s.ndim; ++k) ls.d[k] = static_cast<int32_t>(k) == bax ? s[k] : 1;
  ctn_node len = reshape(g, cast(g, c.in(1), CTN_F64), ls);
  ctn_node t = ramp(g, s[static_cast<uint32_t>(tax)], s.ndim, static_cast<uint32_t>(tax));
  ctn_node back = g.op2(CTN_OP_SUB, g.op2(CTN_OP_SUB, len, g.add_scalar(CTN_F64, 1)), g.op2(CTN_OP_MUL, t, g.add_scalar(CTN_F64, 2)));
  ctn_node d = g.op2(CTN_OP_MUL, cast(g, g.op2(CTN_OP_LT, t, len), CTN_F64), back);
  ctn_node flat = g.op2(CTN_OP_ADD, cast(g, const_i64(g, iota, s), CTN_F64),
                        g.op2(CTN_OP_MUL, d, g.add_scalar(CTN_F64, static_cast<double>(strides[tax]))));
  out1(c, take(g, reshape(g, c.in(0), Shape::from(1, &total)), cast(g, flat, CTN_I64), 0));
}

// GatherND / ScatterND: the flat row index (f64, indices.shape[:-1]) into data viewed as `rows`
// = [prod(shape[:b + k]), shape[b + k:]...], k the last dim of indices (input 1) and b the
// leading batch dims (GatherND's batch_dims) that data and indices share: batch element e's
// indices address dims b..b+k-1 of its own slice, at rows e * prod(shape[b:b + k]).
ctn_node nd_flat_row(NodeCtx &c, Shape *rows, int64_t b = 0) {
  Graph &g = c.g;
  const Shape s = c.shape(0), is = c.shape(1);
  if (is.ndim == 0) c.invalid("indices must be at least 1-d");
  const int64_t k = is[is.ndim - 1];
  if (b < 0 || b >= static_cast<int64_t>(is.ndim) || b >= static_cast<int64_t>(s.ndim))
    c.invalid("batch_dims %lld must be below the ranks of data and indices", static_cast<long long>(b));
  int64_t batch = 1;
  for (uint32_t d = 0; d < static_cast<uint32_t>(b); ++d) {
    if (s[d] != is[d]) c.invalid("data %s and indices %s differ in batch dim %u", shape_str(s).c_str(), shape_str(is).c_str(), d);
    batch *= s[d];
  }
  if (k < 1 || b + k > static_cast<int64_t>(s.ndim)) c.invalid("the last dim of indices (%lld) exceeds the data's rank", static_cast<long long>(k));
  std::vector<double> stride(static_cast<size_t>(k)), dims(static_cast<size_t>(k));
  double st = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    stride[static_cast<size_t>(j)] = st;
    dims[static_cast<size_t>(j)] = static_cast<double>(s[static_cast<uint32_t>(b + j)]);
    st *= dims[static_cast<size_t>(j)];
  }
  Shape ks;
  ks.ndim = is.ndim;
  for (uint32_t d = 0; d + 1 < is.ndim; ++d) ks[d] = 1;
  ks[is.ndim - 1] = k;
  ctn_node idx = cast(g, c.in(1), CTN_F64);
  ctn_node neg = cast(g, g.op2(CTN_OP_LT, idx, g.add_scalar(CTN_F64, 0)), CTN_F64);
  idx = g.op2(CTN_OP_ADD, idx, g.op2(CTN_OP_MUL, neg, const_f(g, CTN_F64, dims, ks)));
  *rows = Shape{};
  (*rows)[rows->ndim++] = batch * static_cast<int64_t>(st);
  for (uint32_t d = static_cast<uint32_t>(b + k); d < s.ndim; ++d) (*rows)[rows->ndim++] = s[d];
  ctn_node flat = reduce(g, CTN_OP_SUM, g.op2(CTN_OP_MUL, idx, const_f(g, CTN_F64, stride, ks)), 1ull << (is.ndim - 1), false);
  if (b == 0) return flat;
  Shape bs = g.info(flat).shape;  // is[:-1]: the batch dims, then ones
  for (uint32_t d = static_cast<uint32_t>(b); d < bs.ndim; ++d) bs[d] = 1;
  std::vector<double> off(static_cast<size_t>(batch));
  for (int64_t e = 0; e < batch; ++e) off[static_cast<size_t>(e)] = static_cast<double>(e) * st;
  return g.op2(CTN_OP_ADD, flat, const_f(g, CTN_F64, off, bs));
}

void gather_nd(NodeCtx &c) {
  Shape rows;
  ctn_node flat = nd_flat_row(c, &rows, c.attr_i("batch_dims", 0));
  out1(c, take(c.g, reshape(c.g, c.in(0), rows), cast(c.g, flat, CTN_I64), 0));
}

// Scatter of U update rows (upd [U, R]) into the N rows of data ([N, R]) at the flat row indices
// `flat` (f64 [U]), with ONNX's reduction ("none", "add", "mul", "max", "min"). No scatter op
// exists: a [N, U, 1] mask of (flat == row) selects each row's updates, reduced over U. Under
// "none" duplicate indices (undefined in ONNX) add up.
ctn_node scatter_rows(NodeCtx &c, ctn_node data, ctn_node flat, ctn_node upd, const std::string &red) {
  Graph &g = c.g;
  const int32_t dt = g.info(data).dtype, wt = dtype_is_float(dt) ? dt : CTN_F64;
  const int64_t n = g.info(data).shape[0], u = g.info(upd).shape[0], r = g.info(upd).shape[1];
  c.limit(static_cast<double>(n) * static_cast<double>(u) * static_cast<double>(r), "scatter's row-by-update mask");
  ctn_node d = cast(g, data, wt);
  ctn_node sel = g.op2(CTN_OP_EQ, reshape(g, flat, Shape::from(3, std::vector<int64_t>{1, u, 1}.data())), ramp(g, n, 3, 0));
  ctn_node vals = reshape(g, cast(g, upd, wt), Shape::from(3, std::vector<int64_t>{1, u, r}.data()));
  ctn_node hit = g.op2(CTN_OP_GT, reduce(g, CTN_OP_SUM, cast(g, sel, wt), 2, false), g.add_scalar(wt, 0));  // [N, 1]
  auto pick = [&](double other) {
    ctn_node in[3] = {sel, vals, g.add_scalar(wt, other)};
    return g.add_op(CTN_OP_WHERE, 3, in, nullptr);
  };
  auto where = [&](ctn_node cond, ctn_node a, ctn_node b) {
    ctn_node in[3] = {cond, a, b};
    return g.add_op(CTN_OP_WHERE, 3, in, nullptr);
  };
  const double inf = std::numeric_limits<double>::infinity();
  ctn_node y;
  if (red == "none") y = where(hit, reduce(g, CTN_OP_SUM, pick(0), 2, false), d);
  else if (red == "add") y = g.op2(CTN_OP_ADD, d, reduce(g, CTN_OP_SUM, pick(0), 2, false));
  else if (red == "mul") y = g.op2(CTN_OP_MUL, d, cast(g, product(g, pick(1), [&](ctn_node v) { return reduce(g, CTN_OP_SUM, v, 2, false); }), wt));
  else if (red == "max") y = where(hit, g.op2(CTN_OP_MAXIMUM, d, reduce(g, CTN_OP_MAX, pick(-inf), 2, false)), d);
  else if (red == "min") y = where(hit, g.op2(CTN_OP_MINIMUM, d, reduce_min(g, pick(inf), 2, false)), d);
  else c.invalid("unknown reduction '%s'", red.c_str());
  return cast(g, y, dt);
}

void scatter_elements(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0), us = c.shape(2);
  if (!(us == c.shape(1))) c.invalid("updates must have the shape of indices");
  ctn_node flat = elements_flat_index(c, c.axis(c.attr_i("axis", 0), s.ndim));
  const int64_t n = s.numel(), u = us.numel();
  ctn_node y = scatter_rows(c, reshape(g, c.in(0), Shape::from(2, std::vector<int64_t>{n, 1}.data())),
                            reshape(g, flat, Shape::from(1, &u)),
                            reshape(g, c.in(2), Shape::from(2, std::vector<int64_t>{u, 1}.data())), c.attr_s("reduction", "none"));
  out1(c, reshape(g, y, s));
}

void scatter_nd(NodeCtx &c) {
  Graph &g = c.g;
  Shape rows;
  ctn_node flat = nd_flat_row(c, &rows);
  const int64_t u = g.info(flat).shape.numel(), n = rows[0], r = n ? c.shape(0).numel() / n : 0;
  if (c.shape(2).numel() != u * r) c.invalid("updates have %lld elements, indices and data make %lld",
                                             static_cast<long long>(c.shape(2).numel()), static_cast<long long>(u * r));
  ctn_node y = scatter_rows(c, reshape(g, c.in(0), Shape::from(2, std::vector<int64_t>{n, r}.data())),
                            reshape(g, flat, Shape::from(1, &u)),
                            reshape(g, c.in(2), Shape::from(2, std::vector<int64_t>{u, r}.data())), c.attr_s("reduction", "none"));
  out1(c, reshape(g, y, c.shape(0)));
}

void expand(NodeCtx &c) {
  const Shape s = c.shape(0);
  Shape t = to_shape(c, c.ints(1, "shape"), "shape"), r;
  if (!broadcast_shapes(s, t, &r)) c.invalid("%s does not broadcast to %s", shape_str(s).c_str(), shape_str(t).c_str());
  if (r == s) return out1(c, c.in(0));
  ctn_attrs a{};
  for (uint32_t k = 0; k < r.ndim; ++k) a.i[a.ni++] = r[k];
  out1(c, c.g.op1(CTN_OP_BROADCAST_TO, c.in(0), &a));
}

void tile(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  std::vector<int64_t> reps = c.ints(1, "repeats");
  if (reps.size() != s.ndim) c.invalid("repeats has %zu entries for a %u-d input", reps.size(), s.ndim);
  ctn_node x = c.in(0);
  // One axis at a time: [.., d, ..] -> [.., 1, d, ..] -> broadcast [.., r, d, ..] -> [.., r*d, ..].
  for (uint32_t k = 0; k < s.ndim; ++k) {
    const int64_t r = reps[k];
    if (r < 0) c.invalid("repeats[%u] is negative", k);
    if (r == 1) continue;
    Shape cur = g.info(x).shape, up, br, res = cur;
    if (cur.ndim + 1 > CTN_MAX_DIMS) c.unsupported("tiling a %u-d input", cur.ndim);
    for (uint32_t j = 0; j < cur.ndim; ++j) {
      if (j == k) up[up.ndim++] = 1, br[br.ndim++] = r;
      up[up.ndim++] = cur[j];
      br[br.ndim++] = cur[j];
    }
    res[k] = cur[k] * r;
    ctn_attrs a{};
    for (uint32_t j = 0; j < br.ndim; ++j) a.i[a.ni++] = br[j];
    x = reshape(g, g.op1(CTN_OP_BROADCAST_TO, reshape(g, x, up), &a), res);
  }
  out1(c, x);
}

void pad(NodeCtx &c) {
  const Shape s = c.shape(0);
  std::string m = c.attr_s("mode", "constant");
  int mode = m == "constant" ? 0 : m == "edge" ? 1 : m == "reflect" ? 2 : m == "wrap" ? 3 : -1;
  if (mode < 0) c.unsupported("mode '%s'", m.c_str());
  std::vector<int64_t> pads = c.has_attr("pads") ? c.attr_ints("pads") : c.ints(1, "pads");
  double value = c.attr_f("value", 0.0);
  if (c.has(2)) value = c.reals(2, "constant_value").at(0);
  std::vector<int64_t> axes;
  if (c.has(3))
    for (int64_t a : c.ints(3, "axes")) axes.push_back(c.axis(a, s.ndim));
  else
    for (uint32_t k = 0; k < s.ndim; ++k) axes.push_back(k);
  if (pads.size() != 2 * axes.size()) c.invalid("pads has %zu entries for %zu axes", pads.size(), axes.size());
  ctn_node x = c.in(0);
  for (size_t k = 0; k < axes.size(); ++k)
    x = pad_axis(c.g, x, static_cast<int32_t>(axes[k]), pads[k], pads[k + axes.size()], mode, value);
  out1(c, x);
}

// The shape of a value that an op with a data-dependent shape produced (or that reads one) is
// known only when the plan runs: a constant made from its upper bound would be wrong.
void need_static_shape(NodeCtx &c) {
  if (c.g.node(c.in(0)).bounded)
    c.unsupported("the shape of input 0 depends on data (it comes from NonZero, Unique, Compress, TopK or "
                  "NonMaxSuppression): known only at run time, and Shape/Size are folded at import");
}

void shape_(NodeCtx &c) {
  need_static_shape(c);
  const Shape s = c.shape(0);
  const int64_t nd = s.ndim;
  int64_t b = c.attr_i("start", 0), e = c.attr_i("end", nd);
  if (b < 0) b += nd;
  if (e < 0) e += nd;
  b = std::clamp<int64_t>(b, 0, nd);
  e = std::clamp<int64_t>(e, 0, nd);
  std::vector<int64_t> v;
  for (int64_t k = b; k < e; ++k) v.push_back(s[static_cast<uint32_t>(k)]);
  int64_t n = static_cast<int64_t>(v.size());
  out1(c, const_i64(c.g, v, Shape::from(1, &n)));
}

void size_(NodeCtx &c) {
  need_static_shape(c);
  out1(c, const_i64(c.g, {c.shape(0).numel()}, Shape{}));
}

Tensor filled(int32_t dt, const Shape &s, const Tensor &one) {
  Tensor t = Tensor::empty(dt, s);
  const size_t es = dtype_size(dt);
  for (int64_t k = 0; k < t.numel(); ++k) std::memcpy(t.data() + k * es, one.data(), es);
  return t;
}

void constant_of_shape(NodeCtx &c) {
  Shape s = to_shape(c, c.ints(0, "shape"), "shape");
  double numel = 1;
  for (uint32_t k = 0; k < s.ndim; ++k) numel *= static_cast<double>(s[k]);
  c.limit(numel, "a filled tensor");
  Tensor one = Tensor::empty(CTN_F32, Shape{});
  if (const AttributeP *a = c.attr("value")) {
    if (a->type != AT_TENSOR || !a->t) c.invalid("attribute 'value' must be a tensor");
    one = tensor_from_proto(*a->t, "", "ConstantOfShape");
    if (one.numel() != 1) c.invalid("attribute 'value' must hold one element");
  }
  out1(c, c.g.add_constant(filled(one.dtype, s, one)));
}

void constant(NodeCtx &c) {
  Graph &g = c.g;
  if (const AttributeP *a = c.attr("value")) {
    if (a->type != AT_TENSOR || !a->t) c.invalid("attribute 'value' must be a tensor");
    return out1(c, g.add_constant(tensor_from_proto(*a->t, "", "Constant")));
  }
  if (c.has_attr("value_float")) return out1(c, const_f(g, CTN_F32, {c.attr_f("value_float", 0)}, Shape{}));
  if (c.has_attr("value_int")) return out1(c, const_i64(g, {c.attr_i("value_int", 0)}, Shape{}));
  if (c.has_attr("value_floats")) {
    std::vector<float> f = c.attr_floats("value_floats");
    int64_t n = static_cast<int64_t>(f.size());
    return out1(c, const_f(g, CTN_F32, std::vector<double>(f.begin(), f.end()), Shape::from(1, &n)));
  }
  if (c.has_attr("value_ints")) {
    std::vector<int64_t> v = c.attr_ints("value_ints");
    int64_t n = static_cast<int64_t>(v.size());
    return out1(c, const_i64(g, v, Shape::from(1, &n)));
  }
  c.unsupported("only tensor, float(s) and int(s) constants (not strings or sparse tensors)");
}

void range(NodeCtx &c) {
  const int32_t dt = c.dtype(0);
  auto scalar = [&](size_t i, const char *what) {
    std::vector<double> v = c.reals(i, what);
    if (v.size() != 1) c.invalid("%s must be a scalar (it has %zu elements)", what, v.size());
    return v[0];
  };
  double b = scalar(0, "start"), e = scalar(1, "limit"), d = scalar(2, "delta");
  if (d == 0) c.invalid("delta is 0");
  const double count = std::ceil((e - b) / d);
  if (!std::isfinite(count)) c.invalid("start %g, limit %g and delta %g make no finite range", b, e, d);
  c.limit(std::max(0.0, count), "a range");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(b + static_cast<double>(k) * d);
  if (dtype_is_float(dt)) return out1(c, const_f(c.g, dt, v, Shape::from(1, &n)));
  std::vector<int64_t> iv(v.begin(), v.end());
  out1(c, cast(c.g, const_i64(c.g, iv, Shape::from(1, &n)), dt));
}

void depth_to_space(NodeCtx &c) {
  const Shape s = c.shape(0);
  const int64_t b = c.attr_i("blocksize", 0);
  const bool crd = c.attr_s("mode", "DCR") == "CRD";
  if (s.ndim != 4 || b < 1 || s[1] % (b * b)) c.invalid("needs a 4-d input whose channels divide by blocksize^2");
  const int64_t n = s[0], ch = s[1] / (b * b), h = s[2], w = s[3];
  std::vector<int64_t> six = crd ? std::vector<int64_t>{n, ch, b, b, h, w} : std::vector<int64_t>{n, b, b, ch, h, w};
  std::vector<int32_t> perm = crd ? std::vector<int32_t>{0, 1, 4, 2, 5, 3} : std::vector<int32_t>{0, 3, 4, 1, 5, 2};
  ctn_node y = permute(c.g, reshape(c.g, c.in(0), Shape::from(6, six.data())), perm);
  out1(c, reshape(c.g, y, Shape::from(4, std::vector<int64_t>{n, ch, h * b, w * b}.data())));
}

void space_to_depth(NodeCtx &c) {
  const Shape s = c.shape(0);
  const int64_t b = c.attr_i("blocksize", 0);
  if (s.ndim != 4 || b < 1 || s[2] % b || s[3] % b) c.invalid("needs a 4-d input whose H and W divide by blocksize");
  const int64_t n = s[0], ch = s[1], h = s[2] / b, w = s[3] / b;
  const bool crd = c.attr_s("mode", "DCR") == "CRD";
  ctn_node y = reshape(c.g, c.in(0), Shape::from(6, std::vector<int64_t>{n, ch, h, b, w, b}.data()));
  y = permute(c.g, y, crd ? std::vector<int32_t>{0, 1, 3, 5, 2, 4} : std::vector<int32_t>{0, 3, 5, 1, 2, 4});
  out1(c, reshape(c.g, y, Shape::from(4, std::vector<int64_t>{n, ch * b * b, h, w}.data())));
}

void one_hot_(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  const double depth_f = c.reals(1, "depth").at(0);
  c.limit(depth_f, "a one-hot depth");
  const int64_t depth = static_cast<int64_t>(depth_f);
  const uint32_t nd = s.ndim + 1;
  if (nd > CTN_MAX_DIMS) c.unsupported("a %u-d result", nd);
  const int32_t ax = c.axis(c.attr_i("axis", -1), nd);
  ctn_node idx = cast(g, c.in(0), CTN_F64);
  ctn_node neg = cast(g, g.op2(CTN_OP_LT, idx, g.add_scalar(CTN_F64, 0)), CTN_F64);
  idx = g.op2(CTN_OP_ADD, idx, g.op2(CTN_OP_MUL, neg, g.add_scalar(CTN_F64, static_cast<double>(depth))));
  Shape us;
  us.ndim = nd;
  for (uint32_t k = 0, j = 0; k < nd; ++k) us[k] = static_cast<int32_t>(k) == ax ? 1 : s[j++];
  ctn_node hit = lower::one_hot(g, reshape(g, idx, us), depth, static_cast<uint32_t>(ax));
  ctn_node vals = c.in(2);
  const Shape vs = c.shape(2);
  if (vs.numel() != 2) c.invalid("values must hold two elements");
  ctn_node flat = reshape(g, vals, Shape::from(1, std::vector<int64_t>{2}.data()));
  ctn_node off = reshape(g, slice(g, flat, 0, 0, 1, 1), Shape{}), on = reshape(g, slice(g, flat, 0, 1, 2, 1), Shape{});
  ctn_node in[3] = {hit, on, off};
  out1(c, g.add_op(CTN_OP_WHERE, 3, in, nullptr));
}

void trilu(NodeCtx &c) {
  const Shape s = c.shape(0);
  if (s.ndim < 2) c.invalid("the input must be at least 2-d");
  const bool upper = c.attr_i("upper", 1) != 0;
  const int64_t k = c.has(1) ? c.ints(1, "k").at(0) : 0;
  const int64_t r = s[s.ndim - 2], cols = s[s.ndim - 1];
  Tensor m = Tensor::empty(CTN_BOOL, Shape::from(2, std::vector<int64_t>{r, cols}.data()));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < cols; ++j) m.data()[i * cols + j] = upper ? (j - i >= k) : (j - i <= k);
  ctn_node in[3] = {c.g.add_constant(m), c.in(0), scalar_like(c.g, c.in(0), 0)};
  out1(c, c.g.add_op(CTN_OP_WHERE, 3, in, nullptr));
}

void eye_like(NodeCtx &c) {
  const Shape s = c.shape(0);
  if (s.ndim != 2) c.invalid("the input must be 2-d");
  int32_t dt = c.has_attr("dtype") ? dtype_from_onnx(static_cast<int32_t>(c.attr_i("dtype", 1))) : c.dtype(0);
  if (dt < 0) c.unsupported("dtype %s", data_type_name(static_cast<int32_t>(c.attr_i("dtype", 1))));
  const int64_t k = c.attr_i("k", 0);
  std::vector<double> v(static_cast<size_t>(s.numel()));
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j) v[static_cast<size_t>(i * s[1] + j)] = (j - i == k);
  out1(c, cast(c.g, const_f(c.g, CTN_F64, v, s), dt));
}

// CenterCropPad: each named axis cropped (or zero-padded) to its target size around the centre.
void center_crop_pad(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0);
  std::vector<int64_t> target = c.ints(1, "shape"), axes = c.attr_ints("axes");
  if (axes.empty())
    for (uint32_t k = 0; k < s.ndim; ++k) axes.push_back(k);
  if (axes.size() != target.size()) c.invalid("shape has %zu entries for %zu axes", target.size(), axes.size());
  ctn_node x = c.in(0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int32_t ax = c.axis(axes[i], s.ndim);
    const int64_t have = s[static_cast<uint32_t>(ax)], want = target[i];
    if (want < 0) c.invalid("target size %lld is negative", static_cast<long long>(want));
    if (want < have) x = slice(g, x, ax, (have - want) / 2, (have - want) / 2 + want, 1);
    else if (want > have) x = pad_axis(g, x, ax, (want - have) / 2, want - have - (want - have) / 2, 0, 0.0);
  }
  out1(c, x);
}

// TensorScatter (opset 24, a key/value cache update): along `axis`, batch b's cache position p
// takes update row i = p - write_indices[b] (mod the cache length in circular mode) when
// 0 <= i < the update's length, else keeps the cache. The rows come from one gather of the
// update viewed as [B * S, R] at b * S + i (exact, whatever the values), the choice from a where.
void tensor_scatter(NodeCtx &c) {
  Graph &g = c.g;
  const Shape cs = c.shape(0), us = c.shape(1);
  if (cs.ndim < 2 || us.ndim != cs.ndim) c.invalid("past_cache %s and update %s must have the same rank, at least 2", shape_str(cs).c_str(), shape_str(us).c_str());
  const int32_t ax = c.axis(c.attr_i("axis", -2), cs.ndim);
  if (ax == 0) c.invalid("axis must not be the batch axis");
  const std::string mode = c.attr_s("mode", "linear");
  if (mode != "linear" && mode != "circular") c.invalid("unknown mode '%s'", mode.c_str());
  for (uint32_t k = 0; k < cs.ndim; ++k)
    if (static_cast<int32_t>(k) == ax ? us[k] > cs[k] : us[k] != cs[k])
      c.invalid("update %s does not fit past_cache %s", shape_str(us).c_str(), shape_str(cs).c_str());
  const int64_t B = cs[0], M = cs[static_cast<uint32_t>(ax)], S = us[static_cast<uint32_t>(ax)], R = cs.numel() / (B * M);
  if (R == 0 || S == 0) c.unsupported("empty tensors");
  std::vector<int32_t> perm{0, ax};
  for (uint32_t k = 1; k < cs.ndim; ++k)
    if (static_cast<int32_t>(k) != ax) perm.push_back(static_cast<int32_t>(k));
  const Shape s2 = Shape::from(2, std::vector<int64_t>{B, 1}.data());
  ctn_node w = c.has(2) ? reshape(g, cast(g, c.in(2), CTN_F64), s2) : g.add_scalar(CTN_F64, 0);
  ctn_node i = g.op2(CTN_OP_SUB, ramp(g, M, 2, 1), w);  // [B, M]
  if (mode == "circular") {
    ctn_node m = g.add_scalar(CTN_F64, static_cast<double>(M));
    i = g.op2(CTN_OP_SUB, i, g.op2(CTN_OP_MUL, m, floor(g, g.op2(CTN_OP_DIV, i, m))));
  }
  ctn_node lo = g.add_scalar(CTN_F64, 0), hi = g.add_scalar(CTN_F64, static_cast<double>(S - 1));
  ctn_node ic = g.op2(CTN_OP_MINIMUM, g.op2(CTN_OP_MAXIMUM, i, lo), hi);
  ctn_node valid = g.op2(CTN_OP_EQ, ic, i);
  std::vector<double> boff(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) boff[static_cast<size_t>(b)] = static_cast<double>(b * S);
  ctn_node flat = cast(g, g.op2(CTN_OP_ADD, ic, const_f(g, CTN_F64, boff, s2)), CTN_I64);
  ctn_node table = reshape(g, permute(g, c.in(1), perm), Shape::from(2, std::vector<int64_t>{B * S, R}.data()));
  ctn_node rows = take(g, table, flat, 0);  // [B, M, R]
  const Shape s3 = Shape::from(3, std::vector<int64_t>{B, M, R}.data());
  ctn_node past = reshape(g, permute(g, c.in(0), perm), s3);
  ctn_node in3[3] = {reshape(g, valid, Shape::from(3, std::vector<int64_t>{B, M, 1}.data())), rows, past};
  ctn_node y = g.add_op(CTN_OP_WHERE, 3, in3, nullptr);
  Shape ps;
  for (int32_t p : perm) ps[ps.ndim++] = cs[static_cast<uint32_t>(p)];
  std::vector<int32_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int32_t>(k);
  out1(c, permute(g, reshape(g, y, ps), inv));
}

const OpEntry kTensor[] = {
    {"TensorScatter", tensor_scatter},
    {"Identity", identity},
    {"Reshape", reshape_},
    {"Flatten", flatten},
    {"Transpose", transpose},
    {"Squeeze", squeeze},
    {"Unsqueeze", unsqueeze},
    {"Concat", concat},
    {"Split", split},
    {"Slice", slice_},
    {"Gather", gather},
    {"GatherElements", gather_elements},
    {"ReverseSequence", reverse_sequence},
    {"GatherND", gather_nd},
    {"ScatterElements", scatter_elements},
    {"Scatter", scatter_elements},
    {"ScatterND", scatter_nd},
    {"Expand", expand},
    {"Tile", tile},
    {"Pad", pad},
    {"Shape", shape_},
    {"Size", size_},
    {"ConstantOfShape", constant_of_shape},
    {"Constant", constant},
    {"Range", range},
    {"DepthToSpace", depth_to_space},
    {"SpaceToDepth", space_to_depth},
    {"OneHot", one_hot_},
    {"Trilu", trilu},
    {"EyeLike", eye_like},
    {"CenterCropPad", center_crop_pad},
};

}  // namespace

std::span<const OpEntry> tensor_ops() { return kTensor; }

}  // namespace ctn::onnx
