// ONNX ai.onnx.ml ops (scikit-learn exports through skl2onnx) lowered to chutney ops: Binarizer,
// ArrayFeatureExtractor, Scaler, Normalizer, LinearRegressor, LinearClassifier (integer labels).
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

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

ctn_node post_transform(NodeCtx &c, ctn_node s, const std::string &pt) {
  Graph &g = c.g;
  if (pt == "LOGISTIC") return g.op1(CTN_OP_SIGMOID, s);
  if (pt == "SOFTMAX") {
    ctn_attrs a = attrs_i({1});
    return g.op1(CTN_OP_SOFTMAX, s, &a);
  }
  if (pt != "NONE") c.unsupported("post_transform '%s' (NONE, LOGISTIC and SOFTMAX)", pt.c_str());
  return s;
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
  s = post_transform(c, s, c.attr_s("post_transform", "NONE"));
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

// ---- tree ensembles ------------------------------------------------------------------------------
// Each tree's nodes are walked from its root once, at import, into leaves with the path that
// reaches them: (internal node, branch) pairs. In the graph, every internal node's test is one
// column of D [B, I+1] (1 for the true branch; a last column of ones pads short paths); a leaf
// is active where all of its path's columns, gathered into [B, leaves, depth], equal the branch
// it needs; the outputs are active [B, leaves] @ weights [leaves, targets].
struct Forest {
  std::vector<int64_t> feature;    // per internal node
  std::vector<double> threshold;   // per internal node
  std::vector<std::string> mode;   // per internal node: BRANCH_LEQ, _LT, _GTE, _GT, _EQ, _NEQ
  std::vector<double> nan_true;    // per internal node: a NaN feature takes the true branch
  std::vector<std::vector<double>> member;  // per internal node: BRANCH_MEMBER's set (ml opset 5)
  std::vector<int64_t> leaf_src;   // per leaf: its index in leaf_weights (ml opset 5's TreeEnsemble)
  std::vector<std::vector<std::pair<int64_t, double>>> paths;  // per leaf
  std::map<std::pair<int64_t, int64_t>, int64_t> leaf_of;      // (tree, node) -> leaf
  int64_t trees = 0;
};

Forest read_forest(NodeCtx &c) {
  const std::vector<int64_t> tid = c.attr_ints("nodes_treeids"), nid = c.attr_ints("nodes_nodeids"),
                             feat = c.attr_ints("nodes_featureids"), tn = c.attr_ints("nodes_truenodeids"),
                             fn = c.attr_ints("nodes_falsenodeids"), miss = c.attr_ints("nodes_missing_value_tracks_true");
  const std::vector<float> val = c.attr_floats("nodes_values");
  const AttributeP *ma = c.attr("nodes_modes");
  c.ignore("nodes_hitrates");
  const size_t n = tid.size();
  if (!ma || ma->strings.size() != n || nid.size() != n || feat.size() != n || tn.size() != n || fn.size() != n ||
      val.size() != n || (!miss.empty() && miss.size() != n))
    c.invalid("the nodes_* attributes must all have one entry per node (%zu)", n);
  std::map<std::pair<int64_t, int64_t>, size_t> at;
  std::set<std::pair<int64_t, int64_t>> children;
  for (size_t k = 0; k < n; ++k) {
    if (!at.emplace(std::make_pair(tid[k], nid[k]), k).second) c.invalid("node %lld of tree %lld is listed twice",
                                                                          static_cast<long long>(nid[k]), static_cast<long long>(tid[k]));
    if (ma->strings[k] != "LEAF") children.insert({tid[k], tn[k]}), children.insert({tid[k], fn[k]});
  }
  Forest f;
  std::map<size_t, int64_t> internal;  // node -> column
  std::function<void(size_t, std::vector<std::pair<int64_t, double>> &, size_t)> walk =
      [&](size_t k, std::vector<std::pair<int64_t, double>> &path, size_t depth) {
        if (depth > 256) c.invalid("tree %lld is deeper than 256 (or has a cycle)", static_cast<long long>(tid[k]));
        const std::string mode(ma->strings[k]);
        if (mode == "LEAF") {
          f.leaf_of[{tid[k], nid[k]}] = static_cast<int64_t>(f.paths.size());
          f.paths.push_back(path);
          return;
        }
        if (mode != "BRANCH_LEQ" && mode != "BRANCH_LT" && mode != "BRANCH_GTE" && mode != "BRANCH_GT" &&
            mode != "BRANCH_EQ" && mode != "BRANCH_NEQ")
          c.unsupported("node mode '%s'", mode.c_str());
        auto [it, fresh] = internal.emplace(k, static_cast<int64_t>(f.feature.size()));
        if (fresh) {
          f.feature.push_back(feat[k]);
          f.threshold.push_back(val[k]);
          f.mode.push_back(mode);
          f.nan_true.push_back(miss.empty() ? 0.0 : static_cast<double>(miss[k] != 0));
          f.member.emplace_back();
        }
        for (int branch = 1; branch >= 0; --branch) {
          auto child = at.find({tid[k], branch ? tn[k] : fn[k]});
          if (child == at.end()) c.invalid("node %lld of tree %lld points to a missing node", static_cast<long long>(nid[k]),
                                           static_cast<long long>(tid[k]));
          path.push_back({it->second, branch});
          walk(child->second, path, depth + 1);
          path.pop_back();
        }
      };
  for (size_t k = 0; k < n; ++k) {
    if (children.count({tid[k], nid[k]})) continue;  // a root: no parent in its tree
    ++f.trees;
    std::vector<std::pair<int64_t, double>> path;
    walk(k, path, 0);
  }
  return f;
}

// BRANCH_MEMBER's tests as [B, I] (1 where x's feature is in the node's set, 0 elsewhere and in
// the other nodes' columns), or none: the sets padded with NaN (equal to nothing) into [I, V], one
// comparison [B, I, V] and a max over V.
ctn_node member_tests(NodeCtx &c, const Forest &f, ctn_node xf) {
  Graph &g = c.g;
  const int32_t dt = g.info(xf).dtype;
  const int64_t ni = static_cast<int64_t>(f.feature.size()), b = g.info(xf).shape[0];
  size_t v = 0;
  for (const auto &m : f.member) v = std::max(v, m.size());
  if (v == 0) return CTN_NODE_NONE;
  c.limit(static_cast<double>(ni) * static_cast<double>(v), "the membership sets");
  std::vector<double> sets(static_cast<size_t>(ni) * v, std::nan(""));
  for (size_t k = 0; k < f.member.size(); ++k) std::copy(f.member[k].begin(), f.member[k].end(), sets.begin() + static_cast<std::ptrdiff_t>(k * v));
  const int64_t nv = static_cast<int64_t>(v);
  ctn_node x3 = reshape(g, xf, Shape::from(3, std::vector<int64_t>{b, ni, 1}.data()));
  ctn_node hit = cast(g, g.op2(CTN_OP_EQ, x3, const_f(g, dt, sets, Shape::from(3, std::vector<int64_t>{1, ni, nv}.data()))), dt);
  return reduce(g, CTN_OP_MAX, hit, 4, false);  // [B, I]
}

// active [B, leaves] (x's dtype, 0/1) for x [B, F].
ctn_node active_leaves(NodeCtx &c, const Forest &f, ctn_node x) {
  Graph &g = c.g;
  const int32_t dt = g.info(x).dtype;
  const int64_t ni = static_cast<int64_t>(f.feature.size()), nl = static_cast<int64_t>(f.paths.size()), b = g.info(x).shape[0];
  const int64_t nf = g.info(x).shape[1];
  for (int64_t v : f.feature)
    if (v < 0 || v >= nf) c.invalid("feature id %lld is out of range for %lld features", static_cast<long long>(v), static_cast<long long>(nf));
  size_t depth = 1;
  for (const auto &p : f.paths) depth = std::max(depth, p.size());
  c.limit(static_cast<double>(nl) * static_cast<double>(depth), "the tree paths' index");
  ctn_node d = const_f(g, dt, std::vector<double>(static_cast<size_t>(b), 1.0), Shape::from(2, std::vector<int64_t>{b, 1}.data()));
  if (ni > 0) {
    Shape is;
    is.ndim = 2, is[0] = 1, is[1] = ni;
    ctn_node xf = take(g, x, const_i64(g, f.feature, Shape::from(1, &ni)), 1);  // [B, I]
    ctn_node thr = const_f(g, dt, f.threshold, is);
    std::vector<std::pair<const char *, const char *>> ops = {{"BRANCH_LEQ", CTN_OP_LE}, {"BRANCH_LT", CTN_OP_LT},
        {"BRANCH_GTE", CTN_OP_GE}, {"BRANCH_GT", CTN_OP_GT}, {"BRANCH_EQ", CTN_OP_EQ}, {"BRANCH_NEQ", CTN_OP_NE}};
    ctn_node acc = CTN_NODE_NONE;
    for (auto [mode, op] : ops) {
      std::vector<double> sel(static_cast<size_t>(ni));
      bool any = false;
      for (int64_t k = 0; k < ni; ++k) any |= (sel[static_cast<size_t>(k)] = f.mode[static_cast<size_t>(k)] == mode) != 0;
      if (!any) continue;
      ctn_node t = g.op2(CTN_OP_MUL, cast(g, g.op2(op, xf, thr), dt), const_f(g, dt, sel, is));
      acc = acc == CTN_NODE_NONE ? t : g.op2(CTN_OP_ADD, acc, t);
    }
    if (ctn_node m = member_tests(c, f, xf); m != CTN_NODE_NONE) acc = acc == CTN_NODE_NONE ? m : g.op2(CTN_OP_ADD, acc, m);
    ctn_node in[3] = {g.op2(CTN_OP_NE, xf, xf), const_f(g, dt, f.nan_true, is), acc};
    ctn_node parts[2] = {g.add_op(CTN_OP_WHERE, 3, in, nullptr), d};
    ctn_attrs a1 = attrs_i({1});
    d = g.add_op(CTN_OP_CONCAT, 2, parts, &a1);  // [B, I+1]
  }
  std::vector<int64_t> idx(static_cast<size_t>(nl) * depth, ni);
  std::vector<double> dir(static_cast<size_t>(nl) * depth, 1.0);
  for (size_t l = 0; l < f.paths.size(); ++l)
    for (size_t k = 0; k < f.paths[l].size(); ++k) {
      idx[l * depth + k] = f.paths[l][k].first;
      dir[l * depth + k] = f.paths[l][k].second;
    }
  const int64_t total = nl * static_cast<int64_t>(depth), dd = static_cast<int64_t>(depth);
  ctn_node gathered = reshape(g, take(g, d, const_i64(g, idx, Shape::from(1, &total)), 1), Shape::from(3, std::vector<int64_t>{b, nl, dd}.data()));
  ctn_node ok = cast(g, g.op2(CTN_OP_EQ, gathered, const_f(g, dt, dir, Shape::from(3, std::vector<int64_t>{1, nl, dd}.data()))), dt);
  return reduce_min(g, ok, 4, false);  // [B, leaves]
}

// Leaf weights [leaves, targets] from the (tree, node, target id, weight) lists of `prefix`.
ctn_node leaf_weights(NodeCtx &c, const Forest &f, const char *prefix, int64_t targets, int32_t dt) {
  const std::string p = prefix;
  const std::vector<int64_t> t = c.attr_ints((p + "_treeids").c_str()), n = c.attr_ints((p + "_nodeids").c_str()),
                             id = c.attr_ints((p + "_ids").c_str());
  const std::vector<float> w = c.attr_floats((p + "_weights").c_str());
  if (n.size() != t.size() || id.size() != t.size() || w.size() != t.size()) c.invalid("the %s_* attributes differ in length", prefix);
  const int64_t nl = static_cast<int64_t>(f.paths.size());
  std::vector<double> m(static_cast<size_t>(nl * targets));
  for (size_t k = 0; k < t.size(); ++k) {
    auto leaf = f.leaf_of.find({t[k], n[k]});
    if (leaf == f.leaf_of.end()) c.invalid("%s entry %zu names node %lld of tree %lld, which is not a leaf", prefix, k,
                                           static_cast<long long>(n[k]), static_cast<long long>(t[k]));
    if (id[k] < 0 || id[k] >= targets) c.invalid("%s_ids entry %lld is out of range", prefix, static_cast<long long>(id[k]));
    m[static_cast<size_t>(leaf->second * targets + id[k])] += w[k];
  }
  return const_f(c.g, dt, m, Shape::from(2, std::vector<int64_t>{nl, targets}.data()));
}

ctn_node add_base(NodeCtx &c, ctn_node y, int64_t targets) {
  std::vector<float> base = c.attr_floats("base_values");
  if (base.empty()) return y;
  if (static_cast<int64_t>(base.size()) != targets) c.invalid("base_values has %zu values for %lld targets", base.size(),
                                                              static_cast<long long>(targets));
  Shape s;
  s.ndim = 1, s[0] = targets;
  return c.g.op2(CTN_OP_ADD, y, const_f(c.g, c.g.info(y).dtype, std::vector<double>(base.begin(), base.end()), s));
}

void tree_ensemble_regressor(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = rows(c, floating(c, 0));
  const Forest f = read_forest(c);
  const int64_t targets = c.attr_i("n_targets", 1);
  const std::string agg = c.attr_s("aggregate_function", "SUM"), pt = c.attr_s("post_transform", "NONE");
  if (agg != "SUM" && agg != "AVERAGE") c.unsupported("aggregate_function '%s' (SUM and AVERAGE)", agg.c_str());
  if (pt != "NONE") c.unsupported("post_transform '%s' (NONE only)", pt.c_str());
  ctn_node y = g.op2(CTN_OP_MATMUL, active_leaves(c, f, x), leaf_weights(c, f, "target", targets, g.info(x).dtype));
  if (agg == "AVERAGE") y = g.op2(CTN_OP_DIV, y, g.add_scalar(g.info(x).dtype, static_cast<double>(std::max<int64_t>(f.trees, 1))));
  out1(c, add_base(c, y, targets));
}

// onnxruntime's binary case (2 labels, every weight on one class id k; skl2onnx's binary
// boosting): s is that class's sum; the label is labels[1] where s > 0.5 (all weights >= 0) or
// s > 0 (otherwise); the scores are [1 - s, s] or [-s, s] (k = 0, NONE), [sigmoid(-s),
// sigmoid(s)] (k = 0, LOGISTIC), or the plain per-class columns transformed (k = 1).
void binary_trees(NodeCtx &c, ctn_node sums, int64_t k, const std::vector<int64_t> &labels, const std::string &pt) {
  Graph &g = c.g;
  const int32_t dt = g.info(sums).dtype;
  const std::vector<float> w = c.attr_floats("class_weights");
  const bool positive = std::all_of(w.begin(), w.end(), [](float v) { return v >= 0; });
  ctn_node s = slice(g, sums, 1, k, k + 1, 1);  // [B, 1]
  ctn_node scores;
  if (k == 1) {
    scores = post_transform(c, sums, pt);
  } else {
    if (pt != "NONE" && pt != "LOGISTIC") c.unsupported("post_transform '%s' of a binary tree classifier (NONE, LOGISTIC)", pt.c_str());
    ctn_node lo = pt == "NONE" && positive ? g.op2(CTN_OP_SUB, g.add_scalar(dt, 1), s) : g.op1(CTN_OP_NEG, s);
    ctn_node both[2] = {lo, s};
    ctn_attrs a = attrs_i({1});
    scores = post_transform(c, g.add_op(CTN_OP_CONCAT, 2, both, &a), pt);
  }
  const int64_t n = g.info(s).shape[0];
  ctn_node hit = cast(g, reshape(g, g.op2(CTN_OP_GT, s, g.add_scalar(dt, positive ? 0.5 : 0.0)), Shape::from(1, &n)), CTN_I64);
  const int64_t two = 2;
  c.outs = {take(g, const_i64(g, labels, Shape::from(1, &two)), hit, 0), scores};
}

void tree_ensemble_classifier(NodeCtx &c) {
  Graph &g = c.g;
  if (c.has_attr("classlabels_strings")) c.unsupported("string class labels (the label output would be a string tensor)");
  const std::vector<int64_t> labels = c.attr_ints("classlabels_int64s"), ids = c.attr_ints("class_ids");
  const auto n_cls = static_cast<int64_t>(labels.size());
  if (n_cls < 2) c.unsupported("%lld class labels (2 or more)", static_cast<long long>(n_cls));
  ctn_node x = rows(c, floating(c, 0));
  const int32_t dt = g.info(x).dtype;
  const Forest f = read_forest(c);
  ctn_node s = g.op2(CTN_OP_MATMUL, active_leaves(c, f, x), leaf_weights(c, f, "class", n_cls, dt));
  const std::string pt = c.attr_s("post_transform", "NONE");
  const bool binary = n_cls == 2 && !ids.empty() && std::all_of(ids.begin(), ids.end(), [&](int64_t v) { return v == ids[0]; });
  if (binary) {
    // One base value with every weight on class 0 (skl2onnx's binary gradient boosting: the
    // prior log-odds) is added to that class's sum, as onnxruntime does; other layouts of
    // base_values on two classes are left vague by ONNX and refused.
    const std::vector<float> base = c.attr_floats("base_values");
    if (base.size() == 1 && ids[0] == 0) {
      const int64_t two = 2;
      s = g.op2(CTN_OP_ADD, s, const_f(g, dt, {static_cast<double>(base[0]), 0.0}, Shape::from(1, &two)));
    } else if (!base.empty()) {
      c.unsupported("%zu base_values on a binary tree classifier whose weights are on class %lld (1, on class 0)",
                    base.size(), static_cast<long long>(ids[0]));
    }
    return binary_trees(c, s, ids[0], labels, pt);
  }
  s = post_transform(c, add_base(c, s, n_cls), pt);
  const int64_t n = g.info(s).shape[0];
  ctn_node best = cast(g, reshape(g, extreme_index(g, s, 1, true, false), Shape::from(1, &n)), CTN_I64);
  c.outs = {take(g, const_i64(g, labels, Shape::from(1, &n_cls)), best, 0), s};
}

// ---- TreeEnsemble (ai.onnx.ml opset 5): interior nodes and leaves in separate arrays, indices
// into them; modes as a uint8 tensor (0 LEQ, 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ, 6 MEMBER with the
// sets in membership_values, NaN-separated, in node order). Read into the same Forest. ----
Forest read_forest5(NodeCtx &c) {
  const std::vector<int64_t> feat = c.attr_ints("nodes_featureids"), tn = c.attr_ints("nodes_truenodeids"),
                             fn = c.attr_ints("nodes_falsenodeids"), tl = c.attr_ints("nodes_trueleafs"),
                             fl = c.attr_ints("nodes_falseleafs"), miss = c.attr_ints("nodes_missing_value_tracks_true"),
                             roots = c.attr_ints("tree_roots");
  const std::vector<double> split = c.attr_tensor_reals("nodes_splits"), modes = c.attr_tensor_reals("nodes_modes"),
                            members = c.attr_tensor_reals("membership_values");
  c.ignore("nodes_hitrates");
  const size_t n = feat.size();
  if (tn.size() != n || fn.size() != n || tl.size() != n || fl.size() != n || split.size() != n || modes.size() != n ||
      (!miss.empty() && miss.size() != n))
    c.invalid("the nodes_* attributes must all have one entry per interior node (%zu)", n);
  static const char *const kModes[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER"};
  Forest f;
  size_t next_set = 0;
  for (size_t k = 0; k < n; ++k) {
    const auto m = static_cast<int64_t>(modes[k]);
    if (m < 0 || m > 6) c.invalid("nodes_modes[%zu] is %lld (0 to 6)", k, static_cast<long long>(m));
    f.feature.push_back(feat[k]);
    f.threshold.push_back(split[k]);
    f.mode.push_back(kModes[m]);
    f.nan_true.push_back(miss.empty() ? 0.0 : static_cast<double>(miss[k] != 0));
    f.member.emplace_back();
    if (m != 6) continue;
    while (next_set < members.size() && !std::isnan(members[next_set])) f.member.back().push_back(members[next_set++]);
    if (f.member.back().empty()) c.invalid("membership_values has no set for BRANCH_MEMBER node %zu", k);
    ++next_set;  // the NaN that ends the set
  }
  std::function<void(int64_t, std::vector<std::pair<int64_t, double>> &, size_t)> walk =
      [&](int64_t k, std::vector<std::pair<int64_t, double>> &path, size_t depth) {
        if (k < 0 || static_cast<size_t>(k) >= n) c.invalid("node index %lld is out of range (%zu interior nodes)", static_cast<long long>(k), n);
        if (depth > 256) c.invalid("a tree is deeper than 256 (or has a cycle)");
        for (int branch = 1; branch >= 0; --branch) {
          const auto i = static_cast<size_t>(k);
          path.push_back({k, branch});
          if (branch ? tl[i] : fl[i]) {
            f.leaf_src.push_back(branch ? tn[i] : fn[i]);
            f.paths.push_back(path);
          } else {
            walk(branch ? tn[i] : fn[i], path, depth + 1);
          }
          path.pop_back();
        }
      };
  for (int64_t r : roots) {
    ++f.trees;
    std::vector<std::pair<int64_t, double>> path;
    walk(r, path, 0);
  }
  return f;
}

void tree_ensemble(NodeCtx &c) {
  Graph &g = c.g;
  ctn_node x = rows(c, floating(c, 0));
  const int32_t dt = g.info(x).dtype;
  const Forest f = read_forest5(c);
  const int64_t targets = c.attr_i("n_targets", 1), agg = c.attr_i("aggregate_function", 1), pt = c.attr_i("post_transform", 0);
  if (agg != 0 && agg != 1) c.unsupported("aggregate_function %lld (0 AVERAGE and 1 SUM; not MIN or MAX)", static_cast<long long>(agg));
  if (pt < 0 || pt > 2) c.unsupported("post_transform %lld (0 NONE, 1 SOFTMAX, 2 LOGISTIC)", static_cast<long long>(pt));
  const std::vector<int64_t> ids = c.attr_ints("leaf_targetids");
  const std::vector<double> w = c.attr_tensor_reals("leaf_weights");
  if (ids.size() != w.size()) c.invalid("leaf_targetids has %zu entries, leaf_weights %zu", ids.size(), w.size());
  const int64_t nl = static_cast<int64_t>(f.paths.size());
  std::vector<double> m(static_cast<size_t>(nl * targets));
  for (size_t j = 0; j < f.leaf_src.size(); ++j) {
    const int64_t l = f.leaf_src[j];
    if (l < 0 || static_cast<size_t>(l) >= ids.size()) c.invalid("leaf index %lld is out of range (%zu leaves)", static_cast<long long>(l), ids.size());
    const int64_t t = ids[static_cast<size_t>(l)];
    if (t < 0 || t >= targets) c.invalid("leaf_targetids entry %lld is out of range for %lld targets", static_cast<long long>(t), static_cast<long long>(targets));
    m[static_cast<size_t>(static_cast<int64_t>(j) * targets + t)] += w[static_cast<size_t>(l)];
  }
  ctn_node y = g.op2(CTN_OP_MATMUL, active_leaves(c, f, x), const_f(g, dt, m, Shape::from(2, std::vector<int64_t>{nl, targets}.data())));
  if (agg == 0) y = g.op2(CTN_OP_DIV, y, g.add_scalar(dt, static_cast<double>(std::max<int64_t>(f.trees, 1))));
  static const char *const kPost[] = {"NONE", "SOFTMAX", "LOGISTIC"};
  out1(c, post_transform(c, y, kPost[pt]));
}

// ZipMap turns [N, C] scores into N maps {class label: score}: a list of maps, which no tensor
// holds. Its output here is the score tensor itself, [N, C] float, column j being the class
// classlabels_int64s[j] (or classlabels_strings[j]): the same numbers as onnxruntime's maps, in
// label order (docs/ONNX.md, "ai.onnx.ml"). skl2onnx's classifiers end in one unless exported with
// options={'zipmap': False}, which gives exactly this tensor.
void zipmap(NodeCtx &c) {
  const Shape s = c.shape(0);
  if (s.ndim != 2) c.invalid("the input must be [N, C] scores, not %s", shape_str(s).c_str());
  const AttributeP *str = c.attr("classlabels_strings");
  const size_t n_int = c.attr_ints("classlabels_int64s").size(), n_str = str ? str->strings.size() : 0;
  const size_t n_lab = n_int ? n_int : n_str;
  if (n_lab == 0) c.invalid("neither classlabels_int64s nor classlabels_strings is given");
  if (static_cast<int64_t>(n_lab) != s[1])
    c.invalid("%zu class labels for %lld score columns", n_lab, static_cast<long long>(s[1]));
  out1(c, c.dtype(0) == CTN_F32 ? c.in(0) : cast(c.g, c.in(0), CTN_F32));
}

const OpEntry kMl[] = {
    {"Binarizer", binarizer},
    {"ArrayFeatureExtractor", array_feature_extractor},
    {"Scaler", scaler},
    {"Normalizer", normalizer},
    {"LinearRegressor", linear_regressor},
    {"LinearClassifier", linear_classifier},
    {"TreeEnsembleRegressor", tree_ensemble_regressor},
    {"TreeEnsembleClassifier", tree_ensemble_classifier},
    {"TreeEnsemble", tree_ensemble},
    {"ZipMap", zipmap},
};

}  // namespace

std::span<const OpEntry> ml_ops() { return kMl; }

}  // namespace ctn::onnx
