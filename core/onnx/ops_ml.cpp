// ONNX ai.onnx.ml ops (scikit-learn exports through skl2onnx) lowered to chutney ops: Binarizer,
// ArrayFeatureExtractor, Scaler, Normalizer, LinearRegressor, LinearClassifier (integer labels).
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <string>

namespace ctn::onnx {
namespace {

using namespace lower;

void out1(NodeCtx &c, ctn_node y) { c.outs = {y}; }

ctn_node floating(NodeCtx &c, size_t i) {  // integer features are computed in f32, as the reference
  return dtype_is_float(c.dtype(i)) ? c.in(i) : cast(c.g, c.in(i), CTN_F32);
}

// A float-list attribute as a constant of `dt` and shape `s` (its size must match).
ctn_node attr_const(NodeCtx &c, const char *name, int32_t dt, const Shape &s) {
  std::vector<float> v = c.attr_floats(name);
  if (static_cast<int64_t>(v.size()) != s.numel())
    c.invalid("%s has %zu values, %lld expected", name, v.size(), static_cast<long long>(s.numel()));
  return const_f(c.g, dt, std::vector<double>(v.begin(), v.end()), s);
}

// [N, F] input (a 1-d input is one row), or fail.
ctn_node rows(NodeCtx &c, ctn_node x) {
  const Shape s = c.g.info(x).shape;
  if (s.ndim == 1) return reshape(c.g, x, Shape::from(2, std::vector<int64_t>{1, s[0]}.data()));
  if (s.ndim != 2) c.invalid("the input must be [N, F] (or [F]), not %s", shape_str(s).c_str());
  return x;
}

void binarizer(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = c.in(0);
  const int32_t dt = c.dtype(0);
  ctn_node y = g.op2(CTN_OP_GT, cast(g, x, CTN_F64), g.add_scalar(CTN_F64, c.attr_f("threshold", 0.0)));
  out1(c, cast(g, y, dt));
}

void array_feature_extractor(NodeCtx &c) {
  Graph &g = c.g;
  const Shape s = c.shape(0), is = c.shape(1);
  if (c.dtype(1) != CTN_I64 && c.dtype(1) != CTN_I32) c.invalid("indices must be int64");
  const int64_t n = is.numel();
  ctn_node idx = reshape(g, c.in(1), Shape::from(1, &n));
  ctn_node x = s.ndim == 1 ? reshape(g, c.in(0), Shape::from(2, std::vector<int64_t>{1, s[0]}.data())) : c.in(0);
  const uint32_t last = g.info(x).shape.ndim - 1;
  ctn_node neg = cast(g, g.op2(CTN_OP_LT, cast(g, idx, CTN_F64), g.add_scalar(CTN_F64, 0)), CTN_F64);
  idx = cast(g, g.op2(CTN_OP_ADD, cast(g, idx, CTN_F64),
                      g.op2(CTN_OP_MUL, neg, g.add_scalar(CTN_F64, static_cast<double>(g.info(x).shape[last])))), CTN_I64);
  out1(c, take(g, x, idx, static_cast<int32_t>(last)));
}

void scaler(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = floating(c, 0);
  const int32_t dt = g.info(x).dtype;
  const Shape s = g.info(x).shape;
  auto per_feature = [&](const char *name, double def) {
    std::vector<float> v = c.attr_floats(name);
    if (v.empty()) return g.add_scalar(dt, def);
    Shape fs;
    fs.ndim = 1;
    fs[0] = static_cast<int64_t>(v.size());
    if (v.size() != 1 && (s.ndim == 0 || fs[0] != s[s.ndim - 1]))
      c.invalid("%s has %zu values for %lld features", name, v.size(), static_cast<long long>(s.ndim ? s[s.ndim - 1] : 0));
    return attr_const(c, name, dt, fs);
  };
  ctn_node off = per_feature("offset", 0.0), scale = per_feature("scale", 1.0);
  out1(c, g.op2(CTN_OP_MUL, g.op2(CTN_OP_SUB, x, off), scale));
}

void normalizer(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = rows(c, floating(c, 0));
  const int32_t dt = g.info(x).dtype;
  const std::string norm = c.attr_s("norm", "MAX");
  ctn_node a = g.op1(CTN_OP_ABS, x), div;
  if (norm == "MAX") div = reduce(g, CTN_OP_MAX, a, 2, true);
  else if (norm == "L1") div = reduce(g, CTN_OP_SUM, a, 2, true);
  else if (norm == "L2") div = g.op1(CTN_OP_SQRT, reduce(g, CTN_OP_SUM, g.op2(CTN_OP_MUL, x, x), 2, true));
  else c.invalid("norm must be MAX, L1 or L2, not '%s'", norm.c_str());
  out1(c, g.op2(CTN_OP_DIV, x, g.op2(CTN_OP_MAXIMUM, div, g.add_scalar(dt, 1e-30))));
}

// scores = x @ coefficients^T + intercepts, coefficients [targets, F] row-major.
ctn_node linear_scores(NodeCtx &c, ctn_node x, int64_t targets) {
  Graph &g = c.g;
  const int32_t dt = g.info(x).dtype;
  const int64_t f = g.info(x).shape[1];
  ctn_node w = attr_const(c, "coefficients", dt, Shape::from(2, std::vector<int64_t>{targets, f}.data()));
  ctn_node y = g.op2(CTN_OP_MATMUL, x, permute(g, w, {1, 0}));
  if (c.has_attr("intercepts")) {
    Shape bs;
    bs.ndim = 1;
    bs[0] = targets;
    y = g.op2(CTN_OP_ADD, y, attr_const(c, "intercepts", dt, bs));
  }
  return y;
}

void linear_regressor(NodeCtx &c) {
  const std::string pt = c.attr_s("post_transform", "NONE");
  if (pt != "NONE") c.unsupported("post_transform '%s' (NONE only, as the reference)", pt.c_str());
  out1(c, linear_scores(c, rows(c, floating(c, 0)), c.attr_i("targets", 1)));
}

void linear_classifier(NodeCtx &c) {
  Graph &g = c.g;
  if (c.has_attr("classlabels_strings")) c.unsupported("string class labels (the label output would be a string tensor)");
  std::vector<int64_t> labels = c.attr_ints("classlabels_ints");
  c.ignore("multi_class");
  ctn_node x = rows(c, floating(c, 0));
  const int64_t f = g.info(x).shape[1], nw = static_cast<int64_t>(c.attr_floats("coefficients").size());
  if (f == 0 || nw % f != 0) c.invalid("coefficients (%lld values) do not fit %lld features", static_cast<long long>(nw),
                                       static_cast<long long>(f));
  const int64_t sets = nw / f;
  ctn_node s = linear_scores(c, x, sets);
  if (sets == 1 && labels.size() == 2) {  // binary: scores [-s, s]
    ctn_node both[2] = {g.op1(CTN_OP_NEG, s), s};
    ctn_attrs a = attrs_i({1});
    s = g.add_op(CTN_OP_CONCAT, 2, both, &a);
  }
  const std::string pt = c.attr_s("post_transform", "NONE");
  if (pt == "LOGISTIC") s = g.op1(CTN_OP_SIGMOID, s);
  else if (pt == "SOFTMAX") {
    ctn_attrs a = attrs_i({1});
    s = g.op1(CTN_OP_SOFTMAX, s, &a);
  } else if (pt != "NONE") c.unsupported("post_transform '%s' (NONE, LOGISTIC and SOFTMAX)", pt.c_str());
  const int64_t n_cls = g.info(s).shape[1];
  if (n_cls < 2) c.unsupported("a single score column (the label would be a threshold on it)");
  if (!labels.empty() && static_cast<int64_t>(labels.size()) != n_cls)
    c.invalid("%zu class labels for %lld score columns", labels.size(), static_cast<long long>(n_cls));
  if (labels.empty())
    for (int64_t k = 0; k < n_cls; ++k) labels.push_back(k);
  ctn_node best = extreme_index(g, s, 1, true, false);  // [N, 1] f64
  const int64_t n = g.info(s).shape[0];
  ctn_node lab = take(g, const_i64(g, labels, Shape::from(1, &n_cls)), cast(g, reshape(g, best, Shape::from(1, &n)), CTN_I64), 0);
  c.outs = {lab, s};
}

const OpEntry kMl[] = {
    {"Binarizer", binarizer},
    {"ArrayFeatureExtractor", array_feature_extractor},
    {"Scaler", scaler},
    {"Normalizer", normalizer},
    {"LinearRegressor", linear_regressor},
    {"LinearClassifier", linear_classifier},
};

}  // namespace

std::span<const OpEntry> ml_ops() { return kMl; }

}  // namespace ctn::onnx
