// Composite ops (ops.h, "composite ops"): one row of kComposites per op (or per attribute
// setting) gives its forward cases (f32 and f64, against a double-precision reference, incl.
// large |x| where a naive formula overflows) and its gradient cases (f64, against central
// differences). The core adds the op's parts instead of a node of its own, so placement is
// checked as "every step on the backend under test" (OpCase::composite).
#include <algorithm>
#include <cmath>
#include <memory>

#include "case_helpers.hpp"

namespace conf {
namespace {

struct Composite {
  std::string row;              // matrix row: the op name, plus the attributes when given
  std::string op;
  std::vector<double> f;        // float attributes passed to ctn_op; {}: the op's defaults
  std::function<double(double)> ref;
  Gen gen;                      // forward inputs
  Gen smooth;                   // gradient inputs: away from kinks and poles
  std::vector<std::pair<std::string, Gen>> extra = {};  // more forward variants, shape [16]
};

// Uniform in [lo, hi] but at least `gap` away from each point of `kinks`.
Gen away_from(double lo, double hi, std::vector<double> kinks, double gap = 0.05) {
  return [=](Rng &r) {
    for (;;) {
      double x = std::uniform_real_distribution<double>(lo, hi)(r);
      bool ok = true;
      for (double k : kinks) ok = ok && std::fabs(x - k) >= gap;
      if (ok) return x;
    }
  };
}

double ref_softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

const std::vector<Composite> &composites() {
  static const std::vector<Composite> rows = {
      {"softsign", CTN_OP_SOFTSIGN, {}, [](double x) { return x / (1 + std::fabs(x)); },
       with_zeros(uni(-4, 4)), uni(-3, 3)},
      {"softplus", CTN_OP_SOFTPLUS, {}, ref_softplus, with_zeros(uni(-6, 6)), with_zeros(uni(-4, 4)),
       {{"x in [-60, -15]: tiny results", uni(-60, -15)}, {"x in [-9, -2]", uni(-9, -2)}}},
      {"elu", CTN_OP_ELU, {}, [](double x) { return x > 0 ? x : std::expm1(x); },
       with_zeros(uni(-4, 4)), with_zeros(away_from(-3, 3, {0}))},  // alpha 1: smooth at 0
      {"elu (alpha 0.5)", CTN_OP_ELU, {0.5}, [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); },
       with_zeros(uni(-4, 4)), away_from(-3, 3, {0})},
      {"selu", CTN_OP_SELU, {},
       [](double x) { return 1.0507009873554804934193349852946 * (x > 0 ? x : 1.6732632423543772848170429916717 * std::expm1(x)); },
       with_zeros(uni(-4, 4)), away_from(-3, 3, {0})},
      {"hardsigmoid", CTN_OP_HARDSIGMOID, {}, [](double x) { return std::clamp(x / 6 + 0.5, 0.0, 1.0); },
       with_zeros(uni(-5, 5)), away_from(-5, 5, {-3, 3})},
      {"hardsigmoid (alpha 0.2, beta 0.5)", CTN_OP_HARDSIGMOID, {0.2, 0.5},
       [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }, with_zeros(uni(-5, 5)),
       away_from(-5, 5, {-2.5, 2.5})},
      {"hardswish", CTN_OP_HARDSWISH, {}, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); },
       with_zeros(uni(-5, 5)), away_from(-5, 5, {-3, 3})},
      {"mish", CTN_OP_MISH, {}, [](double x) { return x * std::tanh(ref_softplus(x)); },
       with_zeros(uni(-6, 6)), uni(-4, 4), {{"x in [-60, -15]: tiny results", uni(-60, -15)}}},
      {"reciprocal", CTN_OP_RECIPROCAL, {}, [](double x) { return 1 / x; }, away(-4, 4, 0.2),
       away(-3, 3, 0.3)},
  };
  return rows;
}

Build build_of(const Composite &c) {
  if (c.f.empty()) return named(c.op);
  ctn_attrs a{};
  for (double v : c.f) a.f[a.nf++] = v;
  return named(c.op, a);
}

Ref ref_of(const Composite &c) {
  auto f = c.ref;
  return [f](const std::vector<Arr> &x, ctn_dtype) { return ref_map1(x[0], f); };
}

std::string label(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// Magnitudes where exp(x) overflows (f32 beyond 88, f64 beyond 709) or 1 + e^-|x| rounds to 1.
const Gen kLarge = choice({-1000, -100, -30, -5, 5, 30, 100, 1000});
const Gen kLargeSmooth = choice({-30, -20, -8, 8, 20, 30});

}  // namespace

void add_composite_forward(std::vector<OpCase> &cs) {
  for (const Composite &c : composites()) {
    OpCase oc{c.row, c.op, {}};
    oc.composite = true;
    for (const Shape &s : std::vector<Shape>{{}, {7}, {2, 3, 4}})
      oc.variants.push_back(variant(label(s), {in(s, c.gen)}, build_of(c), ref_of(c)));
    oc.variants.push_back(variant("large |x|", {in({16}, kLarge)}, build_of(c), ref_of(c)));
    for (const auto &[name, gen] : c.extra) {
      oc.variants.push_back(variant(name, {in({16}, gen)}, build_of(c), ref_of(c)));
      oc.variants.back().no_half = name.find("tiny") != std::string::npos;  // below f16's range
    }
    // A composite rounds each of its parts to the 16-bit float: a few roundings, not one.
    for (Variant &v : oc.variants) {
      v.tol16 = 1e-4;
      v.tolbf16 = 1e-3;
    }
    cs.push_back(std::move(oc));
  }
}

void add_composite_grad(std::vector<OpCase> &cs) {
  for (const Composite &c : composites()) {
    OpCase oc{"grad:" + c.row, c.op, {}};
    oc.composite = true;
    for (const Shape &s : std::vector<Shape>{{}, {2, 3}, {1, 4, 1}})
      oc.variants.push_back(variant(label(s), {in(s, c.smooth)}, build_of(c)));
    oc.variants.push_back(variant("large |x|", {in({6}, kLargeSmooth)}, build_of(c)));
    cs.push_back(std::move(oc));
  }
}

}  // namespace conf

namespace conf {
namespace {

// A composite whose part fails leaves the graph as it was. Needs a backend that runs some parts
// and not others: the mini backend of conformance-vendor-mini (add, mul, div, neg). In an eager
// graph on it, hardswish adds mul and add (they run), then clamp fails: every part goes again.
TEST(CompositeOps, FailedPartLeavesTheGraphAsItWas) {
  if (find_backend("mini") == nullptr || !find_backend("mini")->available)
    GTEST_SKIP() << "needs the mini test backend (meson test conformance-vendor-mini)";
  ASSERT_EQ(ctn_context_set_backends(context(), "mini"), CTN_OK) << ctn_last_error();
  ctn_graph *g = nullptr;
  ASSERT_EQ(ctn_graph_create(context(), CTN_GRAPH_EAGER, &g), CTN_OK) << ctn_last_error();
  std::unique_ptr<ctn_graph, void (*)(ctn_graph *)> guard(g, ctn_graph_release);
  std::unique_ptr<ctn_tensor, void (*)(ctn_tensor *)> xt(make_tensor(CTN_F32, {4}, {-4, -1, 0.5, 4}),
                                                        ctn_tensor_release);
  ctn_node x = CTN_NODE_NONE, y = 777;
  CTN_ASSERT_OK(ctn_variable(g, "x", xt.get(), &x));
  uint32_t before = 0, after = 0;
  CTN_ASSERT_OK(ctn_graph_node_count(g, &before));
  ctn_status s = ctn_op(g, CTN_OP_HARDSWISH, 1, &x, nullptr, &y);
  EXPECT_EQ(s, CTN_ERR_UNSUPPORTED) << status_text(s);
  EXPECT_NE(std::string(ctn_last_error()).find("clamp"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(y, 777u) << "a failed call writes no output";
  CTN_ASSERT_OK(ctn_graph_node_count(g, &after));
  EXPECT_EQ(after, before) << "the parts that ran before the failure are removed";
  // A composite made of ops the backend runs works there: reciprocal is div(1, x).
  CTN_ASSERT_OK(ctn_op(g, CTN_OP_RECIPROCAL, 1, &x, nullptr, &y));
  const char *ran = nullptr;
  CTN_ASSERT_OK(ctn_graph_node_backend(g, y, &ran));
  EXPECT_EQ(std::string(ran), "mini");
  ctn_tensor *yt = nullptr;
  CTN_ASSERT_OK(ctn_graph_value(g, y, &yt));
  Arr r = read_tensor(yt);
  ctn_tensor_release(yt);
  EXPECT_EQ(r.v, (std::vector<double>{-0.25, -1, 2, 0.25}));
}

}  // namespace
}  // namespace conf
