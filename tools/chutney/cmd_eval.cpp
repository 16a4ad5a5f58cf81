// `chutney eval --checkpoint FILE`: test accuracy of a checkpoint written by `chutney train`
// (or any safetensors file holding the model's variables under the layer library's names).
#include <chutney/checkpoint.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "models.h"

namespace ctn_cli {
namespace {

int run_eval(const ParsedArgs &args) {
  if (!args.has("checkpoint")) throw UsageError("--checkpoint FILE is required");
  const std::string path = args.str("checkpoint", "");
  // Validate the file before anything else, so a corrupt one is reported as such.
  ctn_checkpoint *ck = nullptr;
  check(ctn_checkpoint_load(path.c_str(), &ck), ("--checkpoint " + path).c_str());
  auto meta = [&](const char *key) {
    const char *v = nullptr;
    ctn_status st = ctn_checkpoint_metadata_get(ck, key, &v);
    return std::string(st == CTN_OK && v != nullptr ? v : "");
  };
  std::string model = meta("model");
  std::string widths = meta("cnn_widths");
  ctn_checkpoint_release(ck);
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
      "test accuracy of a checkpoint on the Fashion-MNIST test set",
      "The model defaults to the checkpoint's \"model\" metadata (written by `chutney train`).\n"
      "A missing, truncated or corrupt checkpoint is an error (exit 1) naming the problem.\n",
      {
          {"checkpoint", "FILE", "safetensors checkpoint to evaluate (required)"},
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
