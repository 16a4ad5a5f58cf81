// Post-training static quantization (quantize.h).
#include "quantize.h"

#include <chutney/checkpoint.h>
#include <chutney/ops.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ctn_cli {
namespace {

struct CheckpointDeleter {
  void operator()(ctn_checkpoint *p) const { ctn_checkpoint_release(p); }
};
using CheckpointPtr = std::unique_ptr<ctn_checkpoint, CheckpointDeleter>;

// Tensor `name` of the checkpoint as f32 values; its shape must be `shape`.
std::vector<float> read_f32(ctn_checkpoint *ck, const std::string &path, const std::string &name,
                            const std::vector<int64_t> &shape) {
  ctn_tensor *raw = nullptr;
  check(ctn_checkpoint_get(ck, name.c_str(), &raw), (path + ": tensor " + name).c_str());
  TensorPtr t(raw);
  ctn_dtype dt{};
  uint32_t nd = 0;
  int64_t got[CTN_MAX_DIMS] = {};
  check(ctn_tensor_dtype(t.get(), &dt), "ctn_tensor_dtype");
  check(ctn_tensor_shape(t.get(), &nd, got), "ctn_tensor_shape");
  if (dt != CTN_F32 || std::vector<int64_t>(got, got + nd) != shape) {
    std::string want;
    for (int64_t d : shape) want += (want.empty() ? "" : ",") + std::to_string(d);
    throw Failure(path + ": tensor " + name + " is not f32 [" + want + "] (another model or widths?)");
  }
  std::vector<float> v;
  int64_t n = 0;
  check(ctn_tensor_numel(t.get(), &n), "ctn_tensor_numel");
  v.resize(static_cast<size_t>(n));
  check(ctn_tensor_read(t.get(), v.data(), v.size() * sizeof(float)), "ctn_tensor_read");
  if (!std::all_of(v.begin(), v.end(), [](float e) { return std::isfinite(e); }))
    throw Failure(path + ": tensor " + name + " holds NaN or infinity: it cannot be quantized");
  return v;
}

QLayer read_linear(ctn_checkpoint *ck, const std::string &path, int index, int64_t in, int64_t out, bool relu) {
  const std::string p = "linear" + std::to_string(index);
  QLayer l;
  l.wshape = {out, in};
  l.w = read_f32(ck, path, p + ".weight", l.wshape);
  l.b = read_f32(ck, path, p + ".bias", {out});
  l.relu = relu;
  return l;
}

// conv<index> (with bias, or folded with batch_norm<index>), relu, 2x2 max pool.
QLayer read_conv(ctn_checkpoint *ck, const std::string &path, int index, int64_t in, int64_t out,
                 const CnnWidths &cw) {
  const std::string i = std::to_string(index);
  QLayer l;
  l.conv = l.relu = l.pool = true;
  l.wshape = {out, in, cw.kernel, cw.kernel};
  l.pad = cw.valid ? 0 : static_cast<int32_t>(cw.kernel / 2);
  l.w = read_f32(ck, path, "conv" + i + ".weight", l.wshape);
  if (!cw.bn) {
    l.b = read_f32(ck, path, "conv" + i + ".bias", {out});
    return l;
  }
  const std::string bn = "batch_norm" + i;
  const std::vector<float> gamma = read_f32(ck, path, bn + ".weight", {out});
  const std::vector<float> beta = read_f32(ck, path, bn + ".bias", {out});
  const std::vector<float> mean = read_f32(ck, path, bn + ".running_mean", {out});
  const std::vector<float> var = read_f32(ck, path, bn + ".running_var", {out});
  const size_t per = l.w.size() / static_cast<size_t>(out);
  l.b.resize(static_cast<size_t>(out));
  for (size_t o = 0; o < static_cast<size_t>(out); ++o) {
    const double k = gamma[o] / std::sqrt(static_cast<double>(var[o]) + 1e-5);
    for (size_t j = 0; j < per; ++j) l.w[o * per + j] = static_cast<float>(l.w[o * per + j] * k);
    l.b[o] = static_cast<float>(beta[o] - mean[o] * k);
  }
  return l;
}

ctn_node constant(ctn_graph *g, ctn_dtype dt, const std::vector<int64_t> &shape, const void *data) {
  TensorPtr t = make_tensor(dt, shape, data);
  ctn_node n = CTN_NODE_NONE;
  check(ctn_constant(g, t.get(), &n), "ctn_constant");
  return n;
}

ctn_node op(ctn_graph *g, const char *name, std::vector<ctn_node> in, const std::vector<int64_t> &ints = {}) {
  ctn_attrs a{};
  for (size_t i = 0; i < ints.size(); ++i) a.i[i] = ints[i];
  a.ni = static_cast<uint32_t>(ints.size());
  ctn_node out = CTN_NODE_NONE;
  check(ctn_op(g, name, static_cast<uint32_t>(in.size()), in.data(), &a, &out), name);
  return out;
}

QGraph new_graph(ctn_context *ctx, const QNet &net, int64_t batch) {
  QGraph q;
  ctn_graph *g = nullptr;
  check(ctn_graph_create(ctx, 0, &g), "ctn_graph_create");
  q.graph.reset(g);
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), net.input.begin(), net.input.end());
  check(ctn_input(g, "x", CTN_F32, static_cast<uint32_t>(shape.size()), shape.data(), &q.x), "ctn_input (x)");
  return q;
}

ctn_node max_pool2(ctn_graph *g, ctn_node x) {
  ctn_node y = CTN_NODE_NONE;
  check(ctn_max_pool2d(g, x, 2, 2, 2, 2, 0, 0, &y), "ctn_max_pool2d");
  return y;
}

// [B, ...] -> [B, rest] when `x` has more than two dims.
ctn_node flatten(ctn_graph *g, ctn_node x) {
  ctn_dtype dt{};
  uint32_t nd = 0;
  int64_t s[CTN_MAX_DIMS] = {};
  check(ctn_node_info(g, x, &dt, &nd, s), "ctn_node_info");
  if (nd <= 2) return x;
  int64_t rest = 1;
  for (uint32_t i = 1; i < nd; ++i) rest *= s[i];
  const int64_t two[2] = {s[0], rest};
  ctn_node y = CTN_NODE_NONE;
  check(ctn_reshape(g, x, 2, two, &y), "ctn_reshape");
  return y;
}

// u8 affine parameters of a range that holds 0.
struct Affine {
  float scale = 1.0f;
  uint8_t zp = 0;
};
Affine affine_u8(const QRange &r) {
  const double lo = std::min(0.0, static_cast<double>(r.lo)), hi = std::max(0.0, static_cast<double>(r.hi));
  Affine a;
  if (hi - lo <= 0.0) return a;
  a.scale = static_cast<float>((hi - lo) / 255.0);
  a.zp = static_cast<uint8_t>(std::clamp(std::lround(-lo / a.scale), 0L, 255L));
  return a;
}

// Symmetric per-output-channel i8 weights (zero point 0); `transpose` gives [I, O] for a linear
// layer (matmul's b operand) instead of [O, I].
struct QWeights {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int64_t> shape;
};
QWeights quantize_weights(const QLayer &l, bool transpose) {
  const int64_t o_count = l.wshape[0];
  const size_t per = l.w.size() / static_cast<size_t>(o_count);
  QWeights r;
  r.q.resize(l.w.size());
  r.scale.resize(static_cast<size_t>(o_count));
  r.shape = transpose ? std::vector<int64_t>{l.wshape[1], o_count} : l.wshape;
  for (size_t o = 0; o < static_cast<size_t>(o_count); ++o) {
    float m = 0.0f;
    for (size_t j = 0; j < per; ++j) m = std::max(m, std::fabs(l.w[o * per + j]));
    const float s = m > 0.0f ? m / 127.0f : 1.0f;
    r.scale[o] = s;
    for (size_t j = 0; j < per; ++j) {
      const auto v = static_cast<int8_t>(std::clamp(std::lround(l.w[o * per + j] / s), -127L, 127L));
      r.q[transpose ? j * static_cast<size_t>(o_count) + o : o * per + j] = v;
    }
  }
  return r;
}

// bias / (x_scale * w_scale[o]) rounded to i32 (saturated).
std::vector<int32_t> quantize_bias(const QLayer &l, float x_scale, const std::vector<float> &w_scale) {
  std::vector<int32_t> b(l.b.size());
  for (size_t o = 0; o < b.size(); ++o) {
    const double v = std::nearbyint(static_cast<double>(l.b[o]) / (static_cast<double>(x_scale) * w_scale[o]));
    b[o] = static_cast<int32_t>(std::clamp(v, -2147483647.0, 2147483647.0));
  }
  return b;
}

struct QScalar {
  ctn_node scale, zp;
};
QScalar scalar_params(ctn_graph *g, const Affine &a) {
  return {constant(g, CTN_F32, {}, &a.scale), constant(g, CTN_U8, {}, &a.zp)};
}

// One hidden layer of the int8 graph: u8 `xq` (parameters `in`) -> u8 with parameters `out`.
ctn_node quantized_hidden(ctn_graph *g, const QLayer &l, ctn_node xq, const Affine &in, const Affine &out) {
  const QWeights w = quantize_weights(l, !l.conv);
  const std::vector<int32_t> bias = quantize_bias(l, in.scale, w.scale);
  const int64_t o = l.wshape[0];
  const std::vector<int8_t> wzp(static_cast<size_t>(o), 0);
  const QScalar qi = scalar_params(g, in), qo = scalar_params(g, out);
  std::vector<ctn_node> ins = {xq,
                               qi.scale,
                               qi.zp,
                               constant(g, CTN_I8, w.shape, w.q.data()),
                               constant(g, CTN_F32, {o}, w.scale.data()),
                               constant(g, CTN_I8, {o}, wzp.data()),
                               qo.scale,
                               qo.zp,
                               constant(g, CTN_I32, {o}, bias.data())};
  if (!l.conv) return op(g, CTN_OP_QLINEAR_MATMUL, ins);  // relu: out.zp is 0 (range from 0)
  ctn_node y = op(g, CTN_OP_QLINEAR_CONV2D, ins, {1, 1, l.pad, l.pad, 1, 1, 1, l.relu ? CTN_ACT_RELU : CTN_ACT_NONE});
  if (!l.pool) return y;
  // No u8 max pool: pool the dequantized values; requantizing them with the same parameters
  // gives back the same integers (max commutes with the monotonic affine map).
  ctn_node f = max_pool2(g, op(g, CTN_OP_DEQUANTIZE_LINEAR, {y, qo.scale, qo.zp}));
  return op(g, CTN_OP_QUANTIZE_LINEAR, {f, qo.scale, qo.zp});
}

// The logits: matmul_integer (i32), dequantized with x_scale * w_scale[o], plus the f32 bias.
ctn_node quantized_logits(ctn_graph *g, const QLayer &l, ctn_node xq, const Affine &in) {
  const QWeights w = quantize_weights(l, true);
  const int64_t o = l.wshape[0];
  const std::vector<int8_t> wzp(static_cast<size_t>(o), 0);
  const std::vector<int32_t> izp(static_cast<size_t>(o), 0);
  std::vector<float> scale(static_cast<size_t>(o));
  for (size_t k = 0; k < scale.size(); ++k) scale[k] = in.scale * w.scale[k];
  ctn_node acc = op(g, CTN_OP_MATMUL_INTEGER,
                    {xq, constant(g, CTN_I8, w.shape, w.q.data()), constant(g, CTN_U8, {}, &in.zp),
                     constant(g, CTN_I8, {o}, wzp.data())});
  ctn_node f = op(g, CTN_OP_DEQUANTIZE_LINEAR,
                  {acc, constant(g, CTN_F32, {o}, scale.data()), constant(g, CTN_I32, {o}, izp.data())});
  ctn_node y = CTN_NODE_NONE;
  check(ctn_add(g, f, constant(g, CTN_F32, {o}, l.b.data()), &y), "ctn_add (bias)");
  return y;
}

}  // namespace

QNet qnet_from_checkpoint(const std::string &path, const std::string &model, const CnnWidths &w) {
  ctn_checkpoint *raw = nullptr;
  check(ctn_checkpoint_load(path.c_str(), &raw), ("--checkpoint " + path).c_str());
  CheckpointPtr ck(raw);
  QNet net;
  if (model == "mlp") {
    net.input = {784};
    net.layers.push_back(read_linear(ck.get(), path, 1, 784, 512, true));
    net.layers.push_back(read_linear(ck.get(), path, 2, 512, 256, true));
    net.layers.push_back(read_linear(ck.get(), path, 3, 256, 10, false));
    return net;
  }
  if (model != "cnn") throw UsageError("quantize supports the mlp and cnn models, not '" + model + "'");
  net.input = {1, 28, 28};
  int64_t in = 1;
  int index = 0;
  for (int64_t c : {w.c1, w.c2, w.c3}) {
    if (c <= 0) continue;
    net.layers.push_back(read_conv(ck.get(), path, ++index, in, c, w));
    in = c;
  }
  net.layers.push_back(read_linear(ck.get(), path, 1, w.last() * w.side() * w.side(), w.fc, true));
  net.layers.push_back(read_linear(ck.get(), path, 2, w.fc, 10, false));
  return net;
}

QGraph build_float_graph(ctn_context *ctx, const QNet &net, int64_t batch) {
  QGraph q = new_graph(ctx, net, batch);
  ctn_graph *g = q.graph.get();
  ctn_node h = q.x;
  for (const QLayer &l : net.layers) {
    if (!l.conv) h = flatten(g, h);
    q.taps.push_back(h);
    const int64_t o = l.wshape[0];
    ctn_node w = constant(g, CTN_F32, l.wshape, l.w.data()), y = CTN_NODE_NONE;
    if (l.conv) {
      check(ctn_conv2d(g, h, w, 1, 1, l.pad, l.pad, 1, 1, 1, &y), "ctn_conv2d");
      check(ctn_add(g, y, constant(g, CTN_F32, {o, 1, 1}, l.b.data()), &y), "ctn_add (bias)");
    } else {
      check(ctn_matmul(g, h, w, 0, 1, &y), "ctn_matmul");
      check(ctn_add(g, y, constant(g, CTN_F32, {o}, l.b.data()), &y), "ctn_add (bias)");
    }
    if (l.relu) check(ctn_relu(g, y, &y), "ctn_relu");
    h = l.pool ? max_pool2(g, y) : y;
  }
  q.logits = h;
  return q;
}

std::vector<QRange> calibrate(const QGraph &f, ctn_loader *loader, int64_t batches) {
  // Tap 0 is the input itself: its range is read from the fed batch.
  std::vector<ctn_node> outs(f.taps.begin() + 1, f.taps.end());
  ctn_plan *raw = nullptr;
  check(ctn_plan_compile(f.graph.get(), static_cast<uint32_t>(outs.size()), outs.data(), nullptr, &raw),
        "ctn_plan_compile (calibration)");
  PlanPtr plan(raw);
  std::vector<TensorPtr> tensors;
  std::vector<ctn_tensor *> out_ptrs;
  for (uint32_t i = 0; i < outs.size(); ++i) {
    ctn_tensor *t = nullptr;
    check(ctn_plan_output_create(plan.get(), i, &t), "ctn_plan_output_create");
    tensors.emplace_back(t);
    out_ptrs.push_back(t);
  }
  ctn_tensor *xi = nullptr, *yi = nullptr;
  check(ctn_loader_batch_create(loader, &xi, &yi), "ctn_loader_batch_create");
  TensorPtr x(xi), y(yi);
  check(ctn_loader_reset(loader, 0), "ctn_loader_reset");
  std::vector<QRange> ranges(f.taps.size());
  std::vector<float> buf;
  auto widen = [&](QRange &r, ctn_tensor *t) {
    int64_t numel = 0;
    check(ctn_tensor_numel(t, &numel), "ctn_tensor_numel");
    buf.resize(static_cast<size_t>(numel));
    check(ctn_tensor_read(t, buf.data(), buf.size() * sizeof(float)), "ctn_tensor_read");
    const auto [lo, hi] = std::minmax_element(buf.begin(), buf.end());
    r.lo = std::min(r.lo, *lo);
    r.hi = std::max(r.hi, *hi);
    // min/max skip NaN; a NaN anywhere poisons the range (std::min keeps a NaN first operand).
    if (!std::all_of(buf.begin(), buf.end(), [](float e) { return std::isfinite(e); }))
      r.lo = std::numeric_limits<float>::quiet_NaN();
  };
  for (int64_t b = 0; b < batches; ++b) {
    int32_t n = 0;
    check(ctn_loader_next(loader, x.get(), y.get(), &n), "ctn_loader_next");
    if (n == 0) throw Failure("--calib " + std::to_string(batches) + ": the training set has only " + std::to_string(b) + " batches");
    const ctn_tensor *feeds[1] = {x.get()};
    check(ctn_plan_run(plan.get(), 1, &f.x, feeds, static_cast<uint32_t>(out_ptrs.size()), out_ptrs.data()),
          "ctn_plan_run (calibration)");
    widen(ranges[0], x.get());
    for (size_t i = 0; i < tensors.size(); ++i) widen(ranges[i + 1], tensors[i].get());
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (!std::isfinite(ranges[i].lo) || !std::isfinite(ranges[i].hi))
      throw Failure("calibration: the input of layer " + std::to_string(i + 1) + " reached NaN or infinity");
  }
  return ranges;
}

QGraph build_quantized_graph(ctn_context *ctx, const QNet &net, const std::vector<QRange> &ranges, int64_t batch) {
  if (ranges.size() != net.layers.size() || net.layers.empty() || net.layers.back().conv)
    throw Failure("quantize: one range per layer and a linear last layer are needed");
  QGraph q = new_graph(ctx, net, batch);
  ctn_graph *g = q.graph.get();
  Affine in = affine_u8(ranges[0]);
  const QScalar q0 = scalar_params(g, in);
  ctn_node h = op(g, CTN_OP_QUANTIZE_LINEAR, {q.x, q0.scale, q0.zp});
  for (size_t i = 0; i + 1 < net.layers.size(); ++i) {
    const QLayer &l = net.layers[i];
    if (!l.conv) h = flatten(g, h);
    const Affine out = affine_u8(ranges[i + 1]);
    h = quantized_hidden(g, l, h, in, out);
    in = out;
  }
  q.logits = quantized_logits(g, net.layers.back(), flatten(g, h), in);
  return q;
}

std::string int8_steps(ctn_plan *plan) {
  std::string out;
  for (const char *name : {CTN_OP_QLINEAR_CONV2D, CTN_OP_QLINEAR_MATMUL, CTN_OP_CONV2D_INTEGER, CTN_OP_MATMUL_INTEGER,
                           CTN_OP_QUANTIZE_LINEAR, CTN_OP_DEQUANTIZE_LINEAR}) {
    uint32_t n = 0;
    check(ctn_plan_backend_steps(plan, "cpu", name, &n), "ctn_plan_backend_steps");
    if (n > 0) out += (out.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

}  // namespace ctn_cli
