// Ops whose output shape depends on the input values (since 1.6, OP_DATA_DEPENDENT): nonzero,
// compress, unique, topk, non_max_suppression. Each row's infer gives an upper bound of the
// shape (what a plan's output is created with); its `evaluate` computes the value with the
// actual shape on the host. A plan holding one of them runs in stages, specialising what follows
// the op to the shape it produced (compile/staged.cpp); an eager graph evaluates them at once.
// The indices these ops produce are not differentiable and the values they select are a gather:
// none has a gradient rule (ctn_grad through them fails naming the op).
#include <chutney/ops.h>

#include "graph/graph.h"
#include "tensor/element.h"
#include "tensor/tensor.h"
#include "util/status.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

namespace ctn {

namespace {

const char *N(const OpDef &op) { return op.name.c_str(); }

int64_t norm_axis(const OpDef &op, int64_t axis, uint32_t ndim) {
  const int64_t r = axis < 0 ? axis + ndim : axis;
  if (r < 0 || r >= static_cast<int64_t>(ndim))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: axis %lld is out of range for a %u-d input", N(op), static_cast<long long>(axis), ndim);
  return r;
}

// compress and unique: -1 means the input flattened, so an axis is 0..ndim-1 (no other negative).
int64_t data_axis(const OpDef &op, int64_t axis, uint32_t ndim) {
  if (axis < 0 || axis >= static_cast<int64_t>(ndim))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: axis %lld must be -1 (the input flattened) or 0..%u", N(op), static_cast<long long>(axis), ndim - 1);
  return axis;
}

Shape dims(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d) s.d[s.ndim++] = v;
  return s;
}

// Element k of a contiguous tensor, ordered exactly for every dtype (tensor/element.h).
long double at(const Tensor &t, int64_t k) { return element_value(t, k); }

Tensor i64_tensor(const std::vector<int64_t> &v, const Shape &s) {
  Tensor t = Tensor::empty(CTN_I64, s);
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// The slices `pick` of x along `axis` (x contiguous), in that order: x's shape with that axis
// resized.
Tensor gather_slices(const Tensor &x, uint32_t axis, const std::vector<int64_t> &pick) {
  Shape s = x.shape;
  s.d[axis] = static_cast<int64_t>(pick.size());
  Tensor out = Tensor::empty(x.dtype, s);
  int64_t outer = 1, inner = 1;
  for (uint32_t k = 0; k < axis; ++k) outer *= x.shape[k];
  for (uint32_t k = axis + 1; k < x.shape.ndim; ++k) inner *= x.shape[k];
  const size_t row = static_cast<size_t>(inner) * dtype_size(x.dtype);
  const int64_t n = x.shape[axis];
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < pick.size(); ++j)
      std::memcpy(out.data() + (static_cast<size_t>(o) * pick.size() + j) * row,
                  x.data() + static_cast<size_t>(o * n + pick[j]) * row, row);
  return out;
}

// x contiguous, flattened when the (normalised) axis attribute is -1; *axis: the axis to work on.
Tensor along(const Tensor &in, int64_t axis_attr, uint32_t *axis) {
  Tensor x = in.contiguous();
  *axis = axis_attr < 0 ? 0 : static_cast<uint32_t>(axis_attr);
  if (axis_attr >= 0) return x;
  bool copied = false;
  return x.reshape(dims({x.numel()}), &copied);
}

// ---- nonzero: (x) -> i64 [rank, count] -------------------------------------------------------

ValueInfo infer_nonzero(const OpDef &, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  a.ni = 0;
  return ValueInfo{CTN_I64, dims({std::max<int64_t>(1, in[0].shape.ndim), in[0].shape.numel()})};
}

Tensor eval_nonzero(const OpDef &, const Tensor *const *in, uint32_t, const ctn_attrs &) {
  const Tensor x = in[0]->contiguous();
  const uint32_t r = std::max<uint32_t>(1, x.shape.ndim);
  std::vector<int64_t> hits;
  for (int64_t k = 0; k < x.numel(); ++k)
    if (at(x, k) != 0) hits.push_back(k);
  const int64_t cnt = static_cast<int64_t>(hits.size());
  std::vector<int64_t> v(static_cast<size_t>(r * cnt));
  for (int64_t j = 0; j < cnt; ++j) {
    int64_t rest = hits[static_cast<size_t>(j)];
    for (uint32_t d = r; d-- > 0;) {
      const int64_t n = x.shape.ndim ? x.shape[d] : 1;
      v[static_cast<size_t>(d * cnt + j)] = rest % n;
      rest /= n;
    }
  }
  return i64_tensor(v, dims({r, cnt}));
}

// ---- compress: (x, cond [m]); i[0] axis, -1 (or none): x flattened -----------------------------

ValueInfo infer_compress(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  if (in[1].shape.ndim != 1) fail(CTN_ERR_SHAPE, "%s: the condition must be 1-d, got %s", N(op), shape_str(in[1].shape).c_str());
  const bool flat = a.ni == 0 || a.i[0] == -1 || in[0].shape.ndim == 0;
  if (flat) {
    a.i[0] = -1;
    a.ni = 1;
    return ValueInfo{in[0].dtype, dims({in[0].shape.numel()})};
  }
  a.i[0] = data_axis(op, a.i[0], in[0].shape.ndim);
  a.ni = 1;
  return in[0];
}

Tensor eval_compress(const OpDef &op, const Tensor *const *in, uint32_t, const ctn_attrs &a) {
  uint32_t axis = 0;
  const Tensor x = along(*in[0], a.i[0], &axis);
  const Tensor c = in[1]->contiguous();
  if (c.numel() > x.shape[axis])
    fail(CTN_ERR_SHAPE, "%s: the condition has %lld elements, the axis only %lld", N(op),
         static_cast<long long>(c.numel()), static_cast<long long>(x.shape[axis]));
  std::vector<int64_t> pick;
  for (int64_t k = 0; k < c.numel(); ++k)
    if (at(c, k) != 0) pick.push_back(k);
  return gather_slices(x, axis, pick);
}

// ---- unique: (x); i[0] axis (-1: flattened), i[1] sorted, i[2] output ------------------------
// Outputs: 0 the unique values (slices), 1 the index of each one's first occurrence, 2 for every
// input element (slice) the index of its value in output 0, 3 how often each occurs.

ValueInfo infer_unique(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  if (a.ni < 3) fail(CTN_ERR_INVALID_ARGUMENT, "%s: needs i[0] axis, i[1] sorted, i[2] output (0..3), got %u ints", N(op), a.ni);
  if (a.i[2] < 0 || a.i[2] > 3) fail(CTN_ERR_INVALID_ARGUMENT, "%s: output i[2] must be 0..3, got %lld", N(op), static_cast<long long>(a.i[2]));
  a.ni = 3;
  a.i[1] = a.i[1] != 0;
  Shape values;
  int64_t n;
  if (a.i[0] == -1 || in[0].shape.ndim == 0) {
    a.i[0] = -1;
    n = in[0].shape.numel();
    values = dims({n});
  } else {
    a.i[0] = data_axis(op, a.i[0], in[0].shape.ndim);
    n = in[0].shape[static_cast<uint32_t>(a.i[0])];
    values = in[0].shape;
  }
  if (a.i[2] == 0) return ValueInfo{in[0].dtype, values};
  return ValueInfo{CTN_I64, dims({n})};
}

// Compares slices i and j of x (viewed as [outer, n, inner]) lexicographically.
struct SliceOrder {
  const Tensor &x;
  int64_t outer, n, inner;
  int cmp(int64_t i, int64_t j) const {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < inner; ++k) {
        const long double a = at(x, (o * n + i) * inner + k), b = at(x, (o * n + j) * inner + k);
        if (a < b) return -1;
        if (b < a) return 1;
      }
    return 0;
  }
};

Tensor eval_unique(const OpDef &, const Tensor *const *in, uint32_t, const ctn_attrs &a) {
  uint32_t axis = 0;
  const Tensor x = along(*in[0], a.i[0], &axis);
  SliceOrder ord{x, 1, x.shape[axis], 1};
  for (uint32_t k = 0; k < axis; ++k) ord.outer *= x.shape[k];
  for (uint32_t k = axis + 1; k < x.shape.ndim; ++k) ord.inner *= x.shape[k];
  // Slices in sorted order (ties by position), then grouped into runs of equal slices.
  std::vector<int64_t> by(static_cast<size_t>(ord.n));
  std::iota(by.begin(), by.end(), 0);
  std::stable_sort(by.begin(), by.end(), [&](int64_t i, int64_t j) { return ord.cmp(i, j) < 0; });
  std::vector<int64_t> first, counts, group(by.size());
  for (size_t k = 0; k < by.size(); ++k) {
    if (k == 0 || ord.cmp(by[k - 1], by[k]) != 0) {
      first.push_back(by[k]);
      counts.push_back(0);
    }
    group[static_cast<size_t>(by[k])] = static_cast<int64_t>(first.size() - 1);
    ++counts.back();
  }
  // Unsorted: the groups in the order of their first occurrence.
  std::vector<int64_t> rank(first.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (!a.i[1]) std::stable_sort(rank.begin(), rank.end(), [&](int64_t i, int64_t j) { return first[static_cast<size_t>(i)] < first[static_cast<size_t>(j)]; });
  std::vector<int64_t> pos(rank.size()), out_first, out_counts;
  for (size_t k = 0; k < rank.size(); ++k) {
    pos[static_cast<size_t>(rank[k])] = static_cast<int64_t>(k);
    out_first.push_back(first[static_cast<size_t>(rank[k])]);
    out_counts.push_back(counts[static_cast<size_t>(rank[k])]);
  }
  const Shape u = dims({static_cast<int64_t>(rank.size())});
  switch (a.i[2]) {
    case 0: return gather_slices(x, axis, out_first);
    case 1: return i64_tensor(out_first, u);
    case 3: return i64_tensor(out_counts, u);
    default: {
      std::vector<int64_t> inverse(group.size());
      for (size_t k = 0; k < group.size(); ++k) inverse[k] = pos[static_cast<size_t>(group[k])];
      return i64_tensor(inverse, dims({static_cast<int64_t>(inverse.size())}));
    }
  }
}

// ---- topk: (x, k); i[0] axis, i[1] largest, i[2] sorted, i[3] output (0 values, 1 indices) ----

ValueInfo infer_topk(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  if (a.ni < 4) fail(CTN_ERR_INVALID_ARGUMENT, "%s: needs i[0] axis, i[1] largest, i[2] sorted, i[3] output, got %u ints", N(op), a.ni);
  if (in[0].shape.ndim == 0) fail(CTN_ERR_SHAPE, "%s: the input must be at least 1-d", N(op));
  if ((in[1].dtype != CTN_I64 && in[1].dtype != CTN_I32) || in[1].shape.numel() != 1)
    fail(CTN_ERR_SHAPE, "%s: k must be one i64 or i32 element, got %s", N(op), values_str(in + 1, 1).c_str());
  if (a.i[3] != 0 && a.i[3] != 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: output i[3] must be 0 or 1, got %lld", N(op), static_cast<long long>(a.i[3]));
  a.ni = 4;
  a.i[0] = norm_axis(op, a.i[0], in[0].shape.ndim);
  a.i[1] = a.i[1] != 0;
  a.i[2] = a.i[2] != 0;
  return ValueInfo{a.i[3] ? CTN_I64 : in[0].dtype, in[0].shape};
}

Tensor eval_topk(const OpDef &op, const Tensor *const *in, uint32_t, const ctn_attrs &a) {
  const Tensor x = in[0]->contiguous();
  const auto axis = static_cast<uint32_t>(a.i[0]);
  const int64_t n = x.shape[axis];
  const long double kv = at(in[1]->contiguous(), 0);
  if (kv < 0 || kv > n)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: k is %lld, the axis has %lld elements", N(op), static_cast<long long>(kv), static_cast<long long>(n));
  const auto k = static_cast<int64_t>(kv);
  int64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (uint32_t d = axis + 1; d < x.shape.ndim; ++d) inner *= x.shape[d];
  Shape s = x.shape;
  s.d[axis] = k;
  std::vector<int64_t> idx(static_cast<size_t>(outer * k * inner));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto v = [&](int64_t j) { return at(x, (o * n + j) * inner + i); };
      std::iota(order.begin(), order.end(), 0);
      // Equal values: the lower index first (ONNX TopK), for either direction.
      std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return a.i[1] ? v(q) < v(p) : v(p) < v(q); });
      for (int64_t j = 0; j < k; ++j) idx[static_cast<size_t>((o * k + j) * inner + i)] = order[static_cast<size_t>(j)];
    }
  if (a.i[3]) return i64_tensor(idx, s);
  Tensor out = Tensor::empty(x.dtype, s);
  const size_t es = dtype_size(x.dtype);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t src = (o * n + idx[static_cast<size_t>((o * k + j) * inner + i)]) * inner + i;
        std::memcpy(out.data() + static_cast<size_t>((o * k + j) * inner + i) * es, x.data() + static_cast<size_t>(src) * es, es);
      }
  return out;
}

// ---- non_max_suppression: (boxes [B,N,4], scores [B,C,N], max [1], iou [1], score [1]) -------

ValueInfo infer_nms(const OpDef &op, const ValueInfo *in, uint32_t, ctn_attrs &a) {
  const Shape &b = in[0].shape, &s = in[1].shape;
  if (b.ndim != 3 || b[2] != 4 || s.ndim != 3 || s[0] != b[0] || s[2] != b[1])
    fail(CTN_ERR_SHAPE, "%s: boxes must be [B, N, 4] and scores [B, C, N], got %s", N(op), values_str(in, 2).c_str());
  for (uint32_t k = 2; k < 5; ++k)
    if (in[k].shape.numel() != 1) fail(CTN_ERR_SHAPE, "%s: input %u must hold one element, got %s", N(op), k, values_str(in + k, 1).c_str());
  a.i[0] = a.ni ? a.i[0] != 0 : 0;
  a.ni = 1;
  return ValueInfo{CTN_I64, dims({b[0] * s[1] * b[1], 3})};
}

struct Box {
  long double y0, x0, y1, x1;
};

Box corners(const Tensor &boxes, int64_t i, bool center) {
  long double v[4];
  for (int k = 0; k < 4; ++k) v[k] = at(boxes, i * 4 + k);
  if (center) return {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
  return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
}

bool overlaps(const Box &p, const Box &q, long double iou) {
  const long double ap = (p.y1 - p.y0) * (p.x1 - p.x0), aq = (q.y1 - q.y0) * (q.x1 - q.x0);
  if (ap <= 0 || aq <= 0) return false;
  const long double h = std::min(p.y1, q.y1) - std::max(p.y0, q.y0), w = std::min(p.x1, q.x1) - std::max(p.x0, q.x0);
  if (h <= 0 || w <= 0) return false;
  const long double inter = h * w;
  return inter / (ap + aq - inter) > iou;
}

Tensor eval_nms(const OpDef &, const Tensor *const *in, uint32_t, const ctn_attrs &a) {
  const Tensor boxes = in[0]->contiguous(), scores = in[1]->contiguous();
  const auto max_out = static_cast<int64_t>(at(in[2]->contiguous(), 0));
  const long double iou = at(in[3]->contiguous(), 0), thr = at(in[4]->contiguous(), 0);
  const int64_t B = boxes.shape[0], N = boxes.shape[1], C = scores.shape[1];
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      auto score = [&](int64_t i) { return at(scores, (b * C + c) * N + i); };
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < N; ++i)
        if (score(i) > thr) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) { return score(q) < score(p); });
      std::vector<Box> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box bx = corners(boxes, b * N + i, a.i[0] != 0);
        if (std::any_of(kept.begin(), kept.end(), [&](const Box &k) { return overlaps(k, bx, iou); })) continue;
        kept.push_back(bx);
        rows.insert(rows.end(), {b, c, i});
      }
    }
  return i64_tensor(rows, dims({static_cast<int64_t>(rows.size() / 3), 3}));
}

constexpr uint32_t kDyn = OP_DATA_DEPENDENT | OP_NO_FOLD;

const OpDef kDynamicOps[] = {
    OpDef{.name = CTN_OP_NONZERO, .n_inputs = 1, .infer = infer_nonzero, .flags = kDyn, .evaluate = eval_nonzero},
    OpDef{.name = CTN_OP_COMPRESS, .n_inputs = 2, .infer = infer_compress, .flags = kDyn, .attributes = "i[0] axis (-1: flattened)", .probe = {.inputs = "D[2,3] bool[2]", .ints = {0}, .ni = 1}, .evaluate = eval_compress},
    OpDef{.name = CTN_OP_UNIQUE, .n_inputs = 1, .infer = infer_unique, .flags = kDyn, .attributes = "i[0] axis (-1: flattened), i[1] sorted, i[2] output (0 values, 1 first indices, 2 inverse, 3 counts)", .probe = {.ints = {-1, 1, 0}, .ni = 3}, .evaluate = eval_unique},
    OpDef{.name = CTN_OP_TOPK, .n_inputs = 2, .infer = infer_topk, .flags = kDyn, .attributes = "i[0] axis, i[1] largest, i[2] sorted, i[3] output (0 values, 1 indices)", .probe = {.inputs = "D[2,3] i64[1]", .ints = {1, 1, 1, 0}, .ni = 4}, .evaluate = eval_topk},
    OpDef{.name = CTN_OP_NON_MAX_SUPPRESSION, .n_inputs = 5, .infer = infer_nms, .flags = kDyn, .attributes = "i[0] center_point_box", .probe = {.inputs = "D[1,2,4] D[1,1,2] i64[1] D[1] D[1]", .ints = {0}, .ni = 1}, .evaluate = eval_nms},
};

}  // namespace

OpTable dynamic_op_table() { return {kDynamicOps, sizeof kDynamicOps / sizeof kDynamicOps[0]}; }

}  // namespace ctn
