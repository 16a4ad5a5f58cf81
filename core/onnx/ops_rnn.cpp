// ONNX LSTM, GRU and RNN as unrolled cells: the input projection of every time step is one
// matmul up front, then each step is a matmul with the recurrence weights and elementwise gates.
// Shapes are static, so the unrolled graph is what ctn_grad differentiates (backprop through
// time comes for free).
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

namespace ctn::onnx {
namespace {

using namespace lower;

enum Kind { kRnn = 0, kGru = 1, kLstm = 2 };

Shape shape_of(std::initializer_list<int64_t> v) { return Shape::from(static_cast<uint32_t>(v.size()), std::data(v)); }

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

ctn_node activate(NodeCtx &c, const Activation &a, ctn_node x) {
  Graph &g = c.g;
  const std::string &n = a.name;
  if (n == "Sigmoid") return g.op1(CTN_OP_SIGMOID, x);
  if (n == "Tanh") return g.op1(CTN_OP_TANH, x);
  if (n == "Relu") return g.op1(CTN_OP_RELU, x);
  if (n == "HardSigmoid") return hardsigmoid(g, x, a.alpha, a.beta);
  if (n == "LeakyRelu") {
    ctn_attrs at = attrs_f({a.alpha});
    return g.op1(CTN_OP_LEAKY_RELU, x, &at);
  }
  if (n == "Elu") return elu(g, x, a.alpha);
  if (n == "Softplus") return softplus(g, x);
  if (n == "Softsign") return g.op2(CTN_OP_DIV, x, g.op2(CTN_OP_ADD, g.op1(CTN_OP_ABS, x), scalar_like(g, x, 1)));
  if (n == "ScaledTanh")
    return g.op2(CTN_OP_MUL, g.op1(CTN_OP_TANH, g.op2(CTN_OP_MUL, x, scalar_like(g, x, a.beta))), scalar_like(g, x, a.alpha));
  if (n == "Affine") return g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, x, scalar_like(g, x, a.alpha)), scalar_like(g, x, a.beta));
  c.unsupported("activation '%s'", n.c_str());
}

// The activations of every direction, with their defaults and the alpha/beta lists consumed in
// order by the activations that take parameters.
std::vector<Activation> activations(NodeCtx &c, Kind kind, int dirs) {
  static const char *const defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const int per = kind + 1;
  std::vector<Activation> acts;
  if (const AttributeP *a = c.attr("activations")) {
    for (std::string_view s : a->strings) acts.push_back({std::string(s)});
    if (acts.size() != static_cast<size_t>(per * dirs)) c.invalid("activations needs %d entries", per * dirs);
  } else {
    for (int d = 0; d < dirs; ++d)
      for (int k = 0; k < per; ++k) acts.push_back({defaults[kind][k]});
  }
  std::vector<float> al = c.attr_floats("activation_alpha"), be = c.attr_floats("activation_beta");
  size_t ia = 0, ib = 0;
  for (Activation &a : acts) {
    struct Def { const char *n; double alpha, beta; bool has_a, has_b; };
    static const Def defs[] = {{"LeakyRelu", 0.01, 0, true, false}, {"HardSigmoid", 0.2, 0.5, true, true},
                               {"Elu", 1.0, 0, true, false},        {"ScaledTanh", 1.0, 1.0, true, true},
                               {"Affine", 1.0, 0.0, true, true}};
    for (const Def &d : defs)
      if (a.name == d.n) {
        a.alpha = d.has_a && ia < al.size() ? al[ia++] : d.alpha;
        a.beta = d.has_b && ib < be.size() ? be[ib++] : d.beta;
      }
  }
  return acts;
}

ctn_node row_block(Graph &g, ctn_node m, int64_t k, int64_t h) { return slice(g, m, 0, k * h, (k + 1) * h, 1); }
ctn_node col_block(Graph &g, ctn_node m, int64_t k, int64_t h) { return slice(g, m, 1, k * h, (k + 1) * h, 1); }
// Entry d of a [dirs, ...] tensor, without its leading axis.
ctn_node dir_entry(Graph &g, ctn_node t, int d) {
  Shape s = g.info(t).shape, r;
  for (uint32_t k = 1; k < s.ndim; ++k) r[r.ndim++] = s[k];
  return reshape(g, slice(g, t, 0, d, d + 1, 1), r);
}

void recurrent(NodeCtx &c, Kind kind) {
  Graph &g = c.g;
  const int64_t gates = kind == kLstm ? 4 : kind == kGru ? 3 : 1;
  const int64_t H = c.attr_i("hidden_size", 0);
  const std::string dir = c.attr_s("direction", "forward");
  const int dirs = dir == "bidirectional" ? 2 : 1;
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") c.invalid("direction '%s'", dir.c_str());
  const bool layout1 = c.attr_i("layout", 0) != 0;
  const double clip = c.attr_f("clip", 0.0);
  const bool lbr = kind == kGru && c.attr_i("linear_before_reset", 0) != 0;
  if (kind == kLstm && c.attr_i("input_forget", 0) != 0) c.unsupported("input_forget = 1");
  std::vector<Activation> acts = activations(c, kind, dirs);
  ctn_node x = c.in(0);
  if (!dtype_is_float(c.dtype(0))) c.unsupported("dtype %s", dtype_name(c.dtype(0)));
  if (c.shape(0).ndim != 3) c.invalid("X must be 3-d");
  if (layout1) x = permute(g, x, {1, 0, 2});
  const Shape xs = g.info(x).shape;
  const int64_t seq = xs[0], batch = xs[1], in = xs[2];
  if (H <= 0) c.invalid("hidden_size must be > 0");
  if (c.has(4)) {
    for (int64_t L : c.ints(4, "sequence_lens"))
      if (L != seq) c.unsupported("sequence_lens other than the full sequence length %lld", static_cast<long long>(seq));
  }
  auto initial = [&](size_t i, int d) {
    if (!c.has(i)) {
      ctn_attrs a = attrs_i({batch, H});
      return g.op1(CTN_OP_BROADCAST_TO, scalar_like(g, x, 0), &a);
    }
    ctn_node t = c.in(i);
    if (layout1) t = permute(g, t, {1, 0, 2});
    return dir_entry(g, t, d);
  };
  auto clipped = [&](ctn_node v) {
    if (clip <= 0) return v;
    ctn_attrs a = attrs_f({-clip, clip});
    return g.op1(CTN_OP_CLAMP, v, &a);
  };
  std::vector<ctn_node> ys(static_cast<size_t>(dirs)), hs, cs;
  for (int d = 0; d < dirs; ++d) {
    const bool backward = dir == "reverse" || d == 1;
    const Activation *act = &acts[static_cast<size_t>(d * (kind + 1))];
    ctn_node W = dir_entry(g, c.in(1), d), R = dir_entry(g, c.in(2), d);
    ctn_attrs tb = attrs_i({0, 1});
    ctn_node xw = g.op2(CTN_OP_MATMUL, reshape(g, x, shape_of({seq * batch, in})), W, &tb);  // [seq*batch, G*H]
    ctn_node rb = CTN_NODE_NONE;
    if (c.has(3)) {
      ctn_node B = dir_entry(g, c.in(3), d);
      ctn_node wb = slice(g, B, 0, 0, gates * H, 1);
      rb = slice(g, B, 0, gates * H, 2 * gates * H, 1);
      // The recurrence bias joins the input projection, except GRU's h-gate bias, which the
      // reset gate scales when linear_before_reset is set.
      xw = g.op2(CTN_OP_ADD, xw, kind == kGru ? wb : g.op2(CTN_OP_ADD, wb, rb));
    }
    xw = reshape(g, xw, shape_of({seq, batch, gates * H}));
    ctn_node P = kind == kLstm && c.has(7) ? dir_entry(g, c.in(7), d) : CTN_NODE_NONE;
    ctn_node h = initial(5, d), cell = kind == kLstm ? initial(6, d) : CTN_NODE_NONE;
    std::vector<ctn_node> steps(static_cast<size_t>(seq));
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t t = backward ? seq - 1 - s : s;
      ctn_node xt = reshape(g, slice(g, xw, 0, t, t + 1, 1), shape_of({batch, gates * H}));
      if (kind == kLstm) {
        ctn_node v = g.op2(CTN_OP_ADD, xt, g.op2(CTN_OP_MATMUL, h, R, &tb));
        auto gate = [&](int k) { return col_block(g, v, k, H); };
        auto peep = [&](ctn_node pre, int k, ctn_node cc) {
          return P == CTN_NODE_NONE ? pre : g.op2(CTN_OP_ADD, pre, g.op2(CTN_OP_MUL, row_block(g, P, k, H), cc));
        };
        ctn_node i = activate(c, act[0], clipped(peep(gate(0), 0, cell)));
        ctn_node f = activate(c, act[0], clipped(peep(gate(2), 2, cell)));
        ctn_node cand = activate(c, act[1], clipped(gate(3)));
        cell = g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, f, cell), g.op2(CTN_OP_MUL, i, cand));
        ctn_node o = activate(c, act[0], clipped(peep(gate(1), 1, cell)));
        h = g.op2(CTN_OP_MUL, o, activate(c, act[2], cell));
      } else if (kind == kGru) {
        ctn_node hr = g.op2(CTN_OP_MATMUL, h, slice(g, R, 0, 0, 2 * H, 1), &tb);  // z and r parts
        if (rb != CTN_NODE_NONE) hr = g.op2(CTN_OP_ADD, hr, slice(g, rb, 0, 0, 2 * H, 1));
        ctn_node zr = g.op2(CTN_OP_ADD, col_block(g, xt, 0, 2 * H), hr);
        ctn_node z = activate(c, act[0], clipped(col_block(g, zr, 0, H)));
        ctn_node r = activate(c, act[0], clipped(col_block(g, zr, 1, H)));
        ctn_node rh = row_block(g, R, 2, H), rbh = rb == CTN_NODE_NONE ? CTN_NODE_NONE : row_block(g, rb, 2, H);
        ctn_node hh;
        if (lbr) {
          hh = g.op2(CTN_OP_MATMUL, h, rh, &tb);
          if (rbh != CTN_NODE_NONE) hh = g.op2(CTN_OP_ADD, hh, rbh);
          hh = g.op2(CTN_OP_MUL, r, hh);
        } else {
          hh = g.op2(CTN_OP_MATMUL, g.op2(CTN_OP_MUL, r, h), rh, &tb);
          if (rbh != CTN_NODE_NONE) hh = g.op2(CTN_OP_ADD, hh, rbh);
        }
        ctn_node cand = activate(c, act[1], clipped(g.op2(CTN_OP_ADD, col_block(g, xt, 2, H), hh)));
        ctn_node one_minus_z = g.op2(CTN_OP_SUB, scalar_like(g, z, 1), z);
        h = g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, one_minus_z, cand), g.op2(CTN_OP_MUL, z, h));
      } else {
        h = activate(c, act[0], clipped(g.op2(CTN_OP_ADD, xt, g.op2(CTN_OP_MATMUL, h, R, &tb))));
      }
      steps[static_cast<size_t>(t)] = reshape(g, h, shape_of({1, 1, batch, H}));
    }
    ctn_attrs a0 = attrs_i({0});
    ys[static_cast<size_t>(d)] = seq == 1 ? steps[0] : g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(seq), steps.data(), &a0);
    hs.push_back(reshape(g, h, shape_of({1, batch, H})));
    if (kind == kLstm) cs.push_back(reshape(g, cell, shape_of({1, batch, H})));
  }
  auto cat = [&](std::vector<ctn_node> &v, int64_t axis) {
    if (v.size() == 1) return v[0];
    ctn_attrs a = attrs_i({axis});
    return g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(v.size()), v.data(), &a);
  };
  ctn_node Y = cat(ys, 1), Yh = cat(hs, 0);
  if (layout1) {
    Y = permute(g, Y, {2, 0, 1, 3});
    Yh = permute(g, Yh, {1, 0, 2});
  }
  c.outs = {Y, Yh};
  if (kind == kLstm) {
    ctn_node Yc = cat(cs, 0);
    c.outs.push_back(layout1 ? permute(g, Yc, {1, 0, 2}) : Yc);
  }
}

}  // namespace

void convert_lstm(NodeCtx &c) { recurrent(c, kLstm); }
void convert_gru(NodeCtx &c) { recurrent(c, kGru); }
void convert_rnn(NodeCtx &c) { recurrent(c, kRnn); }

}  // namespace ctn::onnx
