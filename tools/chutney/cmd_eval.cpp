// `chutney eval --checkpoint FILE`: test accuracy of a checkpoint written by `chutney train`
// (or any safetensors file holding the model's variables under the layer library's names).
#include <chutney/checkpoint.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "models.h"
#include "quantize.h"

namespace ctn_cli {
namespace {

struct SavedDeleter {
  void operator()(ctn_saved_graph *p) const { ctn_saved_graph_release(p); }
};

// --model-file: a chutney graph file (`chutney train --save-model`, `chutney quantize`) with an
// input "x" of the CLI's image shapes and its first output the logits.
int run_eval_model_file(const ParsedArgs &args) {
  const std::string path = args.str("model-file", "");
  ContextPtr ctx = open_context(args.str("backend", ""),
                                static_cast<int32_t>(args.integer("threads", 0, 1, 1024)));
  BuiltModel em;
  ctn_graph *g = nullptr;
  ctn_saved_graph *raw = nullptr;
  check(ctn_graph_load(ctx.get(), path.c_str(), &g, &raw), ("--model-file " + path).c_str());
  em.graph.reset(g);
  std::unique_ptr<ctn_saved_graph, SavedDeleter> saved(raw);
  uint32_t n_in = 0, n_out = 0;
  check(ctn_saved_graph_count(raw, CTN_SAVED_INPUTS, &n_in), "ctn_saved_graph_count");
  check(ctn_saved_graph_count(raw, CTN_SAVED_OUTPUTS, &n_out), "ctn_saved_graph_count");
  for (uint32_t i = 0; i < n_in; ++i) {
    const char *name = nullptr;
    ctn_node node = CTN_NODE_NONE;
    check(ctn_saved_graph_entry(raw, CTN_SAVED_INPUTS, i, &name, &node), "ctn_saved_graph_entry");
    if (name != nullptr && std::string(name) == "x") em.x = node;
  }
  if (em.x == CTN_NODE_NONE || n_out == 0) throw Failure(path + ": the model has no input \"x\" or no output");
  check(ctn_saved_graph_entry(raw, CTN_SAVED_OUTPUTS, 0, nullptr, &em.logits), "ctn_saved_graph_entry");
  ctn_dtype dt{};
  uint32_t nd = 0;
  int64_t s[CTN_MAX_DIMS] = {};
  check(ctn_node_info(g, em.x, &dt, &nd, s), "ctn_node_info");
  em.flat = nd == 2;
  if (dt != CTN_F32 || !((nd == 2 && s[1] == 784) || (nd == 4 && s[1] == 1 && s[2] == 28 && s[3] == 28)))
    throw Failure(path + ": input \"x\" is not f32 [B, 784] or [B, 1, 28, 28]");
  DatasetPtr test_ds = open_fashion_mnist(args.str("data-dir", CTN_FASHION_MNIST_DIR), "test");
  LoaderPtr loader = make_loader(test_ds.get(), s[0], em.flat, false, 0, 0, false, 1);
  PlanPtr plan = compile(g, em.logits, "ctn_plan_compile (eval)");
  const double acc = evaluate(plan.get(), em, loader.get());
  std::printf("%s: graph file, batch %lld\n", path.c_str(), static_cast<long long>(s[0]));
  std::printf("int8 ops: %s\n", int8_steps(plan.get()).c_str());
  std::printf("test accuracy: %.4f\n", acc);
  return kExitOk;
}

int run_eval(const ParsedArgs &args) {
  if (args.has("model-file")) {
    if (args.has("checkpoint")) throw UsageError("--model-file and --checkpoint exclude each other");
    return run_eval_model_file(args);
  }
  if (!args.has("checkpoint")) throw UsageError("--checkpoint FILE or --model-file FILE is required");
  const std::string path = args.str("checkpoint", "");
  std::string model, widths;
  checkpoint_model(path, &model, &widths);
  model = args.str("model", model.empty() ? "mlp" : model);
  const CnnWidths w =
      parse_widths(args.str("cnn-widths", widths.empty() ? "32,64,128" : widths), "--cnn-widths");
  const ModelSpec spec = model_spec(model, w);
  const int64_t batch = args.integer("batch-size", 1000, 1, 10000);

  DatasetPtr test_ds = open_fashion_mnist(args.str("data-dir", CTN_FASHION_MNIST_DIR), "test");
  LoaderPtr loader = make_loader(test_ds.get(), batch, model == "mlp", false, 0, 0, false, 1);
  ContextPtr ctx = open_context(args.str("backend", ""),
                                static_cast<int32_t>(args.integer("threads", 0, 1, 1024)));
  BuiltModel em = build_model(ctx.get(), model, batch, 0, false, OptimConfig{}, w);
  PlanPtr plan = compile(em.graph.get(), em.logits, "ctn_plan_compile (eval)");

  uint32_t n = 0;
  const char *const *names = nullptr;
  const ctn_node *nodes = nullptr;
  check(ctn_model_variables(em.model.get(), CTN_VAR_PARAMETER | CTN_VAR_BUFFER, &n, &names, &nodes),
        "ctn_model_variables");
  check(ctn_plan_load_variables(plan.get(), n, names, nodes, path.c_str()),
        ("loading " + model + " weights from " + path).c_str());
  double acc = evaluate(plan.get(), em, loader.get());
  std::printf("%s: %s\n", path.c_str(), spec.description.c_str());
  std::printf("test accuracy: %.4f\n", acc);
  return kExitOk;
}

}  // namespace

const CommandSpec &eval_command() {
  static const CommandSpec spec{
      "eval",
      "test accuracy of a checkpoint or a graph file on the Fashion-MNIST test set",
      "The model defaults to the checkpoint's \"model\" metadata (written by `chutney train`).\n"
      "A missing, truncated or corrupt checkpoint is an error (exit 1) naming the problem.\n"
      "--model-file evaluates a whole model (input \"x\", first output the logits) with its own\n"
      "batch size and prints the int8 ops its plan runs (a `chutney quantize` model).\n",
      {
          {"checkpoint", "FILE", "safetensors checkpoint to evaluate"},
          {"model-file", "FILE", "or a chutney graph file (`chutney quantize`, `chutney train --save-model`)"},
          {"model", "NAME", "mlp or cnn (default: the checkpoint's)"},
          {"cnn-widths", "C1,C2[,C3],FC[,bn][,valid][,k3]", "cnn widths (default: the checkpoint's, else 32,64,128)"},
          {"batch-size", "B", "images per evaluation step (default 1000)"},
          {"data-dir", "DIR", "directory of the Fashion-MNIST IDX files"},
          {"backend", "NAME", "preferred backends, ','-separated"},
          {"threads", "N", "host backend threads"},
      },
      run_eval};
  return spec;
}

}  // namespace ctn_cli
