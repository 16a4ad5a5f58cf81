// Forward cases, part 2: shape ops, the softmax family, cross-entropy and the *_grad helpers.
#include <cmath>

#include "case_helpers.hpp"

namespace conf {
namespace {

void add_layout(std::vector<OpCase> &cs) {
  {
    OpCase c{"reshape", "reshape", {}};
    const std::vector<std::pair<Shape, Shape>> rs = {{{2, 3, 4}, {4, -1}}, {{6}, {1, 6, 1}},
                                                     {{}, {1}},            {{1}, {}},
                                                     {{2, 3}, {3, 2}},     {{2, 3, 4}, {-1}}};
    for (const auto &[from, to] : rs) {
      Shape target = to;
      c.variants.push_back(variant(
          shape_label(from) + "->" + shape_label(to), {in(from, uni(-3, 3))},
          [target](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            static const int64_t dummy = 0;  // ndim 0: a valid pointer all the same
            return ctn_reshape(g, n[0], static_cast<uint32_t>(target.size()),
                               target.empty() ? &dummy : target.data(), o);
          },
          [target](const std::vector<Arr> &x, ctn_dtype) { return ref_reshape(x[0], target); }));
    }
    c.view_ok = true;
    cs.push_back(c);
  }
  {
    // ctn_transpose is the permute op with the last two axes swapped.
    OpCase c{"permute", "permute", {}};
    const std::vector<std::pair<Shape, std::vector<int32_t>>> ps = {
        {{2, 3, 4}, {2, 0, 1}}, {{2, 3}, {1, 0}}, {{1, 3, 1}, {2, 1, 0}},
        {{4}, {0}},             {{2, 1, 3, 2}, {3, 1, 0, 2}},
        // NCHW <-> NHWC (the layout stage's permutes: the CPU's tiled transpose, partial tiles,
        // and split over the pool from 32768 elements)
        {{2, 5, 6, 7}, {0, 2, 3, 1}}, {{2, 6, 7, 5}, {0, 3, 1, 2}}, {{3, 20, 17, 33}, {0, 2, 3, 1}}};
    for (const auto &[s, perm] : ps) {
      auto p = perm;
      c.variants.push_back(variant(
          shape_label(s) + " perm", {in(s, uni(-3, 3))},
          [p](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            return ctn_permute(g, n[0], p.data(), o);
          },
          [p](const std::vector<Arr> &x, ctn_dtype) { return ref_permute(x[0], p); }));
    }
    for (const Shape &s : std::vector<Shape>{{2, 3}, {2, 3, 4}, {1, 5}}) {
      c.variants.push_back(variant(
          shape_label(s) + " transpose", {in(s, uni(-3, 3))}, un(ctn_transpose),
          [](const std::vector<Arr> &x, ctn_dtype) {
            std::vector<int32_t> p(x[0].shape.size());
            for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(i);
            std::swap(p[p.size() - 1], p[p.size() - 2]);
            return ref_permute(x[0], p);
          }));
    }
    cs.push_back(c);
  }
  {
    OpCase c{"slice", "slice", {}};
    struct S {
      Shape s;
      int32_t axis;
      int64_t start, stop, step;
    };
    const S ss[] = {{{5, 4}, 0, 1, 3, 1},     {{5, 4}, -1, -3, -1, 1},  {{6}, 0, 0, 100, 2},
                    {{6}, 0, -100, 4, 3},     {{2, 3, 4}, 1, 2, 3, 1},  {{2, 3, 4}, 2, 1, 4, 2},
                    {{3, 4}, 0, 2, 1, 1}};  // the last one is empty (stop < start)
    for (const S &s : ss) {
      S k = s;
      c.variants.push_back(variant(
          shape_label(s.s) + " axis " + std::to_string(s.axis) + " " + std::to_string(s.start) +
              ":" + std::to_string(s.stop) + ":" + std::to_string(s.step),
          {in(s.s, uni(-3, 3))},
          [k](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            return ctn_slice(g, n[0], k.axis, k.start, k.stop, k.step, o);
          },
          [k](const std::vector<Arr> &x, ctn_dtype) {
            return ref_slice(x[0], k.axis, k.start, k.stop, k.step);
          }));
    }
    cs.push_back(c);
  }
  {
    // slice_grad takes normalised attributes (what the core's autodiff emits).
    OpCase c{"slice_grad", "slice_grad", {}};
    struct S {
      Shape dy;
      int64_t axis, start, stop, step, src;
    };
    const S ss[] = {{{2, 4}, 0, 1, 3, 1, 5}, {{3}, 0, 0, 6, 2, 6}, {{2, 1, 4}, 1, 2, 3, 1, 3},
                    {{2, 2}, 1, 1, 4, 2, 4}};
    for (const S &s : ss) {
      S k = s;
      c.variants.push_back(variant(
          shape_label(s.dy) + " axis " + std::to_string(s.axis) + " src " + std::to_string(s.src),
          {in(s.dy, uni(-3, 3))}, named("slice_grad", attrs({k.axis, k.start, k.stop, k.step, k.src})),
          [k](const std::vector<Arr> &x, ctn_dtype) {
            return ref_slice_grad(x[0], static_cast<int32_t>(k.axis), k.start, k.step, k.src);
          }));
    }
    cs.push_back(c);
  }
  {
    OpCase c{"concat", "concat", {}};
    const std::vector<std::pair<std::vector<Shape>, int32_t>> cc = {
        {{{2, 3}, {4, 3}}, 0},          {{{2, 1}, {2, 3}, {2, 2}}, 1}, {{{2, 3, 2}, {2, 3, 1}}, -1},
        {{{3}}, 0},                     {{{2, 2}, {2, 2}}, -2},        {{{1}, {1}, {1}, {1}}, 0}};
    for (const auto &[shapes, axis] : cc) {
      std::vector<InSpec> ins;
      std::string label;
      for (const auto &s : shapes) {
        ins.push_back(in(s, uni(-3, 3)));
        label += shape_label(s);
      }
      int32_t ax = axis;
      c.variants.push_back(variant(
          label + " axis " + std::to_string(axis), ins,
          [ax](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            return ctn_concat(g, static_cast<uint32_t>(n.size()), n.data(), ax, o);
          },
          [ax](const std::vector<Arr> &x, ctn_dtype) { return ref_concat(x, ax); }));
    }
    cs.push_back(c);
  }
  {
    OpCase c{"broadcast_to", "broadcast_to", {}};
    const std::vector<std::pair<Shape, Shape>> bs = {{{3}, {2, 3}},         {{2, 1}, {2, 4}},
                                                     {{}, {2, 3}},          {{1, 3, 1}, {2, 3, 4}},
                                                     {{2, 3}, {2, 3}},      {{1}, {5}}};
    for (const auto &[from, to] : bs) {
      Shape target = to;
      c.variants.push_back(variant(
          shape_label(from) + "->" + shape_label(to), {in(from, uni(-3, 3))},
          [target](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            return ctn_broadcast_to(g, n[0], static_cast<uint32_t>(target.size()), target.data(),
                                    o);
          },
          [target](const std::vector<Arr> &x, ctn_dtype) {
            return ref_broadcast_to(x[0], target);
          }));
    }
    cs.push_back(c);
  }
}

void add_softmax(std::vector<OpCase> &cs) {
  const std::vector<std::pair<Shape, int32_t>> sm = {{{2, 5}, -1}, {{3, 4}, 0}, {{2, 3, 4}, 1},
                                                     {{6}, 0},     {{1, 3}, -1}, {{4, 1}, 1}};
  for (bool log : {false, true}) {
    std::string name = log ? "log_softmax" : "softmax";
    OpCase c{name, name, {}};
    for (const auto &[s, axis] : sm) {
      int32_t ax = axis;
      c.variants.push_back(variant(
          shape_label(s) + " axis " + std::to_string(axis), {in(s, uni(-3, 3))},
          [ax, log](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            return log ? ctn_log_softmax(g, n[0], ax, o) : ctn_softmax(g, n[0], ax, o);
          },
          [ax, log](const std::vector<Arr> &x, ctn_dtype) { return ref_softmax(x[0], ax, log); }));
    }
    cs.push_back(c);
  }
  const std::vector<std::pair<Shape, int32_t>> smg = {{{2, 5}, 1}, {{3, 4}, 0}, {{2, 3, 4}, 1}};
  for (bool log : {false, true}) {
    std::string name = log ? "log_softmax_grad" : "softmax_grad";
    OpCase c{name, name, {}};
    for (const auto &[s, axis] : smg) {
      int32_t ax = axis;
      c.variants.push_back(variant(
          shape_label(s) + " axis " + std::to_string(axis),
          {in(s, log ? uni(-3, 0) : uni(0, 1)), in(s, uni(-2, 2))}, named(name, attrs({ax})),
          [ax, log](const std::vector<Arr> &x, ctn_dtype) {
            return ref_softmax_grad(x[0], x[1], ax, log);
          }));
    }
    cs.push_back(c);
  }

  struct Ce {
    int64_t n, c;
    int label_dtype;
  };
  const Ce ces[] = {{4, 5, CTN_I32}, {1, 3, CTN_I64}, {3, 1, CTN_I32}, {6, 2, CTN_I64}};
  OpCase ce{"cross_entropy", "cross_entropy", {}}, ceg{"cross_entropy_grad", "cross_entropy_grad", {}};
  for (const Ce &e : ces) {
    std::string label = "[" + std::to_string(e.n) + "," + std::to_string(e.c) + "] labels " +
                        ctn_dtype_name(static_cast<ctn_dtype>(e.label_dtype));
    Gen labels = ints(0, static_cast<int>(e.c - 1));
    ce.variants.push_back(variant(
        label, {in({e.n, e.c}, uni(-3, 3)), in({e.n}, labels, e.label_dtype)},
        bin(ctn_cross_entropy),
        [](const std::vector<Arr> &x, ctn_dtype) { return ref_cross_entropy(x[0], x[1]); }));
    ceg.variants.push_back(variant(
        label, {in({e.n, e.c}, uni(-3, 3)), in({e.n}, labels, e.label_dtype), in({}, uni(-2, 2))},
        named("cross_entropy_grad"), [](const std::vector<Arr> &x, ctn_dtype) {
          return ref_cross_entropy_grad(x[0], x[1], x[2].v[0]);
        }));
  }
  cs.push_back(ce);
  cs.push_back(ceg);
}

OpCase elementwise_grad(const std::string &op, Build b, Ref r, Gen gx) {
  OpCase c{op, op, {}};
  for (const Shape &s : std::vector<Shape>{{}, {6}, {2, 3, 4}})
    c.variants.push_back(variant(shape_label(s), {in(s, gx), in(s, uni(-2, 2))}, b, r));
  return c;
}

Ref ref_dy(std::function<double(double)> local) {  // (x, dy) -> dy * local(x)
  return [local](const std::vector<Arr> &x, ctn_dtype) {
    return ref_map2(x[0], x[1], [local](double a, double dy) { return dy * local(a); });
  };
}

void add_backward_helpers(std::vector<OpCase> &cs) {
  cs.push_back(elementwise_grad("relu_grad", named("relu_grad"),
                                ref_dy([](double x) { return x > 0 ? 1.0 : 0.0; }),
                                with_zeros(uni(-2, 2))));
  cs.push_back(elementwise_grad("leaky_relu_grad", named("leaky_relu_grad", attrs({}, {0.2})),
                                ref_dy([](double x) { return x > 0 ? 1.0 : 0.2; }),
                                with_zeros(uni(-2, 2))));
  cs.push_back(elementwise_grad("gelu_grad", named("gelu_grad"), ref_dy(ref_gelu_grad),
                                uni(-4, 4)));
  cs.push_back(elementwise_grad(
      "clamp_grad", named("clamp_grad", attrs({}, {-0.5, 0.5})),
      ref_dy([](double x) { return x >= -0.5 && x <= 0.5 ? 1.0 : 0.0; }),
      [](Rng &r) {  // exact bounds mixed in: clamp'(lo) = clamp'(hi) = 1
        double p = std::uniform_real_distribution<double>(0, 1)(r);
        return p < 0.15 ? -0.5 : p < 0.3 ? 0.5 : std::uniform_real_distribution<double>(-2, 2)(r);
      }));
  cs.push_back(elementwise_grad("tanh_grad", named("tanh_grad"),
                                ref_dy([](double y) { return 1 - y * y; }), uni(-1, 1)));
  cs.push_back(elementwise_grad("sigmoid_grad", named("sigmoid_grad"),
                                ref_dy([](double y) { return y * (1 - y); }), uni(0, 1)));
}

}  // namespace

void add_shape_cases(std::vector<OpCase> &cs) {
  add_layout(cs);
  add_softmax(cs);
  add_backward_helpers(cs);
}

}  // namespace conf
