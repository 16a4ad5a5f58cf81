// Optimizer step ops (sgd_velocity, sgd_apply, adam_moment1/2, adam_apply) on every backend
// against a naive double reference. They are not differentiable: forward cases only. Shapes
// include one large enough for the CPU kernels' parallel path.
#include <cmath>

#include "case_helpers.hpp"

namespace conf {
namespace {

const std::vector<Shape> kShapes = {{}, {7}, {2, 3, 4}, {181, 200}};

std::string shape_label(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

InSpec lr_in() { return in({}, uni(0.01, 0.3)); }
InSpec step_in() { return in({}, ints(1, 12), CTN_I64); }

using Elem = std::function<double(const std::vector<double> &)>;

// Reference over the first `n_elem` inputs (same shape); later inputs are 0-d scalars.
Ref elementwise_ref(size_t n_elem, Elem f) {
  return [n_elem, f](const std::vector<Arr> &x, ctn_dtype) {
    Arr out = make_arr(x[0].shape);
    std::vector<double> args(x.size());
    for (size_t i = 0; i < out.v.size(); ++i) {
      for (size_t k = 0; k < x.size(); ++k) args[k] = k < n_elem ? x[k].v[i] : x[k].v[0];
      out.v[i] = f(args);
    }
    return out;
  };
}

OpCase make_case(const std::string &row, const char *op, size_t n_elem, std::vector<Gen> gens,
                 std::vector<InSpec> scalars, std::vector<std::pair<std::string, ctn_attrs>> attr_sets,
                 std::function<Elem(const ctn_attrs &)> ref) {
  OpCase c{row, op, {}};
  for (const auto &[alabel, a] : attr_sets)
    for (const Shape &s : kShapes) {
      std::vector<InSpec> ins;
      for (size_t k = 0; k < n_elem; ++k) ins.push_back(in(s, gens[k]));
      for (const InSpec &sc : scalars) ins.push_back(sc);
      c.variants.push_back(variant(shape_label(s) + " " + alabel, ins, named(op, a), elementwise_ref(n_elem, ref(a))));
    }
  return c;
}

}  // namespace

const std::vector<OpCase> &optim_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> cs;
    Gen any = uni(-2, 2), pos = uni(0, 1.5);
    cs.push_back(make_case("sgd_velocity", CTN_OP_SGD_VELOCITY, 3, {any, any, any}, {},
                           {{"mu0.9 wd0", attrs({}, {0.9, 0.0})}, {"mu0 wd0.01", attrs({}, {0.0, 0.01})}},
                           [](const ctn_attrs &a) -> Elem {
                             double mu = a.f[0], wd = a.f[1];
                             return [mu, wd](const std::vector<double> &x) { return mu * x[0] + (x[1] + wd * x[2]); };
                           }));
    cs.push_back(make_case("sgd_apply", CTN_OP_SGD_APPLY, 3, {any, any, any}, {lr_in()},
                           {{"plain", attrs({0}, {0.9, 0.0})}, {"nesterov wd", attrs({1}, {0.8, 0.05})}},
                           [](const ctn_attrs &a) -> Elem {
                             double mu = a.f[0], wd = a.f[1];
                             bool nes = a.i[0] != 0;
                             return [mu, wd, nes](const std::vector<double> &x) {
                               double w = x[0], v = x[1], g = x[2], lr = x[3];
                               return w - lr * (nes ? (g + wd * w) + mu * v : v);
                             };
                           }));
    cs.push_back(make_case("adam_moment1", CTN_OP_ADAM_MOMENT1, 2, {any, any}, {}, {{"b0.9", attrs({}, {0.9})}},
                           [](const ctn_attrs &a) -> Elem {
                             double b = a.f[0];
                             return [b](const std::vector<double> &x) { return b * x[0] + (1 - b) * x[1]; };
                           }));
    cs.push_back(make_case("adam_moment2", CTN_OP_ADAM_MOMENT2, 2, {pos, any}, {}, {{"b0.999", attrs({}, {0.999})}},
                           [](const ctn_attrs &a) -> Elem {
                             double b = a.f[0];
                             return [b](const std::vector<double> &x) { return b * x[0] + (1 - b) * x[1] * x[1]; };
                           }));
    cs.push_back(make_case(
        "adam_apply", CTN_OP_ADAM_APPLY, 3, {any, any, pos}, {lr_in(), step_in()},
        {{"adam", attrs({0}, {0.9, 0.999, 1e-8, 0.1})}, {"adamw", attrs({1}, {0.8, 0.99, 1e-3, 0.1})}},
        [](const ctn_attrs &a) -> Elem {
          double b1 = a.f[0], b2 = a.f[1], eps = a.f[2], wd = a.f[3];
          bool dec = a.i[0] != 0;
          return [=](const std::vector<double> &x) {
            double w = x[0], m = x[1], v = x[2], lr = x[3], t = x[4];
            double mh = m / (1 - std::pow(b1, t)), vh = v / (1 - std::pow(b2, t));
            return w - lr * (mh / (std::sqrt(vh) + eps) + (dec ? wd * w : 0.0));
          };
        }));
    return cs;
  }();
  return cases;
}

namespace {

class OptimForward : public CaseTest {};

TEST_P(OptimForward, MatchesReference) { check_forward(optim_cases()); }

INSTANTIATE_TEST_SUITE_P(Optim, OptimForward, ::testing::ValuesIn(case_params(optim_cases())),
                         case_param_name(optim_cases));

}  // namespace
}  // namespace conf
