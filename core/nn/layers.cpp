// Layers of the layer library (linear, conv2d, batch/layer norm, dropout, embedding, pooling,
// flatten) and the sequential composition over a ctn_layer array.
#include <chutney/ops.h>

#include "nn/model.h"

#include "util/wall.h"

#include <cmath>

using namespace ctn;
using namespace ctn::nn;

namespace {

// Wraps a layer body: validates the model and the out-pointer, and prefixes every failure with
// "<api>(<layer name>)" so that a message points at the layer that failed.
template <class F>
ctn_status layer_wall(ctn_model *m, const void *out, const char *api, F &&body) {
  return wall([&] {
    if (!m) fail(CTN_ERR_INVALID_ARGUMENT, "%s: the model is NULL", api);
    if (!out) fail(CTN_ERR_INVALID_ARGUMENT, "%s: out is NULL", api);
    body();
  });
}

struct Who {
  std::string text;
  Who(const char *api, const std::string &name) : text(std::string(api) + "(" + name + ")") {}
  const char *c() const { return text.c_str(); }
  std::string operator+(const char *s) const { return text + ": " + s; }
};

ctn_node linear(ctn_model &m, ctn_node x, int64_t in, int64_t outf, bool bias) {
  const std::string name = layer_name(m, "linear");
  Who who("ctn_nn_linear", name);
  need_model_dtype(m, x, who.text);
  auto s = shape_of(m, x);
  if (in < 1 || outf < 1) fail(CTN_ERR_INVALID_ARGUMENT, "%s: feature counts must be >= 1 (in %lld, out %lld)", who.c(),
                               static_cast<long long>(in), static_cast<long long>(outf));
  if (s.size() < 2 || s.back() != in)
    fail(CTN_ERR_SHAPE, "%s: x must be [..., %lld] (at least 2-d), got %s", who.c(), static_cast<long long>(in),
         shape_text(s).c_str());
  ctn_node w = variable(m, name + ".weight", CTN_VAR_PARAMETER, {outf, in}, m.weight_init, in, outf, m.weight_gain);
  ctn_node y;
  check(ctn_matmul(m.g, x, w, 0, 1, &y), who + "ctn_matmul");
  if (bias) {
    ctn_node b = variable(m, name + ".bias", CTN_VAR_PARAMETER, {outf}, CTN_INIT_ZEROS, 0, 0, 0);
    check(ctn_add(m.g, y, b, &y), who + "ctn_add");
  }
  return y;
}

ctn_node conv2d(ctn_model &m, ctn_node x, int64_t in, int64_t outc, int32_t k, int32_t stride, int32_t pad,
                bool bias = true) {
  std::string name = layer_name(m, "conv");
  Who who("ctn_nn_conv2d", name);
  need_model_dtype(m, x, who.text);
  auto s = shape_of(m, x);
  if (in < 1 || outc < 1 || k < 1 || stride < 1 || pad < 0)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: need channels, kernel, stride >= 1 and pad >= 0 (in %lld, out %lld, k %d, stride %d, pad %d)",
         who.c(), static_cast<long long>(in), static_cast<long long>(outc), k, stride, pad);
  if (s.size() != 4 || s[1] != in)
    fail(CTN_ERR_SHAPE, "%s: x must be [N, %lld, H, W], got %s", who.c(), static_cast<long long>(in), shape_text(s).c_str());
  int64_t kk = static_cast<int64_t>(k) * k;
  ctn_node w = variable(m, name + ".weight", CTN_VAR_PARAMETER, {outc, in, k, k}, m.weight_init, in * kk, outc * kk,
                        m.weight_gain);
  ctn_node y, b3;
  check(ctn_conv2d(m.g, x, w, stride, stride, pad, pad, 1, 1, 1, &y), who + "ctn_conv2d");
  if (!bias) return y;
  ctn_node b = variable(m, name + ".bias", CTN_VAR_PARAMETER, {outc}, CTN_INIT_ZEROS, 0, 0, 0);
  const int64_t bshape[3] = {outc, 1, 1};
  check(ctn_reshape(m.g, b, 3, bshape, &b3), who + "ctn_reshape");
  check(ctn_add(m.g, y, b3, &y), who + "ctn_add");
  return y;
}

ctn_node batch_norm(ctn_model &m, ctn_node x, int64_t channels, double momentum, double eps) {
  std::string name = layer_name(m, "batch_norm");
  Who who("ctn_nn_batch_norm", name);
  need_model_dtype(m, x, who.text);
  if (momentum == 0) momentum = 0.1;
  if (eps == 0) eps = 1e-5;
  if (!(momentum > 0 && momentum <= 1) || !(eps > 0))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: momentum must be in (0, 1] and eps > 0 (got %g, %g)", who.c(), momentum, eps);
  auto s = shape_of(m, x);
  if (s.size() < 2 || s[1] != channels)
    fail(CTN_ERR_SHAPE, "%s: x must be [N, %lld, ...], got %s", who.c(), static_cast<long long>(channels), shape_text(s).c_str());
  ctn_node gamma = variable(m, name + ".weight", CTN_VAR_PARAMETER, {channels}, CTN_INIT_ONES, 0, 0, 0);
  ctn_node beta = variable(m, name + ".bias", CTN_VAR_PARAMETER, {channels}, CTN_INIT_ZEROS, 0, 0, 0);
  ctn_node rm = variable(m, name + ".running_mean", CTN_VAR_BUFFER, {channels}, CTN_INIT_ZEROS, 0, 0, 0);
  ctn_node rv = variable(m, name + ".running_var", CTN_VAR_BUFFER, {channels}, CTN_INIT_ONES, 0, 0, 0);
  ctn_node y;
  if (!m.training) {
    check(ctn_batch_norm_inference(m.g, x, gamma, beta, rm, rv, eps, &y), who + "ctn_batch_norm_inference");
    return y;
  }
  check(ctn_batch_norm(m.g, x, gamma, beta, eps, &y), who + "ctn_batch_norm");
  // Running statistics: batch_norm_stats' [2, C] (mean, biased variance) in one sweep over x,
  // whose rows are only assigned, never differentiated.
  int64_t count = 1;
  for (size_t k = 0; k < s.size(); ++k)
    if (k != 1) count *= s[k];
  ctn_node stats, mean, var, t1, t2, new_rm, new_rv, assigned;
  check(ctn_op(m.g, CTN_OP_BATCH_NORM_STATS, 1, &x, nullptr, &stats), who + "batch_norm_stats");
  check(ctn_slice(m.g, stats, 0, 0, 1, 1, &mean), who + "ctn_slice");
  check(ctn_slice(m.g, stats, 0, 1, 2, 1, &var), who + "ctn_slice");
  check(ctn_reshape(m.g, mean, 1, &channels, &mean), who + "ctn_reshape");
  check(ctn_reshape(m.g, var, 1, &channels, &var), who + "ctn_reshape");
  double unbias = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
  check(ctn_mul(m.g, rm, scalar(m, 1 - momentum), &t1), who + "ctn_mul");
  check(ctn_mul(m.g, mean, scalar(m, momentum), &t2), who + "ctn_mul");
  check(ctn_add(m.g, t1, t2, &new_rm), who + "ctn_add");
  check(ctn_mul(m.g, rv, scalar(m, 1 - momentum), &t1), who + "ctn_mul");
  check(ctn_mul(m.g, var, scalar(m, momentum * unbias), &t2), who + "ctn_mul");
  check(ctn_add(m.g, t1, t2, &new_rv), who + "ctn_add");
  check(ctn_assign(m.g, rm, new_rm, &assigned), who + "ctn_assign");
  check(ctn_assign(m.g, rv, new_rv, &assigned), who + "ctn_assign");
  return y;
}

ctn_node layer_norm(ctn_model &m, ctn_node x, int64_t features, double eps) {
  std::string name = layer_name(m, "layer_norm");
  Who who("ctn_nn_layer_norm", name);
  need_model_dtype(m, x, who.text);
  if (eps == 0) eps = 1e-5;
  if (!(eps > 0)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: eps must be > 0, got %g", who.c(), eps);
  auto s = shape_of(m, x);
  if (s.empty() || s.back() != features)
    fail(CTN_ERR_SHAPE, "%s: x must be [..., %lld], got %s", who.c(), static_cast<long long>(features), shape_text(s).c_str());
  ctn_node gamma = variable(m, name + ".weight", CTN_VAR_PARAMETER, {features}, CTN_INIT_ONES, 0, 0, 0);
  ctn_node beta = variable(m, name + ".bias", CTN_VAR_PARAMETER, {features}, CTN_INIT_ZEROS, 0, 0, 0);
  ctn_node y;
  check(ctn_layer_norm(m.g, x, gamma, beta, -1, eps, &y), who + "ctn_layer_norm");
  return y;
}

ctn_node dropout(ctn_model &m, ctn_node x, double p) {
  std::string name = layer_name(m, "dropout");
  Who who("ctn_nn_dropout", name);
  if (!(p >= 0 && p < 1)) fail(CTN_ERR_INVALID_ARGUMENT, "%s: p must be in [0, 1), got %g", who.c(), p);
  if (!m.training || p == 0) return x;
  auto seed = static_cast<int64_t>(mix(m.seed ^ hash_name(name)) >> 1);
  ctn_node y;
  check(ctn_dropout(m.g, x, step_node(m), p, seed, &y), who + "ctn_dropout");
  return y;
}

ctn_node max_pool(ctn_model &m, ctn_node x, int32_t k, int32_t stride, int32_t pad, bool avg) {
  const char *api = avg ? "ctn_nn_avg_pool2d" : "ctn_nn_max_pool2d";
  if (k < 1 || stride < 0 || pad < 0)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: kernel must be >= 1, stride and pad >= 0 (got %d, %d, %d)", api, k, stride, pad);
  if (stride == 0) stride = k;
  ctn_node y;
  if (avg) check(ctn_avg_pool2d(m.g, x, k, k, stride, stride, pad, pad, 1, &y), api);
  else check(ctn_max_pool2d(m.g, x, k, k, stride, stride, pad, pad, &y), api);
  return y;
}

ctn_node flatten(ctn_model &m, ctn_node x) {
  auto s = shape_of(m, x);
  if (s.empty()) fail(CTN_ERR_SHAPE, "ctn_nn_flatten: x must be at least 1-d");
  int64_t rest = 1;
  for (size_t k = 1; k < s.size(); ++k) rest *= s[k];
  const int64_t shape[2] = {s[0], rest};
  ctn_node y;
  check(ctn_reshape(m.g, x, 2, shape, &y), "ctn_nn_flatten");
  return y;
}

ctn_node unary(ctn_model &m, ctn_node x, ctn_status (*f)(ctn_graph *, ctn_node, ctn_node *), const char *what) {
  ctn_node y;
  check(f(m.g, x, &y), what);
  return y;
}

}  // namespace

CTN_API ctn_status ctn_nn_linear(ctn_model *m, ctn_node x, int64_t in_features, int64_t out_features, int32_t bias,
                                 ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_linear", [&] { *out = linear(*m, x, in_features, out_features, bias != 0); });
}

CTN_API ctn_status ctn_nn_conv2d(ctn_model *m, ctn_node x, int64_t in_channels, int64_t out_channels, int32_t kernel,
                                 int32_t stride, int32_t pad, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_conv2d",
                    [&] { *out = conv2d(*m, x, in_channels, out_channels, kernel, stride, pad); });
}

CTN_API ctn_status ctn_nn_batch_norm(ctn_model *m, ctn_node x, int64_t channels, double momentum, double eps,
                                     ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_batch_norm", [&] { *out = batch_norm(*m, x, channels, momentum, eps); });
}

CTN_API ctn_status ctn_nn_layer_norm(ctn_model *m, ctn_node x, int64_t features, double eps, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_layer_norm", [&] { *out = layer_norm(*m, x, features, eps); });
}

CTN_API ctn_status ctn_nn_dropout(ctn_model *m, ctn_node x, double p, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_dropout", [&] { *out = dropout(*m, x, p); });
}

CTN_API ctn_status ctn_nn_embedding(ctn_model *m, ctn_node ids, int64_t num, int64_t dim, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_embedding", [&] {
    std::string name = layer_name(*m, "embedding");
    Who who("ctn_nn_embedding", name);
    if (num < 1 || dim < 1)
      fail(CTN_ERR_INVALID_ARGUMENT, "%s: num and dim must be >= 1 (got %lld, %lld)", who.c(), static_cast<long long>(num),
           static_cast<long long>(dim));
    ctn_node table = variable(*m, name + ".weight", CTN_VAR_PARAMETER, {num, dim}, CTN_INIT_NORMAL, 0, 0, 1.0);
    check(ctn_embedding(m->g, table, ids, out), who + "ctn_embedding");
  });
}

CTN_API ctn_status ctn_nn_relu(ctn_model *m, ctn_node x, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_relu", [&] { *out = unary(*m, x, ctn_relu, "ctn_nn_relu"); });
}

CTN_API ctn_status ctn_nn_max_pool2d(ctn_model *m, ctn_node x, int32_t kernel, int32_t stride, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_max_pool2d", [&] { *out = max_pool(*m, x, kernel, stride, 0, false); });
}

CTN_API ctn_status ctn_nn_flatten(ctn_model *m, ctn_node x, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_flatten", [&] { *out = flatten(*m, x); });
}

CTN_API ctn_status ctn_nn_sequential(ctn_model *m, ctn_node x, uint32_t n, const ctn_layer *layers, ctn_node *out) {
  return layer_wall(m, out, "ctn_nn_sequential", [&] {
    if (n && !layers) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_nn_sequential: layers is NULL");
    ctn_node y = x;
    for (uint32_t i = 0; i < n; ++i) {
      const ctn_layer &L = layers[i];
      try {
        if (L.name && *L.name) m->next_name = L.name;
        auto s = shape_of(*m, y);
        int64_t last = s.empty() ? 0 : s.back();
        int64_t chan = s.size() >= 2 ? s[1] : 0;
        switch (L.kind) {
          case CTN_LAYER_LINEAR: y = linear(*m, y, last, L.units, !(L.flags & CTN_LAYER_NO_BIAS)); break;
          case CTN_LAYER_CONV2D:
            y = conv2d(*m, y, chan, L.units, L.kernel, L.stride ? L.stride : 1, L.pad, !(L.flags & CTN_LAYER_NO_BIAS));
            break;
          case CTN_LAYER_BATCH_NORM: y = batch_norm(*m, y, chan, L.p, L.eps); break;
          case CTN_LAYER_LAYER_NORM: y = layer_norm(*m, y, last, L.eps); break;
          case CTN_LAYER_DROPOUT: y = dropout(*m, y, L.p); break;
          case CTN_LAYER_RELU: y = unary(*m, y, ctn_relu, "relu"); break;
          case CTN_LAYER_TANH: y = unary(*m, y, ctn_tanh, "tanh"); break;
          case CTN_LAYER_SIGMOID: y = unary(*m, y, ctn_sigmoid, "sigmoid"); break;
          case CTN_LAYER_MAX_POOL2D: y = max_pool(*m, y, L.kernel, L.stride, L.pad, false); break;
          case CTN_LAYER_AVG_POOL2D: y = max_pool(*m, y, L.kernel, L.stride, L.pad, true); break;
          case CTN_LAYER_FLATTEN: y = flatten(*m, y); break;
          default: fail(CTN_ERR_INVALID_ARGUMENT, "unknown layer kind %d", static_cast<int>(L.kind));
        }
      } catch (const Error &e) {
        m->next_name.clear();
        throw Error(e.code(), "ctn_nn_sequential: layer " + std::to_string(i) + ": " + e.message());
      }
    }
    *out = y;
  });
}
