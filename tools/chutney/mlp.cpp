#include "mlp.h"

#include <cmath>
#include <string>

namespace ctn_cli {
namespace {

// splitmix64: tiny, and unlike std:: distributions its output is the same everywhere, so a
// seed names one initialisation.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

void fill_uniform(std::vector<float> &w, size_t n, double bound, SplitMix &rng) {
  w.resize(n);
  for (float &v : w) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
}

// relu(x @ W1 + b1) @ W2 + b2
ctn_node forward(ctn_graph *g, ctn_node x, const ctn_node p[4]) {
  ctn_node mm1, pre1, h, mm2, logits;
  check(ctn_matmul(g, x, p[0], 0, 0, &mm1), "ctn_matmul (layer 1)");
  check(ctn_add(g, mm1, p[1], &pre1), "ctn_add (bias 1)");
  check(ctn_relu(g, pre1, &h), "ctn_relu");
  check(ctn_matmul(g, h, p[2], 0, 0, &mm2), "ctn_matmul (layer 2)");
  check(ctn_add(g, mm2, p[3], &logits), "ctn_add (bias 2)");
  return logits;
}

void add_params(ctn_graph *g, const MlpConfig &cfg, const MlpParams &init, ctn_node out[4]) {
  const std::vector<float> *values[4] = {&init.w1, &init.b1, &init.w2, &init.b2};
  const std::vector<int64_t> shapes[4] = {
      {cfg.inputs, cfg.hidden}, {cfg.hidden}, {cfg.hidden, cfg.classes}, {cfg.classes}};
  for (int i = 0; i < 4; ++i) {
    TensorPtr t = make_tensor(CTN_F32, shapes[i], values[i]->data());
    check(ctn_variable(g, kMlpParamNames[i], t.get(), &out[i]), "ctn_variable");
  }
}

GraphPtr new_graph(ctn_context *ctx) {
  ctn_graph *raw = nullptr;
  check(ctn_graph_create(ctx, 0, &raw), "ctn_graph_create");
  return GraphPtr(raw);
}

}  // namespace

MlpParams mlp_init(const MlpConfig &cfg) {
  SplitMix rng{cfg.seed};
  MlpParams p;
  // Kaiming-uniform: bound = gain * sqrt(3 / fan_in); gain^2 = 2 before a ReLU.
  fill_uniform(p.w1, static_cast<size_t>(cfg.inputs * cfg.hidden),
               std::sqrt(6.0 / static_cast<double>(cfg.inputs)), rng);
  fill_uniform(p.w2, static_cast<size_t>(cfg.hidden * cfg.classes),
               std::sqrt(3.0 / static_cast<double>(cfg.hidden)), rng);
  p.b1.assign(static_cast<size_t>(cfg.hidden), 0.0f);
  p.b2.assign(static_cast<size_t>(cfg.classes), 0.0f);
  return p;
}

MlpTrainGraph mlp_train_graph(ctn_context *ctx, const MlpConfig &cfg, const MlpParams &init) {
  MlpTrainGraph m;
  m.graph = new_graph(ctx);
  ctn_graph *g = m.graph.get();
  const int64_t x_shape[2] = {cfg.batch, cfg.inputs};
  const int64_t y_shape[1] = {cfg.batch};
  check(ctn_input(g, "x", CTN_F32, 2, x_shape, &m.x), "ctn_input x");
  check(ctn_input(g, "labels", CTN_I32, 1, y_shape, &m.labels), "ctn_input labels");
  add_params(g, cfg, init, m.params);
  m.logits = forward(g, m.x, m.params);
  check(ctn_cross_entropy(g, m.logits, m.labels, &m.loss), "ctn_cross_entropy");

  ctn_node grads[4];
  check(ctn_grad(g, m.loss, 4, m.params, grads), "ctn_grad");

  ctn_node mu, lr;
  check(ctn_scalar(g, CTN_F32, cfg.momentum, &mu), "ctn_scalar momentum");
  check(ctn_scalar(g, CTN_F32, cfg.lr, &lr), "ctn_scalar lr");
  for (int i = 0; i < 4; ++i) {
    uint32_t ndim = 0;
    int64_t shape[CTN_MAX_DIMS];
    check(ctn_node_info(g, m.params[i], nullptr, &ndim, shape), "ctn_node_info");
    TensorPtr zeros = make_tensor(CTN_F32, std::vector<int64_t>(shape, shape + ndim), nullptr);
    std::string vname = std::string("v_") + kMlpParamNames[i];
    check(ctn_variable(g, vname.c_str(), zeros.get(), &m.velocity[i]), "ctn_variable velocity");

    ctn_node mv, v_new, step, w_new, assigned;
    check(ctn_mul(g, mu, m.velocity[i], &mv), "ctn_mul (momentum)");
    check(ctn_add(g, mv, grads[i], &v_new), "ctn_add (velocity)");
    check(ctn_mul(g, lr, v_new, &step), "ctn_mul (lr)");
    check(ctn_sub(g, m.params[i], step, &w_new), "ctn_sub (update)");
    check(ctn_assign(g, m.velocity[i], v_new, &assigned), "ctn_assign velocity");
    check(ctn_assign(g, m.params[i], w_new, &assigned), "ctn_assign weight");
  }
  return m;
}

MlpEvalGraph mlp_eval_graph(ctn_context *ctx, const MlpConfig &cfg, int64_t rows,
                            const MlpParams &init) {
  MlpEvalGraph m;
  m.graph = new_graph(ctx);
  ctn_graph *g = m.graph.get();
  const int64_t x_shape[2] = {rows, cfg.inputs};
  check(ctn_input(g, "x", CTN_F32, 2, x_shape, &m.x), "ctn_input x");
  add_params(g, cfg, init, m.params);
  m.logits = forward(g, m.x, m.params);
  return m;
}

}  // namespace ctn_cli
