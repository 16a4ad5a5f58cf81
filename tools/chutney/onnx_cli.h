// Shared pieces of `chutney onnx run|info|test`.
#pragma once

#include <chutney/onnx.h>

#include "cli.h"

#include <string>
#include <utility>
#include <vector>

namespace ctn_cli {

struct OnnxModelDeleter {
  void operator()(ctn_onnx_model *p) const { ctn_onnx_model_release(p); }
};
using OnnxModelPtr = std::unique_ptr<ctn_onnx_model, OnnxModelDeleter>;

using NamedTensors = std::vector<std::pair<std::string, TensorPtr>>;

struct LoadedModel {
  GraphPtr graph;
  OnnxModelPtr model;
  std::vector<std::string> input_names, output_names;
  std::vector<ctn_node> input_nodes, output_nodes;  // input nodes: NONE when bound as a constant
  bool bound = false;                               // inputs were baked in as constants
};

// Loads `path` with the given input values fixing the inputs' shapes. When an op needs one of
// them as a constant (a Reshape's shape...), loads again with every given input bound.
LoadedModel load_onnx(ctn_context *ctx, const std::string &path, const NamedTensors &inputs, uint32_t flags);

// Compiles the model's outputs and runs them once with `inputs` (by name).
NamedTensors run_onnx(LoadedModel &m, const NamedTensors &inputs);

int onnx_test_main(int argc, char **argv);  // onnx_test.cpp
int onnx_export_main(int argc, char **argv);  // onnx_export.cpp

struct BuiltModel;
// Writes the CLI model `em` (inference graph) with the variables' values in `plan`: a chutney graph
// file at graph_path and/or an ONNX model at onnx_path (either may be empty), output "logits".
void write_inference_model(const BuiltModel &em, ctn_plan *plan, const std::string &graph_path,
                           const std::string &onnx_path);

}  // namespace ctn_cli
