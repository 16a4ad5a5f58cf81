// Gradient cases (f64): loss = sum(op(inputs) * W) with fixed random W; ctn_grad w.r.t. every
// floating input is compared with central differences. Inputs stay away from the points where
// the op is not differentiable (0 for relu/abs/sign, the clamp bounds, ties of max/maximum);
// the documented subgradients at those points are checked in tests.cpp.
#include <cmath>

#include "case_helpers.hpp"

namespace conf {
namespace {

OpCase g_unary(const std::string &op, Build b, Gen g) {
  OpCase c{"grad:" + op, op, {}};
  for (const Shape &s : std::vector<Shape>{{}, {2, 3}, {1, 4, 1}})
    c.variants.push_back(variant(shape_label(s), {in(s, g)}, b));
  return c;
}

OpCase g_binary(const std::string &op, Build b, Gen ga, Gen gb) {
  OpCase c{"grad:" + op, op, {}};
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{}, {2, 2}}, {{2, 2}, {}}};
  for (const auto &[sa, sb] : shapes)
    c.variants.push_back(variant(shape_label(sa) + "x" + shape_label(sb), {in(sa, ga), in(sb, gb)}, b));
  return c;
}

// Uniform in [-2, 2] but at least `gap` from both clamp bounds.
Gen away_from_bounds(double lo, double hi, double gap) {
  return [=](Rng &r) {
    for (;;) {
      double x = std::uniform_real_distribution<double>(-2, 2)(r);
      if (std::fabs(x - lo) >= gap && std::fabs(x - hi) >= gap) return x;
    }
  };
}

void add_elementwise(std::vector<OpCase> &cs) {
  cs.push_back(g_unary("neg", un(ctn_neg), uni(-2, 2)));
  cs.push_back(g_unary("exp", un(ctn_exp), uni(-2, 2)));
  cs.push_back(g_unary("log", un(ctn_log), uni(0.3, 3)));
  cs.push_back(g_unary("sqrt", un(ctn_sqrt), uni(0.3, 3)));
  cs.push_back(g_unary("abs", un(ctn_abs), away(-2, 2, 0.1)));
  cs.push_back(g_unary("sign", named("sign"), away(-2, 2, 0.1)));
  cs.push_back(g_unary("tanh", un(ctn_tanh), uni(-2, 2)));
  cs.push_back(g_unary("sigmoid", un(ctn_sigmoid), uni(-3, 3)));
  cs.push_back(g_unary("relu", un(ctn_relu), away(-2, 2, 0.1)));
  cs.push_back(g_unary("gelu", un(ctn_gelu), uni(-3, 3)));
  cs.push_back(g_unary("erf", named("erf"), uni(-2, 2)));
  cs.push_back(g_unary("atan", named("atan"), uni(-3, 3)));
  cs.push_back(g_unary("sin", named("sin"), uni(-3, 3)));
  cs.push_back(g_unary("cos", named("cos"), uni(-3, 3)));
  cs.push_back(g_unary("tan", named("tan"), uni(-1.2, 1.2)));
  cs.push_back(g_unary("asin", named("asin"), uni(-0.9, 0.9)));
  cs.push_back(g_unary("acos", named("acos"), uni(-0.9, 0.9)));
  cs.push_back(g_unary("sinh", named("sinh"), uni(-3, 3)));
  cs.push_back(g_unary("cosh", named("cosh"), uni(-3, 3)));
  cs.push_back(g_unary("asinh", named("asinh"), uni(-5, 5)));
  cs.push_back(g_unary("acosh", named("acosh"), uni(1.2, 5)));
  cs.push_back(g_unary("atanh", named("atanh"), uni(-0.9, 0.9)));
  cs.push_back(g_unary(
      "leaky_relu",
      [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
        return ctn_leaky_relu(g, n[0], 0.2, o);
      },
      away(-2, 2, 0.1)));
  cs.push_back(g_unary(
      "clamp",
      [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
        return ctn_clamp(g, n[0], -0.5, 0.5, o);
      },
      away_from_bounds(-0.5, 0.5, 0.05)));
  cs.push_back(g_unary("copy", named("copy"), uni(-2, 2)));
  {
    OpCase c = g_unary(
        "cast",
        [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_cast(g, n[0], CTN_F64, o);
        },
        uni(-2, 2));
    // f64 -> f32 -> f64: the derivative is 1, but the f32 rounding limits finite differences to
    // a large step and a loose bound (documented looser bound).
    Variant v = variant(
        "[2,3] via f32", {in({2, 3}, uni(-2, 2))},
        [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          ctn_node h = CTN_NODE_NONE;
          ctn_status s = ctn_cast(g, n[0], CTN_F32, &h);
          return s != CTN_OK ? s : ctn_cast(g, h, CTN_F64, o);
        });
    v.eps = 1e-2;
    v.grad_tol = 1e-4;
    c.variants.push_back(v);
    cs.push_back(c);
  }
  cs.push_back(g_binary("add", bin(ctn_add), uni(-2, 2), uni(-2, 2)));
  cs.push_back(g_binary("sub", bin(ctn_sub), uni(-2, 2), uni(-2, 2)));
  cs.push_back(g_binary("mul", bin(ctn_mul), uni(-2, 2), uni(-2, 2)));
  cs.push_back(g_binary("div", bin(ctn_div), uni(-2, 2), away(-2, 2, 0.5)));
  cs.push_back(g_binary("pow", bin(ctn_pow), uni(0.5, 2), uni(-2, 2)));
  // Continuous random values: ties between a and b have probability 0.
  cs.push_back(g_binary("maximum", named("maximum"), uni(-2, 2), uni(-2, 2)));
  cs.push_back(g_binary("minimum", named("minimum"), uni(-2, 2), uni(-2, 2)));
  {
    OpCase c{"grad:where", "where", {}};
    const std::vector<std::vector<Shape>> shapes = {{{2, 3}, {2, 3}, {2, 3}},
                                                    {{2, 1, 3}, {4, 3}, {}}};
    for (const auto &s : shapes) c.variants.push_back(where_variant(s, uni(-2, 2)));
    cs.push_back(c);
  }
  {
    // The same value used twice: the two contributions must be summed (d/dx = 2x + 1).
    OpCase c{"grad:accumulate(x*x+x)", "mul", {}};
    c.variants.push_back(variant("[2,3]", {in({2, 3}, uni(-2, 2))},
                                 [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                   ctn_node sq = CTN_NODE_NONE;
                                   ctn_status s = ctn_mul(g, n[0], n[0], &sq);
                                   return s != CTN_OK ? s : ctn_add(g, sq, n[0], o);
                                 }));
    cs.push_back(c);
  }
}

void add_matmul(std::vector<OpCase> &cs) {
  const MatmulCase mms[] = {{{3, 4}, {4, 2}, 0, 0},       {{4, 3}, {4, 2}, 1, 0},
                            {{3, 4}, {2, 4}, 0, 1},       {{4, 3}, {2, 4}, 1, 1},
                            {{2, 3, 4}, {4, 2}, 0, 0},    {{2, 1, 2, 3}, {3, 3, 2}, 0, 0},
                            {{2, 3, 2}, {1, 2, 3}, 1, 1}};
  OpCase c{"grad:matmul", "matmul", {}};
  for (const MatmulCase &m : mms) c.variants.push_back(matmul_variant(m));
  cs.push_back(c);
  // matmul_bias_act has no gradient rule: it only appears after fusion, which runs on the
  // compiled graph, after ctn_grad has differentiated the unfused ops.
}

void add_reductions_and_shapes(std::vector<OpCase> &cs) {
  const ReduceCase rs[] = {{{2, 3, 4}, {}, 0}, {{2, 3, 4}, {0, 2}, 1}, {{2, 3, 4}, {-1}, 0},
                           {{}, {}, 0},        {{1, 3, 1}, {1}, 0}};
  struct K {
    const char *name;
    Red kind;
    ReduceFn fn;
  };
  for (const K &k : {K{"sum", Red::Sum, ctn_sum}, K{"mean", Red::Mean, ctn_mean}, K{"max", Red::Max, ctn_max}}) {
    OpCase c{std::string("grad:") + k.name, k.name, {}};
    for (const ReduceCase &r : rs) c.variants.push_back(reduce_variant(k.fn, k.kind, r, uni(-2, 2)));
    cs.push_back(c);
  }
  {
    OpCase c{"grad:reshape", "reshape", {}};
    const int64_t to[] = {4, -1};
    c.variants.push_back(variant("[2,3,4]->[4,-1]", {in({2, 3, 4}, uni(-2, 2))},
                                 [to](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                   return ctn_reshape(g, n[0], 2, to, o);
                                 }));
    c.view_ok = true;
    cs.push_back(c);
  }
  {
    OpCase c{"grad:permute", "permute", {}};
    c.variants.push_back(variant("[2,3,4] perm 2,0,1", {in({2, 3, 4}, uni(-2, 2))},
                                 [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                   const int32_t p[] = {2, 0, 1};
                                   return ctn_permute(g, n[0], p, o);
                                 }));
    c.variants.push_back(variant("[2,3,4] transpose", {in({2, 3, 4}, uni(-2, 2))}, un(ctn_transpose)));
    cs.push_back(c);
  }
  {
    OpCase c{"grad:slice", "slice", {}};
    struct S {
      int32_t axis;
      int64_t start, stop, step;
    };
    for (const S &s : {S{0, 1, 3, 1}, S{-1, -3, 100, 2}, S{1, 0, 1, 1}}) {
      S k = s;
      c.variants.push_back(variant(
          "[3,4] axis " + std::to_string(s.axis) + " " + std::to_string(s.start) + ":" +
              std::to_string(s.stop) + ":" + std::to_string(s.step),
          {in({3, 4}, uni(-2, 2))}, [k](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            return ctn_slice(g, n[0], k.axis, k.start, k.stop, k.step, o);
          }));
    }
    cs.push_back(c);
  }
  {
    OpCase c{"grad:concat", "concat", {}};
    c.variants.push_back(variant("[2,1][2,3][2,2] axis 1",
                                 {in({2, 1}, uni(-2, 2)), in({2, 3}, uni(-2, 2)), in({2, 2}, uni(-2, 2))},
                                 [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                   return ctn_concat(g, 3, n.data(), 1, o);
                                 }));
    c.variants.push_back(variant("[1,3][2,3] axis -2", {in({1, 3}, uni(-2, 2)), in({2, 3}, uni(-2, 2))},
                                 [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                   return ctn_concat(g, 2, n.data(), -2, o);
                                 }));
    cs.push_back(c);
  }
  {
    OpCase c{"grad:broadcast_to", "broadcast_to", {}};
    const std::vector<std::pair<Shape, Shape>> bs = {{{3}, {2, 3}}, {{2, 1}, {2, 4}}, {{}, {3}}};
    for (const auto &[from, to] : bs) {
      Shape t = to;
      c.variants.push_back(variant(shape_label(from) + "->" + shape_label(to), {in(from, uni(-2, 2))},
                                   [t](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                     return ctn_broadcast_to(g, n[0], static_cast<uint32_t>(t.size()),
                                                             t.data(), o);
                                   }));
    }
    cs.push_back(c);
  }
}

void add_softmax(std::vector<OpCase> &cs) {
  for (bool log : {false, true}) {
    std::string name = log ? "log_softmax" : "softmax";
    OpCase c{"grad:" + name, name, {}};
    for (const auto &[s, axis] : std::vector<std::pair<Shape, int32_t>>{
             {{2, 4}, -1}, {{3, 2}, 0}, {{2, 3, 2}, 1}}) {
      int32_t ax = axis;
      c.variants.push_back(variant(shape_label(s) + " axis " + std::to_string(axis),
                                   {in(s, uni(-2, 2))},
                                   [ax, log](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                     return log ? ctn_log_softmax(g, n[0], ax, o)
                                                : ctn_softmax(g, n[0], ax, o);
                                   }));
    }
    cs.push_back(c);
  }
  OpCase c{"grad:cross_entropy", "cross_entropy", {}};
  c.variants.push_back(variant("[4,3] i32", {in({4, 3}, uni(-2, 2)), in({4}, ints(0, 2), CTN_I32)},
                               bin(ctn_cross_entropy)));
  c.variants.push_back(variant("[2,5] i64", {in({2, 5}, uni(-2, 2)), in({2}, ints(0, 4), CTN_I64)},
                               bin(ctn_cross_entropy)));
  cs.push_back(c);
}

}  // namespace

void add_composite_grad(std::vector<OpCase> &cs);  // composite_cases.cpp

const std::vector<OpCase> &grad_cases() {
  static const std::vector<OpCase> cases = collect_cases(
      {add_elementwise, add_matmul, add_reductions_and_shapes, add_softmax, add_composite_grad});
  return cases;
}

}  // namespace conf
