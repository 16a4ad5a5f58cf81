// Small builders shared by the forward and gradient case tables.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "conformance.hpp"

namespace conf {

using UnaryFn = ctn_status (*)(ctn_graph *, ctn_node, ctn_node *);
using BinaryFn = ctn_status (*)(ctn_graph *, ctn_node, ctn_node, ctn_node *);

inline Build un(UnaryFn f) {
  return [f](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) { return f(g, n[0], o); };
}

inline Build bin(BinaryFn f) {
  return [f](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) { return f(g, n[0], n[1], o); };
}

inline ctn_attrs attrs(std::initializer_list<int64_t> ints, std::initializer_list<double> floats = {}) {
  ctn_attrs a{};
  for (int64_t v : ints) a.i[a.ni++] = v;
  for (double v : floats) a.f[a.nf++] = v;
  return a;
}

// ctn_op by name: the path for ops without a typed helper (and for op libraries).
inline Build named(std::string op, ctn_attrs a = ctn_attrs{}) {
  return [op, a](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
    bool has = a.ni != 0 || a.nf != 0;
    return ctn_op(g, op.c_str(), static_cast<uint32_t>(n.size()), n.data(), has ? &a : nullptr,
                  o);
  };
}

inline InSpec in(Shape shape, Gen gen, int dtype = -1) {
  return InSpec{std::move(shape), std::move(gen), dtype};
}

inline Variant variant(std::string label, std::vector<InSpec> ins, Build build, Ref ref = nullptr) {
  Variant v;
  v.label = std::move(label);
  v.ins = std::move(ins);
  v.build = std::move(build);
  v.ref = std::move(ref);
  return v;
}

inline Ref ref1(double (*f)(double)) {
  return [f](const std::vector<Arr> &x, ctn_dtype) { return ref_map1(x[0], f); };
}

inline Ref ref2(double (*f)(double, double)) {
  return [f](const std::vector<Arr> &x, ctn_dtype) { return ref_map2(x[0], x[1], f); };
}

// A case table built once from the functions that append its groups of cases, in order.
using AddCases = void (*)(std::vector<OpCase> &);
inline std::vector<OpCase> collect_cases(std::initializer_list<AddCases> adders) {
  std::vector<OpCase> cs;
  for (AddCases add : adders) add(cs);
  return cs;
}

// "[2,3]": a shape in a variant's label.
inline std::string shape_label(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// a @ b with the given transposes, inputs uniform in [-1, 1], against ref_matmul (the reference
// is unused where the case is a gradient case).
struct MatmulCase {
  Shape a, b;
  int ta, tb;
};
inline Variant matmul_variant(const MatmulCase &m) {
  const int ta = m.ta, tb = m.tb;
  return variant(
      shape_label(m.a) + (ta ? "^T" : "") + "@" + shape_label(m.b) + (tb ? "^T" : ""),
      {in(m.a, uni(-1, 1)), in(m.b, uni(-1, 1))},
      [ta, tb](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) { return ctn_matmul(g, n[0], n[1], ta, tb, o); },
      [ta, tb](const std::vector<Arr> &x, ctn_dtype) { return ref_matmul(x[0], x[1], ta != 0, tb != 0); });
}

// A reduction (sum, mean, max) over `axes` of an input of shape `s`, drawn from `gen`, against
// ref_reduce (unused where the case is a gradient case).
struct ReduceCase {
  Shape s;
  std::vector<int32_t> axes;
  int keep;
};
using ReduceFn = ctn_status (*)(ctn_graph *, ctn_node, uint32_t, const int32_t *, int32_t, ctn_node *);
inline Variant reduce_variant(ReduceFn fn, Red kind, const ReduceCase &r, Gen gen) {
  std::string label = shape_label(r.s) + " axes{";
  for (int32_t a : r.axes) label += std::to_string(a) + ",";
  label += "} keep " + std::to_string(r.keep);
  const std::vector<int32_t> axes = r.axes;
  const int keep = r.keep;
  return variant(
      label, {in(r.s, std::move(gen))},
      [fn, axes, keep](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
        return fn(g, n[0], static_cast<uint32_t>(axes.size()), axes.data(), keep, o);
      },
      [axes, keep, kind](const std::vector<Arr> &x, ctn_dtype) { return ref_reduce(x[0], axes, keep != 0, kind); });
}

// where(cond, a, b) over the shapes s[0], s[1], s[2]: cond 0 or 1 (bool), a and b drawn from
// `gen`, against ref_map3 (unused where the case is a gradient case).
inline Variant where_variant(const std::vector<Shape> &s, const Gen &gen) {
  return variant(
      shape_label(s[0]) + "?" + shape_label(s[1]) + ":" + shape_label(s[2]),
      {in(s[0], ints(0, 1), CTN_BOOL), in(s[1], gen), in(s[2], gen)},
      [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) { return ctn_where(g, n[0], n[1], n[2], o); },
      [](const std::vector<Arr> &x, ctn_dtype) {
        return ref_map3(x[0], x[1], x[2], [](double c, double a, double b) { return c != 0 ? a : b; });
      });
}

// FNV-1a: a seed that is the same on every platform and standard library.
inline uint64_t seed_of(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace conf
