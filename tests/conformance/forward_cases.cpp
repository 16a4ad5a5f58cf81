// Forward cases: every op of ops.h reachable from the user API, several shapes each (0-d,
// size-1 dims, broadcasting...), compared with the naive reference in reference.cpp.
#include <cmath>

#include "case_helpers.hpp"

namespace conf {
namespace {

const std::vector<Shape> kUnaryShapes = {{}, {1}, {7}, {2, 3, 4}, {1, 3, 1}};

// Binary shape pairs: equal, trailing broadcast, both sides broadcast, 0-d against n-d, rank
// mismatch with size-1 dims.
const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {{2, 3}, {2, 3}}, {{2, 3, 4}, {4}}, {{3, 1}, {1, 4}}, {{}, {2, 3}},
    {{2, 1, 3}, {4, 1}}, {{1}, {}}, {{}, {}}};

std::string shape_label(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

OpCase unary(const std::string &op, Build b, Ref r, Gen g) {
  OpCase c{op, op, {}};
  for (const auto &s : kUnaryShapes) c.variants.push_back(variant(shape_label(s), {in(s, g)}, b, r));
  return c;
}

OpCase binary(const std::string &op, Build b, Ref r, Gen ga, Gen gb,
              std::function<ctn_dtype(ctn_dtype)> out_dtype = nullptr) {
  OpCase c{op, op, {}};
  for (const auto &[sa, sb] : kBinaryShapes) {
    Variant v = variant(shape_label(sa) + "x" + shape_label(sb), {in(sa, ga), in(sb, gb)}, b, r);
    v.out_dtype = out_dtype;
    c.variants.push_back(v);
  }
  return c;
}

// Inputs with exact copies of the clamp bounds mixed in (both are exact in f32).
Gen clamp_inputs() {
  return [](Rng &r) {
    double p = std::uniform_real_distribution<double>(0, 1)(r);
    if (p < 0.15) return -0.5;
    if (p < 0.3) return 0.5;
    return std::uniform_real_distribution<double>(-2, 2)(r);
  };
}

void add_elementwise(std::vector<OpCase> &cs) {
  cs.push_back(unary("neg", un(ctn_neg), ref1([](double x) { return -x; }), uni(-3, 3)));
  cs.push_back(unary("exp", un(ctn_exp), ref1([](double x) { return std::exp(x); }), uni(-3, 3)));
  cs.push_back(unary("log", un(ctn_log), ref1([](double x) { return std::log(x); }), uni(0.1, 4)));
  cs.push_back(unary("sqrt", un(ctn_sqrt), ref1([](double x) { return std::sqrt(x); }),
                     with_zeros(uni(0.05, 4))));
  cs.push_back(unary("abs", un(ctn_abs), ref1([](double x) { return std::fabs(x); }),
                     with_zeros(uni(-3, 3))));
  cs.push_back(unary("sign", named("sign"),
                     ref1([](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }),
                     with_zeros(uni(-3, 3))));
  cs.push_back(unary("tanh", un(ctn_tanh), ref1([](double x) { return std::tanh(x); }), uni(-4, 4)));
  cs.push_back(unary("sigmoid", un(ctn_sigmoid), ref1(ref_sigmoid), uni(-6, 6)));
  cs.push_back(unary("relu", un(ctn_relu), ref1([](double x) { return x > 0 ? x : 0.0; }),
                     with_zeros(uni(-3, 3))));
  cs.push_back(unary("gelu", un(ctn_gelu), ref1(ref_gelu), uni(-4, 4)));
  cs.push_back(unary("erf", named("erf"), ref1([](double x) { return std::erf(x); }), with_zeros(uni(-4, 4))));
  cs.push_back(unary("atan", named("atan"), ref1([](double x) { return std::atan(x); }), with_zeros(uni(-40, 40))));
  cs.push_back(unary("sin", named("sin"), ref1([](double x) { return std::sin(x); }), with_zeros(uni(-20, 20))));
  cs.push_back(unary("cos", named("cos"), ref1([](double x) { return std::cos(x); }), with_zeros(uni(-20, 20))));
  cs.push_back(unary("tan", named("tan"), ref1([](double x) { return std::tan(x); }), with_zeros(uni(-1.4, 1.4))));
  cs.push_back(unary("asin", named("asin"), ref1([](double x) { return std::asin(x); }), with_zeros(uni(-0.97, 0.97))));
  cs.push_back(unary("acos", named("acos"), ref1([](double x) { return std::acos(x); }), with_zeros(uni(-0.97, 0.97))));
  cs.push_back(unary("sinh", named("sinh"), ref1([](double x) { return std::sinh(x); }), with_zeros(uni(-6, 6))));
  cs.push_back(unary("cosh", named("cosh"), ref1([](double x) { return std::cosh(x); }), with_zeros(uni(-6, 6))));
  cs.push_back(unary("asinh", named("asinh"), ref1([](double x) { return std::asinh(x); }), with_zeros(uni(-30, 30))));
  cs.push_back(unary("acosh", named("acosh"), ref1([](double x) { return std::acosh(x); }), uni(1.01, 30)));
  cs.push_back(unary("atanh", named("atanh"), ref1([](double x) { return std::atanh(x); }), with_zeros(uni(-0.97, 0.97))));
  {
    OpCase c{"leaky_relu", "leaky_relu", {}};
    for (double slope : {0.1, 0.3})
      for (const auto &s : kUnaryShapes)
        c.variants.push_back(variant(
            shape_label(s) + " slope " + std::to_string(slope), {in(s, with_zeros(uni(-3, 3)))},
            [slope](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
              return ctn_leaky_relu(g, n[0], slope, o);
            },
            [slope](const std::vector<Arr> &x, ctn_dtype) {
              return ref_map1(x[0], [slope](double v) { return v > 0 ? v : slope * v; });
            }));
    cs.push_back(c);
  }
  {
    OpCase c = unary(
        "clamp",
        [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_clamp(g, n[0], -0.5, 0.5, o);
        },
        ref1([](double x) { return std::min(std::max(x, -0.5), 0.5); }), clamp_inputs());
    cs.push_back(c);
  }
  cs.push_back(unary("copy", named("copy"), ref1([](double x) { return x; }), uni(-3, 3)));

  cs.push_back(binary("add", bin(ctn_add), ref2([](double a, double b) { return a + b; }),
                      uni(-3, 3), uni(-3, 3)));
  cs.push_back(binary("sub", bin(ctn_sub), ref2([](double a, double b) { return a - b; }),
                      uni(-3, 3), uni(-3, 3)));
  cs.push_back(binary("mul", bin(ctn_mul), ref2([](double a, double b) { return a * b; }),
                      uni(-3, 3), uni(-3, 3)));
  cs.push_back(binary("div", bin(ctn_div), ref2([](double a, double b) { return a / b; }),
                      uni(-3, 3), away(-2, 2, 0.5)));
  cs.push_back(binary("pow", bin(ctn_pow), ref2([](double a, double b) { return std::pow(a, b); }),
                      uni(0.5, 2), uni(-2, 2)));
  cs.push_back(binary("maximum", named("maximum"),
                      ref2([](double a, double b) { return std::max(a, b); }), ints(-2, 2),
                      uni(-2, 2)));
  cs.push_back(binary("minimum", named("minimum"),
                      ref2([](double a, double b) { return std::min(a, b); }), ints(-2, 2),
                      uni(-2, 2)));

  // Comparisons on a few integer values, so ties (eq, le, ge) are frequent.
  auto to_bool = [](ctn_dtype) { return CTN_BOOL; };
  struct Cmp {
    const char *name;
    double (*f)(double, double);
  };
  const Cmp cmps[] = {{"eq", [](double a, double b) { return double(a == b); }},
                      {"ne", [](double a, double b) { return double(a != b); }},
                      {"lt", [](double a, double b) { return double(a < b); }},
                      {"le", [](double a, double b) { return double(a <= b); }},
                      {"gt", [](double a, double b) { return double(a > b); }},
                      {"ge", [](double a, double b) { return double(a >= b); }}};
  for (const Cmp &cmp : cmps) {
    std::string name = cmp.name;
    cs.push_back(binary(
        name,
        [name](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_compare(g, name.c_str(), n[0], n[1], o);
        },
        ref2(cmp.f), ints(-2, 2), ints(-2, 2), to_bool));
  }
  {
    OpCase c{"where", "where", {}};
    const std::vector<std::vector<Shape>> shapes = {
        {{2, 3}, {2, 3}, {2, 3}}, {{2, 1, 3}, {4, 3}, {}}, {{3}, {2, 3}, {2, 1}}, {{}, {}, {}}};
    for (const auto &s : shapes) c.variants.push_back(where_variant(s, uni(-3, 3)));
    cs.push_back(c);
  }
}

void add_casts(std::vector<OpCase> &cs) {
  OpCase c{"cast", "cast", {}};
  auto cast_to = [](int target) {  // target -1: the floating dtype under test
    return [target](ctn_graph *g, const Nodes &n, ctn_dtype fdt, ctn_node *o) {
      return ctn_cast(g, n[0], target < 0 ? fdt : static_cast<ctn_dtype>(target), o);
    };
  };
  auto cast_ref = [](int target) {
    return [target](const std::vector<Arr> &x, ctn_dtype fdt) {
      ctn_dtype t = target < 0 ? fdt : static_cast<ctn_dtype>(target);
      return ref_map1(x[0], [t](double v) { return round_to(v, t); });
    };
  };
  auto out_is = [](int target) {
    return [target](ctn_dtype fdt) { return target < 0 ? fdt : static_cast<ctn_dtype>(target); };
  };
  // Float -> every dtype. Float -> integer truncates toward zero (C and numpy); u8 only from
  // values in range; bool is x != 0.
  struct To {
    const char *label;
    int target;
    Gen gen;
  };
  const To tos[] = {{"->f32", CTN_F32, uni(-3, 3)},      {"->f64", CTN_F64, uni(-3, 3)},
                    {"->i32", CTN_I32, uni(-50, 50)},    {"->i64", CTN_I64, uni(-50, 50)},
                    {"->u8", CTN_U8, uni(0, 250)},       {"->bool", CTN_BOOL, with_zeros(uni(-2, 2), 0.4)},
                    // since 1.5: to nearest even (cpu, opencl, vulkan); i8 (cpu) only from values in range
                    {"->f16", CTN_F16, uni(-3, 3)},      {"->bf16", CTN_BF16, uni(-3, 3)},
                    {"->i8", CTN_I8, uni(-120, 120)}};
  for (const To &t : tos)
    for (const Shape &s : std::vector<Shape>{{}, {2, 3}}) {
      Variant v = variant(std::string("f") + t.label + " " + shape_label(s), {in(s, t.gen)},
                          cast_to(t.target), cast_ref(t.target));
      v.out_dtype = out_is(t.target);
      v.cpu_only = t.target == CTN_I8;
      c.variants.push_back(v);
    }
  // Every other dtype -> the float under test.
  struct From {
    const char *label;
    int source;
    Gen gen;
  };
  const From froms[] = {{"i32->f", CTN_I32, ints(-100, 100)},
                        {"i64->f", CTN_I64, ints(-100, 100)},
                        {"u8->f", CTN_U8, ints(0, 255)},
                        {"bool->f", CTN_BOOL, ints(0, 1)},
                        {"i8->f", CTN_I8, ints(-128, 127)}};
  for (const From &f : froms) {
    Variant v = variant(f.label, {in({2, 3}, f.gen, f.source)}, cast_to(-1), cast_ref(-1));
    v.cpu_only = f.source == CTN_I8;
    c.variants.push_back(v);
  }
  cs.push_back(c);
}

void add_matmul(std::vector<OpCase> &cs) {
  const MatmulCase mms[] = {{{3, 4}, {4, 5}, 0, 0},       {{4, 3}, {4, 5}, 1, 0},
                            {{3, 4}, {5, 4}, 0, 1},       {{4, 3}, {5, 4}, 1, 1},
                            {{1, 1}, {1, 1}, 0, 0},       {{1, 6}, {6, 1}, 0, 0},
                            {{3, 1}, {1, 4}, 0, 0},       {{2, 3, 4}, {2, 4, 2}, 0, 0},
                            {{2, 3, 4}, {4, 5}, 0, 0},    {{2, 1, 3, 4}, {3, 4, 2}, 0, 0},
                            {{2, 4, 3}, {1, 5, 4}, 1, 1}, {{3, 4}, {2, 2, 4, 3}, 0, 0}};
  OpCase c{"matmul", "matmul", {}};
  for (const MatmulCase &m : mms) c.variants.push_back(matmul_variant(m));
  cs.push_back(c);

  OpCase f{"matmul_bias_act", "matmul_bias_act", {}};
  struct Mba {
    Shape a, b;
    int ta, tb, act;
  };
  const Mba mbas[] = {{{3, 4}, {4, 5}, 0, 0, CTN_ACT_NONE}, {{3, 4}, {4, 5}, 0, 0, CTN_ACT_RELU},
                      {{3, 4}, {4, 5}, 0, 0, CTN_ACT_GELU}, {{4, 3}, {5, 4}, 1, 1, CTN_ACT_RELU},
                      {{1, 2}, {2, 1}, 0, 0, CTN_ACT_GELU}, {{2, 3, 4}, {4, 5}, 0, 0, CTN_ACT_RELU}};
  for (const Mba &m : mbas) {
    int ta = m.ta, tb = m.tb, act = m.act;
    int64_t n = tb ? m.b[m.b.size() - 2] : m.b.back();
    f.variants.push_back(variant(
        shape_label(m.a) + (ta ? "^T" : "") + "@" + shape_label(m.b) + (tb ? "^T" : "") +
            " act " + std::to_string(act),
        {in(m.a, uni(-1, 1)), in(m.b, uni(-1, 1)), in({n}, uni(-1, 1))},
        named("matmul_bias_act", attrs({ta, tb, act})),
        [ta, tb, act](const std::vector<Arr> &x, ctn_dtype) {
          Arr y = ref_matmul(x[0], x[1], ta != 0, tb != 0);
          y = ref_map2(y, x[2], [](double a, double b) { return a + b; });
          if (act == CTN_ACT_RELU) return ref_map1(y, [](double v) { return v > 0 ? v : 0.0; });
          if (act == CTN_ACT_GELU) return ref_map1(y, ref_gelu);
          return y;
        }));
  }
  cs.push_back(f);
}

void add_reductions(std::vector<OpCase> &cs) {
  const ReduceCase rs[] = {{{2, 3, 4}, {}, 0},      {{2, 3, 4}, {}, 1},      {{2, 3, 4}, {0}, 0},
                           {{2, 3, 4}, {-1}, 1},    {{2, 3, 4}, {0, 2}, 0},  {{2, 3, 4}, {1, -1}, 1},
                           {{2, 3, 4}, {0, 1, 2}, 0}, {{5}, {0}, 0},         {{}, {}, 0},
                           {{}, {}, 1},             {{1, 3, 1}, {0, 2}, 0},  {{2, 1, 3}, {1}, 1},
                           {{2, 1, 3}, {-3}, 0}};
  struct K {
    const char *name;
    Red kind;
    ReduceFn fn;
  };
  const K ks[] = {{"sum", Red::Sum, ctn_sum}, {"mean", Red::Mean, ctn_mean}, {"max", Red::Max, ctn_max}};
  for (const K &k : ks) {
    OpCase c{k.name, k.name, {}};
    for (const ReduceCase &r : rs) c.variants.push_back(reduce_variant(k.fn, k.kind, r, uni(-3, 3)));
    cs.push_back(c);
  }
}

}  // namespace

void add_shape_cases(std::vector<OpCase> &cs);      // forward_cases_shape.cpp
void add_composite_forward(std::vector<OpCase> &cs);  // composite_cases.cpp

const std::vector<OpCase> &forward_cases() {
  static const std::vector<OpCase> cases = collect_cases(
      {add_elementwise, add_casts, add_matmul, add_reductions, add_shape_cases, add_composite_forward});
  return cases;
}

}  // namespace conf
