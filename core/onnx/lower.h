// Compositions of chutney graph ops that ONNX ops lower to: the one place where an ONNX op with
// no chutney op of its own is spelled out in existing ops (no backend kernel is added for it).
// Integer arithmetic, which chutney's float-only elementwise ops lack, goes through f64 and back
// (exact up to 2^53; ONNX's integer models stay far below that).
#pragma once

#include "graph/graph.h"

#include <functional>
#include <vector>

namespace ctn::onnx::lower {

ctn_node cast(Graph &g, ctn_node x, int32_t dtype);  // no node when the dtype already matches
ctn_node scalar_like(Graph &g, ctn_node ref, double v);  // a 0-d constant of ref's dtype
ctn_node const_i64(Graph &g, const std::vector<int64_t> &v, const Shape &s);
ctn_node const_f(Graph &g, int32_t dtype, const std::vector<double> &v, const Shape &s);

// Elementwise ops for any chutney dtype: floating inputs go straight to the op, integer ones
// through f64 (the result is cast back to the input dtype).
ctn_node unary(Graph &g, const char *op, ctn_node x);
ctn_node binary(Graph &g, const char *op, ctn_node a, ctn_node b);
ctn_node reduce(Graph &g, const char *op, ctn_node x, uint64_t mask, bool keep);  // sum mean max
ctn_node reduce_min(Graph &g, ctn_node x, uint64_t mask, bool keep);

// Shape helpers.
ctn_node reshape(Graph &g, ctn_node x, const Shape &s);
ctn_node permute(Graph &g, ctn_node x, const std::vector<int32_t> &perm);
ctn_node slice(Graph &g, ctn_node x, int32_t axis, int64_t start, int64_t stop, int64_t step);
// Elements of x at `idx` (an integer node, already in [0, n)) along `axis`, numpy.take-style:
// out.shape = x.shape[:axis] + idx.shape + x.shape[axis+1:]. Lowered to embedding.
ctn_node take(Graph &g, ctn_node x, ctn_node idx, int32_t axis);
// x[::-1] along axis (any step < 0 slice becomes a forward slice of this).
ctn_node reverse(Graph &g, ctn_node x, int32_t axis);
// Pads `axis` with `before` / `after` elements: mode 0 constant `value`, 1 edge, 2 reflect,
// 3 wrap. Negative counts crop.
ctn_node pad_axis(Graph &g, ctn_node x, int32_t axis, int64_t before, int64_t after, int mode, double value);

// Activations without a chutney op of their own.
ctn_node softplus(Graph &g, ctn_node x);
ctn_node elu(Graph &g, ctn_node x, double alpha);
ctn_node hardsigmoid(Graph &g, ctn_node x, double alpha, double beta);
ctn_node floor(Graph &g, ctn_node x);  // through an integer cast: |x| < 2^63
ctn_node logical_not(Graph &g, ctn_node b);

// [0, 1, ..., n-1] (f64) along `axis` of an `ndim`-d constant whose other dims are 1.
ctn_node ramp(Graph &g, int64_t n, uint32_t ndim, uint32_t axis);
// idx == k for k in [0, n) along `axis` (idx has size 1 there): a bool one-hot mask.
ctn_node one_hot(Graph &g, ctn_node idx, int64_t n, uint32_t axis);
// The index (f64, axis kept) of the first maximum of x along axis, or the last, or of the minimum.
ctn_node extreme_index(Graph &g, ctn_node x, uint32_t axis, bool is_max, bool last);

// A product as exp(sum log|x|) with the sign from the parity of the negatives and 0 where a zero
// was among the factors; `sum` maps an f64 tensor to its sums (a reduction, a cumulative sum...).
// x any dtype; the result is f64, rounded to integers when x is not floating.
ctn_node product(Graph &g, ctn_node x, const std::function<ctn_node(ctn_node)> &sum);

// Mean and (biased) variance over the axes of `mask`, kept as size-1 dims.
void moments(Graph &g, ctn_node x, uint64_t mask, ctn_node *mean, ctn_node *var);

}  // namespace ctn::onnx::lower
