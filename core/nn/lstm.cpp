// The LSTM layer: one cell per time step, unrolled over the sequence, every cell sharing the
// same three variables (the classic approach of the DL-framework lectures: the graph is a plain
// DAG, so autodiff gives backpropagation through time for free).
#include "nn/model.h"

#include "util/wall.h"

#include <cmath>

using namespace ctn;
using namespace ctn::nn;

namespace {

struct Ops {
  ctn_graph *g;
  std::string who;
  ctn_node slice(ctn_node a, int32_t axis, int64_t start, int64_t stop) const {
    ctn_node y;
    check(ctn_slice(g, a, axis, start, stop, 1, &y), who + ": ctn_slice");
    return y;
  }
  ctn_node reshape(ctn_node a, std::initializer_list<int64_t> shape) const {
    ctn_node y;
    std::vector<int64_t> s(shape);
    check(ctn_reshape(g, a, static_cast<uint32_t>(s.size()), s.data(), &y), who + ": ctn_reshape");
    return y;
  }
  ctn_node bin(ctn_status (*f)(ctn_graph *, ctn_node, ctn_node, ctn_node *), ctn_node a, ctn_node b) const {
    ctn_node y;
    check(f(g, a, b, &y), who);
    return y;
  }
  ctn_node un(ctn_status (*f)(ctn_graph *, ctn_node, ctn_node *), ctn_node a) const {
    ctn_node y;
    check(f(g, a, &y), who);
    return y;
  }
  ctn_node matmul_t(ctn_node a, ctn_node w) const {  // a @ w^T
    ctn_node y;
    check(ctn_matmul(g, a, w, 0, 1, &y), who + ": ctn_matmul");
    return y;
  }
};

}  // namespace

CTN_API ctn_status ctn_nn_lstm(ctn_model *m, ctn_node x_seq, int64_t hidden, ctn_node *h_seq, ctn_node *h_last) {
  return wall([&] {
    if (!m) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_nn_lstm: the model is NULL");
    if (!h_seq && !h_last) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_nn_lstm: h_seq and h_last are both NULL");
    const std::string name = layer_name(*m, "lstm");
    Ops op{m->g, "ctn_nn_lstm(" + name + ")"};
    need_model_dtype(*m, x_seq, op.who);
    auto s = shape_of(*m, x_seq);
    if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1)
      fail(CTN_ERR_SHAPE, "%s: x_seq must be [T, N, I] with every dim >= 1, got %s", op.who.c_str(), shape_text(s).c_str());
    if (hidden < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: hidden must be >= 1, got %lld", op.who.c_str(), static_cast<long long>(hidden));
    const int64_t T = s[0], N = s[1], I = s[2], H = hidden;
    const double bound = 1.0 / std::sqrt(static_cast<double>(H));
    ctn_node w_ih = variable(*m, name + ".weight_ih", CTN_VAR_PARAMETER, {4 * H, I}, CTN_INIT_UNIFORM, 0, 0, bound);
    ctn_node w_hh = variable(*m, name + ".weight_hh", CTN_VAR_PARAMETER, {4 * H, H}, CTN_INIT_UNIFORM, 0, 0, bound);
    ctn_node bias = variable(*m, name + ".bias", CTN_VAR_PARAMETER, {4 * H}, CTN_INIT_UNIFORM, 0, 0, bound);

    // The input projection of every step at once: one [T*N, I] x [I, 4H] GEMM instead of T.
    ctn_node xw = op.bin(ctn_add, op.matmul_t(op.reshape(x_seq, {T * N, I}), w_ih), bias);
    xw = op.reshape(xw, {T, N, 4 * H});

    ctn_node h = CTN_NODE_NONE, c = CTN_NODE_NONE;
    std::vector<ctn_node> hs;
    for (int64_t t = 0; t < T; ++t) {
      ctn_node z = op.reshape(op.slice(xw, 0, t, t + 1), {N, 4 * H});
      if (t > 0) z = op.bin(ctn_add, z, op.matmul_t(h, w_hh));  // h0 = 0: no recurrent term
      ctn_node i = op.un(ctn_sigmoid, op.slice(z, 1, 0, H));
      ctn_node f = op.un(ctn_sigmoid, op.slice(z, 1, H, 2 * H));
      ctn_node gg = op.un(ctn_tanh, op.slice(z, 1, 2 * H, 3 * H));
      ctn_node o = op.un(ctn_sigmoid, op.slice(z, 1, 3 * H, 4 * H));
      ctn_node ig = op.bin(ctn_mul, i, gg);
      c = t > 0 ? op.bin(ctn_add, op.bin(ctn_mul, f, c), ig) : ig;  // c0 = 0
      h = op.bin(ctn_mul, o, op.un(ctn_tanh, c));
      if (h_seq) hs.push_back(op.reshape(h, {1, N, H}));
    }
    ctn_node seq = CTN_NODE_NONE;
    if (h_seq) {
      if (hs.size() == 1) seq = hs[0];
      else check(ctn_concat(m->g, static_cast<uint32_t>(hs.size()), hs.data(), 0, &seq), op.who + ": ctn_concat");
    }
    if (h_seq) *h_seq = seq;
    if (h_last) *h_last = h;
  });
}
