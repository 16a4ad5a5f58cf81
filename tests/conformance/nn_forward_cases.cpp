// Forward cases of the neural-network ops against the direct-loop references: strides, padding,
// dilation, groups, odd and non-square sizes, 1x1 kernels, batch 1.
#include "nn_cases.hpp"

namespace conf {
namespace {

struct ConvCase {
  Shape x, w;
  ConvP p;
};

// x [N,C,H,W], w [O,C/g,KH,KW].
const std::vector<ConvCase> &conv_cases() {
  static const std::vector<ConvCase> cs = {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, ConvP{}},
      {{1, 2, 7, 6}, {3, 2, 3, 2}, ConvP{2, 1, 1, 0, 1, 1, 1}},
      {{2, 2, 6, 7}, {2, 2, 2, 3}, ConvP{1, 2, 1, 2, 2, 1, 1}},
      {{1, 4, 5, 6}, {6, 2, 3, 3}, ConvP{1, 1, 1, 1, 1, 1, 2}},
      {{2, 4, 4, 4}, {4, 1, 3, 3}, ConvP{2, 2, 1, 1, 1, 1, 4}},  // depthwise
      {{2, 3, 4, 5}, {5, 3, 1, 1}, ConvP{}},                     // pointwise, no im2col
      {{1, 1, 9, 8}, {4, 1, 5, 5}, ConvP{1, 1, 2, 2, 1, 1, 1}},  // the CNN's first layer, small
      {{1, 3, 5, 5}, {2, 3, 5, 5}, ConvP{1, 1, 0, 0, 1, 1, 1}},  // 1x1 output
  };
  return cs;
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

void add_conv(std::vector<OpCase> &cs) {
  OpCase fwd{"conv2d", "conv2d", {}}, gin{"conv2d_grad_input", "conv2d_grad_input", {}},
      gw{"conv2d_grad_weight", "conv2d_grad_weight", {}};
  for (const ConvCase &k : conv_cases()) {
    const ConvP p = k.p;
    const std::string label = shape_label(k.x) + "*" + shape_label(k.w) + " " + p.label();
    fwd.variants.push_back(variant(
        label, {in(k.x, uni(-1, 1)), in(k.w, uni(-1, 1))},
        [p](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_conv2d(g, n[0], n[1], static_cast<int32_t>(p.sh), static_cast<int32_t>(p.sw),
                            static_cast<int32_t>(p.ph), static_cast<int32_t>(p.pw), static_cast<int32_t>(p.dh),
                            static_cast<int32_t>(p.dw), static_cast<int32_t>(p.g), o);
        },
        [p](const std::vector<Arr> &x, ctn_dtype) { return ref_conv2d(x[0], x[1], p); }));
    const Shape dy = {k.x[0], k.w[0], out_size(k.x[2], k.w[2], p.sh, p.ph, p.dh),
                      out_size(k.x[3], k.w[3], p.sw, p.pw, p.dw)};
    const int64_t h = k.x[2], wd = k.x[3], kh = k.w[2], kw = k.w[3];
    gin.variants.push_back(variant(label, {in(dy, uni(-1, 1)), in(k.w, uni(-1, 1))},
                                   named("conv2d_grad_input", p.attrs({h, wd})),
                                   [p, h, wd](const std::vector<Arr> &x, ctn_dtype) {
                                     return ref_conv2d_grad_input(x[0], x[1], p, h, wd);
                                   }));
    gw.variants.push_back(variant(label, {in(k.x, uni(-1, 1)), in(dy, uni(-1, 1))},
                                  named("conv2d_grad_weight", p.attrs({kh, kw})),
                                  [p, kh, kw](const std::vector<Arr> &x, ctn_dtype) {
                                    return ref_conv2d_grad_weight(x[0], x[1], p, kh, kw);
                                  }));
  }
  cs.push_back(fwd);
  cs.push_back(gin);
  cs.push_back(gw);

  // conv2d_bias_act (1.5, what the fusion pass emits): every case once per activation (sigmoid,
  // silu and hardswish since 1.6); conv2d_bias_add_act (1.6) the same with a residual [N,O,Ho,Wo].
  OpCase fused{"conv2d_bias_act", "conv2d_bias_act", {}}, res{"conv2d_bias_add_act", "conv2d_bias_add_act", {}};
  const char *const act_names[] = {"none", "relu", "gelu", "clamp", "sigmoid", "silu", "hardswish"};
  for (const ConvCase &k : conv_cases())
    for (int act = CTN_ACT_NONE; act <= CTN_ACT_HARDSWISH; ++act)
      for (OpCase *oc : {&fused, &res}) {
        const ConvP p = k.p;
        const bool add = oc == &res;
        ctn_attrs a = p.attrs({act});
        a.nf = 2;
        a.f[0] = -0.5, a.f[1] = 0.7;  // clamp bounds inside the outputs' range
        const Shape y = {k.x[0], k.w[0], out_size(k.x[2], k.w[2], p.sh, p.ph, p.dh), out_size(k.x[3], k.w[3], p.sw, p.pw, p.dw)};
        std::vector<InSpec> ins = {in(k.x, uni(-2, 2)), in(k.w, uni(-1, 1)), in({k.w[0]}, uni(-1, 1))};
        if (add) ins.push_back(in(y, uni(-2, 2)));
        oc->variants.push_back(variant(
            shape_label(k.x) + "*" + shape_label(k.w) + " " + p.label() + " act " + act_names[act], ins,
            named(oc->op.c_str(), a), [p, act, add](const std::vector<Arr> &x, ctn_dtype) {
              Arr y = ref_conv2d(x[0], x[1], p);
              const int64_t o = y.shape[1], hw = y.shape[2] * y.shape[3];
              for (size_t i = 0; i < y.v.size(); ++i) {
                double v = y.v[i] + x[2].v[static_cast<size_t>((static_cast<int64_t>(i) / hw) % o)];
                if (add) v += x[3].v[i];
                if (act == CTN_ACT_RELU) v = v > 0 ? v : 0.0;
                if (act == CTN_ACT_GELU) v = ref_gelu(v);
                if (act == CTN_ACT_CLAMP) v = v < -0.5 ? -0.5 : v > 0.7 ? 0.7 : v;
                if (act == CTN_ACT_SIGMOID) v = 1 / (1 + std::exp(-v));
                if (act == CTN_ACT_SILU) v = v / (1 + std::exp(-v));
                if (act == CTN_ACT_HARDSWISH) v = v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
                y.v[i] = v;
              }
              return y;
            }));
      }
  cs.push_back(fused);
  cs.push_back(res);

  const ConvTCase ts[] = {{{2, 3, 4, 4}, {3, 2, 3, 3}, ConvP{}, 0, 0},
                          {{1, 2, 3, 4}, {2, 3, 3, 2}, ConvP{2, 2, 1, 0, 1, 1, 1}, 1, 0},
                          {{1, 4, 3, 3}, {4, 1, 2, 3}, ConvP{2, 1, 0, 1, 1, 2, 2}, 1, 0},
                          {{2, 2, 3, 2}, {2, 2, 2, 2}, ConvP{3, 2, 1, 1, 2, 1, 1}, 2, 1}};
  OpCase tc{"conv_transpose2d", "conv_transpose2d", {}};
  for (const ConvTCase &t : ts) {
    const ConvP p = t.p;
    const int64_t oph = t.oph, opw = t.opw;
    tc.variants.push_back(conv_transpose_variant(t, [p, oph, opw](const std::vector<Arr> &x, ctn_dtype) {
      return ref_conv_transpose2d(x[0], x[1], p, oph, opw);
    }));
  }
  cs.push_back(tc);
}

void add_pool(std::vector<OpCase> &cs) {
  struct P {
    Shape x;
    PoolP p;
  };
  const P ps[] = {{{2, 3, 6, 6}, PoolP{}},
                  {{1, 2, 5, 7}, PoolP{}},  // 2x2/2 fast path with an odd height and width
                  {{1, 2, 7, 5}, PoolP{3, 3, 2, 2, 1, 1, false}},
                  {{2, 1, 5, 6}, PoolP{2, 3, 1, 2, 1, 1, true}},
                  {{1, 2, 4, 4}, PoolP{4, 4, 4, 4, 0, 0, false}},
                  {{1, 1, 5, 5}, PoolP{3, 1, 1, 1, 0, 0, false}},
                  // issue 25's separable kernels: 1x1, 5x5/3 padded, 4x5 with strides 1,3,
                  // many channels (the pool's split), global, uneven strides and paddings
                  {{2, 5, 9, 11}, PoolP{1, 1, 1, 1, 0, 0, false}},
                  {{1, 3, 10, 9}, PoolP{5, 5, 3, 3, 2, 2, false}},
                  {{1, 2, 8, 13}, PoolP{4, 5, 1, 3, 2, 2, false}},
                  {{2, 33, 9, 8}, PoolP{3, 3, 2, 2, 1, 1, false}},
                  {{1, 2, 6, 7}, PoolP{6, 7, 1, 1, 0, 0, false}},
                  {{3, 2, 11, 7}, PoolP{2, 4, 3, 1, 0, 2, false}}};
  OpCase mx{"max_pool2d", "max_pool2d", {}}, mg{"max_pool2d_grad", "max_pool2d_grad", {}},
      av{"avg_pool2d", "avg_pool2d", {}}, ag{"avg_pool2d_grad", "avg_pool2d_grad", {}};
  for (const P &c : ps) {
    const PoolP p = c.p;
    const std::string label = shape_label(c.x) + " " + p.label();
    const Shape ys = {c.x[0], c.x[1], (c.x[2] + 2 * p.ph - p.kh) / p.sh + 1, (c.x[3] + 2 * p.pw - p.kw) / p.sw + 1};
    const int64_t h = c.x[2], w = c.x[3];
    // Few distinct values: ties inside windows exercise the "first maximum" rule.
    mx.variants.push_back(variant(
        label, {in(c.x, ints(-3, 3))},
        [p](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_max_pool2d(g, n[0], static_cast<int32_t>(p.kh), static_cast<int32_t>(p.kw),
                                static_cast<int32_t>(p.sh), static_cast<int32_t>(p.sw), static_cast<int32_t>(p.ph),
                                static_cast<int32_t>(p.pw), o);
        },
        [p](const std::vector<Arr> &x, ctn_dtype) { return ref_max_pool2d(x[0], p); }));
    mg.variants.push_back(variant(
        label, {in(c.x, ints(-3, 3)), in(ys, uni(-1, 1))},
        [p](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          // y is the true pooled value, as in a backward pass.
          ctn_node y = CTN_NODE_NONE;
          ctn_status s = ctn_max_pool2d(g, n[0], static_cast<int32_t>(p.kh), static_cast<int32_t>(p.kw),
                                        static_cast<int32_t>(p.sh), static_cast<int32_t>(p.sw),
                                        static_cast<int32_t>(p.ph), static_cast<int32_t>(p.pw), &y);
          if (s != CTN_OK) return s;
          ctn_attrs a = p.attrs(false);
          ctn_node ins[3] = {n[0], y, n[1]};
          return ctn_op(g, "max_pool2d_grad", 3, ins, &a, o);
        },
        [p](const std::vector<Arr> &x, ctn_dtype) { return ref_max_pool2d_grad(x[0], x[1], p); }));
    for (bool incl : {false, true}) {
      PoolP q = p;
      q.include_pad = incl;
      av.variants.push_back(variant(
          shape_label(c.x) + " " + q.label(), {in(c.x, uni(-2, 2))},
          [q](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
            return ctn_avg_pool2d(g, n[0], static_cast<int32_t>(q.kh), static_cast<int32_t>(q.kw),
                                  static_cast<int32_t>(q.sh), static_cast<int32_t>(q.sw), static_cast<int32_t>(q.ph),
                                  static_cast<int32_t>(q.pw), q.include_pad, o);
          },
          [q](const std::vector<Arr> &x, ctn_dtype) { return ref_avg_pool2d(x[0], q); }));
      ag.variants.push_back(variant(shape_label(ys) + "->" + shape_label(c.x) + " " + q.label(), {in(ys, uni(-2, 2))},
                                    named("avg_pool2d_grad", q.attrs(true, {h, w})),
                                    [q, h, w](const std::vector<Arr> &x, ctn_dtype) {
                                      return ref_avg_pool2d_grad(x[0], q, h, w);
                                    }));
    }
  }
  cs.push_back(mx);
  cs.push_back(mg);
  cs.push_back(av);
  cs.push_back(ag);
}

void add_norm(std::vector<OpCase> &cs) {
  const std::vector<Shape> bn_shapes = {{4, 3}, {2, 3, 4, 5}, {3, 2, 7}, {1, 2, 1, 1, 3}};
  const double eps = 1e-5;
  OpCase bn{"batch_norm", "batch_norm", {}}, bgi{"batch_norm_grad_input", "batch_norm_grad_input", {}},
      bgg{"batch_norm_grad_gamma", "batch_norm_grad_gamma", {}},
      bi{"batch_norm_inference", "batch_norm_inference", {}}, bs{"batch_norm_stats", CTN_OP_BATCH_NORM_STATS, {}},
      br{"batch_norm_relu", CTN_OP_BATCH_NORM_RELU, {}};
  for (const Shape &s : bn_shapes) {
    const Shape c = {s[1]};
    bn.variants.push_back(variant(
        shape_label(s), {in(s, uni(-2, 3)), in(c, uni(0.5, 2)), in(c, uni(-1, 1))},
        [eps](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) { return ctn_batch_norm(g, n[0], n[1], n[2], eps, o); },
        [eps](const std::vector<Arr> &x, ctn_dtype) { return ref_batch_norm(x[0], x[1], x[2], eps); }));
    bgi.variants.push_back(variant(shape_label(s), {in(s, uni(-2, 3)), in(c, uni(0.5, 2)), in(s, uni(-1, 1))},
                                   named("batch_norm_grad_input", attrs({}, {eps})),
                                   [eps](const std::vector<Arr> &x, ctn_dtype) {
                                     return ref_batch_norm_grad_input(x[0], x[1], x[2], eps);
                                   }));
    bgg.variants.push_back(variant(shape_label(s), {in(s, uni(-2, 3)), in(s, uni(-1, 1))},
                                   named("batch_norm_grad_gamma", attrs({}, {eps})),
                                   [eps](const std::vector<Arr> &x, ctn_dtype) {
                                     return ref_batch_norm_grad_gamma(x[0], x[1], eps);
                                   }));
    bi.variants.push_back(variant(
        shape_label(s), {in(s, uni(-2, 3)), in(c, uni(0.5, 2)), in(c, uni(-1, 1)), in(c, uni(-1, 1)), in(c, uni(0.2, 2))},
        [eps](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_batch_norm_inference(g, n[0], n[1], n[2], n[3], n[4], eps, o);
        },
        [eps](const std::vector<Arr> &x, ctn_dtype) { return ref_batch_norm(x[0], x[1], x[2], eps, &x[3], &x[4]); }));
    br.variants.push_back(variant(shape_label(s), {in(s, uni(-2, 3)), in(c, uni(0.5, 2)), in(c, uni(-1, 1))},
                                  named(CTN_OP_BATCH_NORM_RELU, attrs({}, {eps})), [eps](const std::vector<Arr> &x, ctn_dtype) {
                                    Arr y = ref_batch_norm(x[0], x[1], x[2], eps);
                                    for (double &v : y.v) v = v > 0 ? v : 0;
                                    return y;
                                  }));
    bs.variants.push_back(variant(shape_label(s), {in(s, uni(-2, 3))}, named(CTN_OP_BATCH_NORM_STATS),
                                  [](const std::vector<Arr> &x, ctn_dtype) { return ref_batch_norm_stats(x[0]); }));
  }
  // Far from zero (|mean| >> std): the one-sweep statistics must not cancel.
  bs.variants.push_back(variant("[8,3,6,6] x in [1000, 1001]", {in({8, 3, 6, 6}, uni(1000, 1001))},
                                named(CTN_OP_BATCH_NORM_STATS),
                                [](const std::vector<Arr> &x, ctn_dtype) { return ref_batch_norm_stats(x[0]); }));
  cs.push_back(bn);
  cs.push_back(bgi);
  cs.push_back(bgg);
  cs.push_back(bi);
  // Only the CPU has a batch_norm_stats kernel; a plan for another backend computes it with graph
  // ops (compile/rewrite.cpp), which tests/vulkan and tests/placement train through.
  for (Variant &v : bs.variants) v.cpu_only = true;
  cs.push_back(bs);
  cs.push_back(br);

  struct L {
    Shape x;
    int axis;
  };
  const L ls[] = {{{3, 8}, 1}, {{2, 3, 4}, 1}, {{2, 3, 4}, -1}, {{5}, 0}, {{2, 2, 3}, 0}};
  OpCase ln{"layer_norm", "layer_norm", {}}, lgi{"layer_norm_grad_input", "layer_norm_grad_input", {}},
      lgg{"layer_norm_grad_gamma", "layer_norm_grad_gamma", {}};
  for (const L &l : ls) {
    const int axis = l.axis;
    const int a = axis < 0 ? axis + static_cast<int>(l.x.size()) : axis;
    const Shape ps(l.x.begin() + a, l.x.end());
    const std::string label = shape_label(l.x) + " axis " + std::to_string(axis);
    ln.variants.push_back(variant(
        label, {in(l.x, uni(-2, 3)), in(ps, uni(0.5, 2)), in(ps, uni(-1, 1))},
        [axis, eps](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
          return ctn_layer_norm(g, n[0], n[1], n[2], axis, eps, o);
        },
        [axis, eps](const std::vector<Arr> &x, ctn_dtype) { return ref_layer_norm(x[0], x[1], x[2], axis, eps); }));
    lgi.variants.push_back(variant(label, {in(l.x, uni(-2, 3)), in(ps, uni(0.5, 2)), in(l.x, uni(-1, 1))},
                                   named("layer_norm_grad_input", attrs({axis}, {eps})),
                                   [axis, eps](const std::vector<Arr> &x, ctn_dtype) {
                                     return ref_layer_norm_grad_input(x[0], x[1], x[2], axis, eps);
                                   }));
    lgg.variants.push_back(variant(label, {in(l.x, uni(-2, 3)), in(l.x, uni(-1, 1))},
                                   named("layer_norm_grad_gamma", attrs({axis}, {eps})),
                                   [axis, eps](const std::vector<Arr> &x, ctn_dtype) {
                                     return ref_layer_norm_grad_gamma(x[0], x[1], axis, eps);
                                   }));
  }
  cs.push_back(ln);
  cs.push_back(lgi);
  cs.push_back(lgg);
}

void add_misc(std::vector<OpCase> &cs) {
  OpCase dr{"dropout", "dropout", {}};
  struct D {
    Shape x;
    double p;
    int64_t seed;
  };
  for (const D &d : {D{{3, 50}, 0.5, 7}, D{{2, 3, 4}, 0.1, -3}, D{{}, 0.3, 1}, D{{40}, 0.0, 5}, D{{7, 9}, 0.9, 123456789}}) {
    const double p = d.p;
    const int64_t seed = d.seed;
    Variant v = variant(
        shape_label(d.x) + " p " + std::to_string(p) + " seed " + std::to_string(seed),
        {in(d.x, uni(-2, 2)), in({}, ints(0, 1 << 30), CTN_I64)},
        [p, seed](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) { return ctn_dropout(g, n[0], n[1], p, seed, o); },
        [p, seed](const std::vector<Arr> &x, ctn_dtype dt) {
          return ref_dropout(x[0], static_cast<int64_t>(x[1].v[0]), p, seed, dt);
        });
    dr.variants.push_back(v);
  }
  cs.push_back(dr);

  OpCase em{"embedding", "embedding", {}}, eg{"embedding_grad", "embedding_grad", {}};
  struct E {
    int64_t v, d;
    Shape ids;
    int dt;
  };
  for (const E &e : {E{5, 3, {4}, CTN_I32}, E{7, 4, {2, 3}, CTN_I64}, E{3, 1, {}, CTN_I64}, E{4, 6, {2, 2, 2}, CTN_I32}}) {
    const int64_t v = e.v;
    Shape dy = e.ids;
    dy.push_back(e.d);
    const std::string label = "V" + std::to_string(e.v) + " D" + std::to_string(e.d) + " ids " + shape_label(e.ids) +
                              (e.dt == CTN_I32 ? " i32" : " i64");
    em.variants.push_back(variant(label, {in({e.v, e.d}, uni(-2, 2)), in(e.ids, ints(0, static_cast<int>(v - 1)), e.dt)},
                                  bin(ctn_embedding),
                                  [](const std::vector<Arr> &x, ctn_dtype) { return ref_embedding(x[0], x[1]); }));
    eg.variants.push_back(variant(label, {in(e.ids, ints(0, static_cast<int>(v - 1)), e.dt), in(dy, uni(-2, 2))},
                                  named("embedding_grad", attrs({v})),
                                  [v](const std::vector<Arr> &x, ctn_dtype) { return ref_embedding_grad(x[0], x[1], v); }));
  }
  cs.push_back(em);
  cs.push_back(eg);
}

}  // namespace

Variant conv_transpose_variant(const ConvTCase &t, Ref ref) {
  const ConvP p = t.p;
  const int64_t oph = t.oph, opw = t.opw;
  return variant(
      shape_label(t.x) + "*" + shape_label(t.w) + " " + p.label() + " op" + std::to_string(oph) + "," +
          std::to_string(opw),
      {in(t.x, uni(-1, 1)), in(t.w, uni(-1, 1))},
      [p, oph, opw](ctn_graph *g, const Nodes &n, ctn_dtype, ctn_node *o) {
        return ctn_conv_transpose2d(g, n[0], n[1], static_cast<int32_t>(p.sh), static_cast<int32_t>(p.sw),
                                    static_cast<int32_t>(p.ph), static_cast<int32_t>(p.pw),
                                    static_cast<int32_t>(p.dh), static_cast<int32_t>(p.dw),
                                    static_cast<int32_t>(p.g), static_cast<int32_t>(oph),
                                    static_cast<int32_t>(opw), o);
      },
      std::move(ref));
}

const std::vector<OpCase> &nn_forward_cases() {
  static const std::vector<OpCase> cases = collect_cases({add_conv, add_pool, add_norm, add_misc});
  return cases;
}

}  // namespace conf
