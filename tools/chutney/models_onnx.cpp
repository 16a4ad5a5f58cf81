// `chutney train --model-onnx FILE.onnx`: an imported ONNX model as a CLI model, its floating
// initializers the parameters the optimizers train (ctn_model_adopt_variable, nn.h).
#include "models.h"
#include "onnx_cli.h"

#include <string>
#include <vector>

namespace ctn_cli {

namespace {

std::string shape_text(const std::vector<int64_t> &s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

std::vector<int64_t> node_shape(ctn_graph *g, ctn_node n, ctn_dtype *dtype) {
  uint32_t ndim = 0;
  int64_t shape[CTN_MAX_DIMS] = {};
  check(ctn_node_info(g, n, dtype, &ndim, shape), "ctn_node_info");
  return std::vector<int64_t>(shape, shape + ndim);
}

// The input shape the model takes for `batch` images: [batch, 784] or [batch, 1, 28, 28], from
// the model's own input (its batch dim, symbolic or not, is replaced).
std::vector<int64_t> input_shape(ctn_context *ctx, const std::string &path, int64_t batch, std::string *name) {
  LoadedModel probe = load_onnx(ctx, path, {}, CTN_ONNX_SYMBOLIC_DIMS_AS_ONE);
  if (probe.input_names.size() != 1)
    throw Failure("--model-onnx " + path + ": the model has " + std::to_string(probe.input_names.size()) +
                  " inputs; training takes a model with one image input");
  *name = probe.input_names[0];
  ctn_dtype dt = CTN_F32;
  std::vector<int64_t> s = node_shape(probe.graph.get(), probe.input_nodes[0], &dt);
  const bool flat = s.size() == 2 && s[1] == 784;
  const bool image = s.size() == 4 && s[1] == 1 && s[2] == 28 && s[3] == 28;
  if (dt != CTN_F32 || (!flat && !image))
    throw Failure("--model-onnx " + path + ": input '" + *name + "' is " + ctn_dtype_name(dt) + " " + shape_text(s) +
                  " (symbolic dims as 1); Fashion-MNIST training needs f32 [N, 784] or [N, 1, 28, 28]");
  // A symbolic batch reads as 1 here; any other value is the model's fixed batch.
  if (s[0] != 1 && s[0] != batch)
    throw Failure("--model-onnx " + path + ": input '" + *name + "' has a fixed batch of " + std::to_string(s[0]) +
                  " " + shape_text(s) + ", asked for " + std::to_string(batch) + ": pass --batch-size " +
                  std::to_string(s[0]) + " --eval-batch-size " + std::to_string(s[0]) +
                  " (or export the model with a symbolic batch dimension)");
  s[0] = batch;
  return s;
}

}  // namespace

BuiltModel build_onnx_model(ctn_context *ctx, const std::string &path, int64_t batch, uint64_t seed, bool training,
                            const OptimConfig &optim) {
  std::string in_name;
  const std::vector<int64_t> in_shape = input_shape(ctx, path, batch, &in_name);
  NamedTensors inputs;
  inputs.emplace_back(in_name, make_tensor(CTN_F32, in_shape, nullptr));
  LoadedModel lm = load_onnx(ctx, path, inputs, 0);
  if (lm.bound || lm.input_nodes[0] == CTN_NODE_NONE)
    throw Failure("--model-onnx " + path + ": the model needs its input '" + in_name +
                  "' as a constant (an op reads its values), so it cannot be trained on batches");
  if (lm.output_nodes.empty()) throw Failure("--model-onnx " + path + ": the model has no output");

  BuiltModel b;
  b.graph = std::move(lm.graph);
  ctn_graph *g = b.graph.get();
  b.x = lm.input_nodes[0];
  b.logits = lm.output_nodes[0];
  b.flat = in_shape.size() == 2;
  ctn_dtype dt = CTN_F32;
  const std::vector<int64_t> out = node_shape(g, b.logits, &dt);
  if (dt != CTN_F32 || out != std::vector<int64_t>{batch, 10})
    throw Failure("--model-onnx " + path + ": output '" + lm.output_names[0] + "' is " + ctn_dtype_name(dt) + " " +
                  shape_text(out) + " for a batch of " + std::to_string(batch) + "; training needs the f32 logits [" +
                  std::to_string(batch) + ", 10] of the ten Fashion-MNIST classes");

  ctn_model *m = nullptr;
  check(ctn_model_create(g, CTN_F32, seed, &m), "ctn_model_create");
  b.model.reset(m);
  check(ctn_model_set_training(m, training ? 1 : 0), "ctn_model_set_training");
  uint32_t n = 0, adopted = 0;
  check(ctn_onnx_model_count(lm.model.get(), CTN_ONNX_INITIALIZERS, &n), "ctn_onnx_model_count");
  for (uint32_t i = 0; i < n; ++i) {
    const char *name = nullptr;
    ctn_node node = CTN_NODE_NONE;
    check(ctn_onnx_model_entry(lm.model.get(), CTN_ONNX_INITIALIZERS, i, &name, &node), "ctn_onnx_model_entry");
    ctn_dtype idt = CTN_F32;
    if (node == CTN_NODE_NONE) continue;
    node_shape(g, node, &idt);
    if (idt != CTN_F32) continue;  // integer initializers (shapes, indices) are constants
    check(ctn_model_adopt_variable(m, node, CTN_VAR_PARAMETER, name), ("initializer '" + std::string(name) + "'").c_str());
    ++adopted;
  }
  if (adopted == 0)
    throw Failure("--model-onnx " + path + ": the model has no f32 initializers, nothing to train");
  if (training) add_training(b, batch, optim);
  return b;
}

}  // namespace ctn_cli
