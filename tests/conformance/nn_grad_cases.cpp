// Finite-difference gradient cases (f64) of the neural-network ops: every differentiable input,
// including the second-order rules of the convolution adjoints (used by conv_transpose2d's
// gradients and double backward). Shapes stay tiny: each element costs two plan runs, and the
// suite also runs under qemu.
#include "nn_cases.hpp"

namespace conf {
namespace {

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

Build conv_build(const ConvP &p) {
  return [p](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
    return ctn_conv2d(g, n[0], n[1], static_cast<int32_t>(p.sh), static_cast<int32_t>(p.sw), static_cast<int32_t>(p.ph),
                      static_cast<int32_t>(p.pw), static_cast<int32_t>(p.dh), static_cast<int32_t>(p.dw),
                      static_cast<int32_t>(p.g), o);
  };
}

void add_conv(std::vector<OpCase> &cs) {
  struct C {
    Shape x, w;
    ConvP p;
  };
  const C convs[] = {{{2, 2, 4, 4}, {3, 2, 3, 3}, ConvP{}},
                     {{1, 2, 5, 4}, {2, 2, 3, 2}, ConvP{2, 1, 1, 1, 1, 1, 1}},
                     {{1, 1, 5, 5}, {2, 1, 2, 2}, ConvP{1, 1, 1, 0, 2, 2, 1}},
                     {{1, 4, 3, 4}, {4, 2, 2, 2}, ConvP{1, 2, 1, 1, 1, 1, 2}},
                     {{2, 3, 3, 3}, {2, 3, 1, 1}, ConvP{}}};
  OpCase fwd{"grad:conv2d", "conv2d", {}}, gin{"grad:conv2d_grad_input", "conv2d_grad_input", {}},
      gw{"grad:conv2d_grad_weight", "conv2d_grad_weight", {}};
  for (const C &c : convs) {
    const ConvP p = c.p;
    const std::string label = shape_label(c.x) + "*" + shape_label(c.w) + " " + p.label();
    fwd.variants.push_back(variant(label, {in(c.x, uni(-1, 1)), in(c.w, uni(-1, 1))}, conv_build(p)));
    const Shape dy = {c.x[0], c.w[0], out_size(c.x[2], c.w[2], p.sh, p.ph, p.dh),
                      out_size(c.x[3], c.w[3], p.sw, p.pw, p.dw)};
    gin.variants.push_back(variant(label, {in(dy, uni(-1, 1)), in(c.w, uni(-1, 1))},
                                   named("conv2d_grad_input", p.attrs({c.x[2], c.x[3]}))));
    gw.variants.push_back(variant(label, {in(c.x, uni(-1, 1)), in(dy, uni(-1, 1))},
                                  named("conv2d_grad_weight", p.attrs({c.w[2], c.w[3]}))));
  }
  cs.push_back(fwd);
  cs.push_back(gin);
  cs.push_back(gw);

  const ConvTCase ts[] = {{{1, 2, 3, 3}, {2, 2, 2, 2}, ConvP{}, 0, 0},
                          {{2, 2, 2, 3}, {2, 1, 3, 2}, ConvP{2, 2, 1, 0, 1, 1, 1}, 1, 1},
                          {{1, 4, 2, 2}, {4, 1, 2, 2}, ConvP{2, 1, 0, 1, 1, 2, 2}, 1, 0}};
  OpCase tc{"grad:conv_transpose2d", "conv_transpose2d", {}};
  for (const ConvTCase &t : ts) tc.variants.push_back(conv_transpose_variant(t));
  cs.push_back(tc);
}

void add_pool(std::vector<OpCase> &cs) {
  struct P {
    Shape x;
    PoolP p;
  };
  const P ps[] = {{{1, 2, 4, 4}, PoolP{}}, {{1, 1, 5, 4}, PoolP{3, 2, 2, 1, 1, 1, false}}, {{2, 1, 3, 5}, PoolP{2, 2, 1, 2, 1, 0, false}}};
  OpCase mx{"grad:max_pool2d", "max_pool2d", {}}, av{"grad:avg_pool2d", "avg_pool2d", {}},
      ag{"grad:avg_pool2d_grad", "avg_pool2d_grad", {}};
  for (const P &c : ps) {
    // Continuous inputs: ties (where the max is not differentiable) have probability 0, and
    // the values are far enough apart for a 1e-6 step.
    PoolP p = c.p;
    mx.variants.push_back(variant(shape_label(c.x) + " " + p.label(), {in(c.x, uni(-2, 2))},
                                  [p](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                    return ctn_max_pool2d(g, n[0], static_cast<int32_t>(p.kh), static_cast<int32_t>(p.kw),
                                                          static_cast<int32_t>(p.sh), static_cast<int32_t>(p.sw),
                                                          static_cast<int32_t>(p.ph), static_cast<int32_t>(p.pw), o);
                                  }));
    for (bool incl : {false, true}) {
      p.include_pad = incl;
      av.variants.push_back(variant(shape_label(c.x) + " " + p.label(), {in(c.x, uni(-2, 2))},
                                    [p](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                      return ctn_avg_pool2d(g, n[0], static_cast<int32_t>(p.kh),
                                                            static_cast<int32_t>(p.kw), static_cast<int32_t>(p.sh),
                                                            static_cast<int32_t>(p.sw), static_cast<int32_t>(p.ph),
                                                            static_cast<int32_t>(p.pw), p.include_pad, o);
                                    }));
      const Shape ys = {c.x[0], c.x[1], (c.x[2] + 2 * p.ph - p.kh) / p.sh + 1, (c.x[3] + 2 * p.pw - p.kw) / p.sw + 1};
      ag.variants.push_back(variant(shape_label(ys) + " " + p.label(), {in(ys, uni(-2, 2))},
                                    named("avg_pool2d_grad", p.attrs(true, {c.x[2], c.x[3]}))));
    }
  }
  cs.push_back(mx);
  cs.push_back(av);
  cs.push_back(ag);
}

void add_norm(std::vector<OpCase> &cs) {
  const double eps = 1e-3;
  OpCase bn{"grad:batch_norm", "batch_norm", {}}, bi{"grad:batch_norm_inference", "batch_norm_inference", {}};
  for (const Shape &s : std::vector<Shape>{{4, 3}, {2, 2, 2, 3}}) {
    const Shape c = {s[1]};
    bn.variants.push_back(variant(shape_label(s), {in(s, uni(-2, 2)), in(c, uni(0.5, 2)), in(c, uni(-1, 1))},
                                  [eps](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                    return ctn_batch_norm(g, n[0], n[1], n[2], eps, o);
                                  }));
    bi.variants.push_back(variant(
        shape_label(s), {in(s, uni(-2, 2)), in(c, uni(0.5, 2)), in(c, uni(-1, 1)), in(c, uni(-1, 1)), in(c, uni(0.3, 2))},
        [eps](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_batch_norm_inference(g, n[0], n[1], n[2], n[3], n[4], eps, o);
        }));
  }
  cs.push_back(bn);
  cs.push_back(bi);
  OpCase ln{"grad:layer_norm", "layer_norm", {}};
  struct L {
    Shape x;
    int axis;
  };
  for (const L &l : {L{{3, 4}, 1}, L{{2, 2, 3}, 1}, L{{2, 3}, 0}}) {
    const int axis = l.axis;
    const Shape ps(l.x.begin() + axis, l.x.end());
    ln.variants.push_back(variant(shape_label(l.x) + " axis " + std::to_string(axis),
                                  {in(l.x, uni(-2, 2)), in(ps, uni(0.5, 2)), in(ps, uni(-1, 1))},
                                  [axis, eps](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                    return ctn_layer_norm(g, n[0], n[1], n[2], axis, eps, o);
                                  }));
  }
  cs.push_back(ln);
}

void add_misc(std::vector<OpCase> &cs) {
  OpCase dr{"grad:dropout", "dropout", {}};
  dr.variants.push_back(variant("[3,5] p 0.4", {in({3, 5}, uni(-2, 2)), in({}, ints(0, 1000), CTN_I64)},
                                [](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
                                  return ctn_dropout(g, n[0], n[1], 0.4, 11, o);
                                }));
  cs.push_back(dr);
  OpCase em{"grad:embedding", "embedding", {}};
  em.variants.push_back(variant("V4 D3 ids [5] i64 (repeats)", {in({4, 3}, uni(-2, 2)), in({5}, ints(0, 3), CTN_I64)},
                                bin(ctn_embedding)));
  em.variants.push_back(variant("V3 D2 ids [2,2] i32", {in({3, 2}, uni(-2, 2)), in({2, 2}, ints(0, 2), CTN_I32)},
                                bin(ctn_embedding)));
  cs.push_back(em);
  OpCase eg{"grad:embedding_grad", "embedding_grad", {}};
  eg.variants.push_back(variant("V4 ids [3] dy [3,2]", {in({3}, ints(0, 3), CTN_I32), in({3, 2}, uni(-2, 2))},
                                named("embedding_grad", attrs({4}))));
  cs.push_back(eg);
}

}  // namespace

const std::vector<OpCase> &nn_grad_cases() {
  static const std::vector<OpCase> cases = collect_cases({add_conv, add_pool, add_norm, add_misc});
  return cases;
}

}  // namespace conf
