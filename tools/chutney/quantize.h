// Post-training static quantization (int8) of a feed-forward network of convolutions and fully
// connected layers (the CLI's mlp and cnn, batch norm folded into the convolutions): calibration
// of per-tensor activation ranges on f32 batches, per-output-channel symmetric i8 weights,
// per-tensor asymmetric u8 activations, and an inference graph of the ABI's int8 ops
// (qlinear_conv2d, qlinear_matmul, matmul_integer, quantize_linear, dequantize_linear) that
// ctn_graph_save writes and ctn_graph_load reloads. `chutney quantize` (cmd_quantize.cpp) uses
// it; the network description (QNet) is independent of where the weights come from, so an
// imported model that fits the same shape can be described and quantized the same way.
#pragma once

#include <chutney/chutney.h>
#include <chutney/data.h>

#include <string>
#include <vector>

#include "cli.h"
#include "models.h"

namespace ctn_cli {

// One layer: y = act(conv2d(x, w) + b) [then 2x2 max pool] or y = act(x @ w^T + b); a linear
// layer after a 4-d activation flattens it first.
struct QLayer {
  bool conv = false;
  std::vector<int64_t> wshape;  // conv [O, C, K, K]; linear [O, I]
  std::vector<float> w, b;      // f32 weights (row-major) and bias [O]
  int32_t pad = 0;              // conv: padding on each side (stride 1)
  bool relu = false;
  bool pool = false;            // conv: 2x2 max pool after the activation
};

struct QNet {
  std::vector<int64_t> input;  // per-sample input shape: {784} or {1, 28, 28}
  std::vector<QLayer> layers;  // the last is a linear layer without activation (the logits)
};

// The network of `model` ("mlp" or "cnn" with widths `w`) with the weights of checkpoint `path`
// (names as the layer library gives them: conv1.weight, batch_norm1.running_var, linear2.bias...);
// batch norm is folded into the preceding convolution (eps 1e-5, the CLI's). A Failure names
// a missing tensor or a shape that does not fit.
QNet qnet_from_checkpoint(const std::string &path, const std::string &model, const CnnWidths &w);

// A graph built from a QNet: input "x" [batch, ...input] f32 and logits f32 [batch, classes].
struct QGraph {
  GraphPtr graph;
  ctn_node x = CTN_NODE_NONE;
  ctn_node logits = CTN_NODE_NONE;
  std::vector<ctn_node> taps;  // f32 graph only: the input of each layer (after pool / flatten)
};

// The f32 graph (calibration and the reference accuracy).
QGraph build_float_graph(ctn_context *ctx, const QNet &net, int64_t batch);

// Range of the values seen at one tap (0 always included: u8 with a zero point that is exact).
struct QRange {
  float lo = 0.0f, hi = 0.0f;
};

// Runs `batches` batches of `loader` (from its epoch 0) through `f` (compiled here) and returns
// min/max of every tap (the first is the input). Failure when the loader has fewer batches.
std::vector<QRange> calibrate(const QGraph &f, ctn_loader *loader, int64_t batches);

// The int8 inference graph: quantize_linear at the input, qlinear_conv2d (relu fused) and
// qlinear_matmul (relu by the output's zero point 0: the range of a relu's output starts at 0)
// inside, max pooling on the dequantized values (exact: requantized with the same scale), and
// matmul_integer + dequantize_linear + an f32 bias for the logits.
QGraph build_quantized_graph(ctn_context *ctx, const QNet &net, const std::vector<QRange> &ranges, int64_t batch);

// "qlinear_conv2d 2, qlinear_matmul 1, ..." : the int8 ops among `plan`'s CPU steps ("none").
std::string int8_steps(ctn_plan *plan);

}  // namespace ctn_cli
