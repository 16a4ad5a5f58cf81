// Writing models out: `chutney onnx export IN OUT.onnx` (a chutney graph file, a checkpoint of the
// CLI's models, or an ONNX model) and the files `chutney train --export-onnx / --save-model`
// writes after training (docs/MODELS.md).
#include <chutney/checkpoint.h>
#include <chutney/onnx.h>

#include "models.h"
#include "onnx_cli.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace ctn_cli {

void write_inference_model(const BuiltModel &em, ctn_plan *plan, const std::string &graph_path,
                           const std::string &onnx_path) {
  const char *names[1] = {"logits"};
  if (!graph_path.empty()) {
    check(ctn_graph_save(em.graph.get(), plan, 1, &em.logits, names, nullptr, graph_path.c_str()),
          ("ctn_graph_save " + graph_path).c_str());
    std::printf("wrote %s\n", graph_path.c_str());
  }
  if (!onnx_path.empty()) {
    check(ctn_onnx_export(em.graph.get(), plan, 1, &em.logits, names, onnx_path.c_str()),
          ("ctn_onnx_export " + onnx_path).c_str());
    std::printf("wrote %s\n", onnx_path.c_str());
  }
}

namespace {

const char kExportUsage[] =
    "usage: chutney onnx export IN OUT.onnx [--model mlp|cnn] [--cnn-widths W] [--batch-size N]\n"
    "\n"
    "IN is a chutney graph file (ctn_graph_save, `chutney train --save-model`; its named outputs\n"
    "are exported), a checkpoint of `chutney train` (the model is rebuilt for inference from the\n"
    "checkpoint's \"model\" and \"cnn_widths\" metadata or the options, with batch size N, default 1,\n"
    "and its \"logits\" exported) or an ONNX model (imported and written back).\n";

struct Exported {
  GraphPtr graph;
  std::vector<ctn_node> outputs;
  std::vector<std::string> names;
};

Exported from_graph_file(ctn_context *ctx, const std::string &in) {
  Exported e;
  ctn_graph *g = nullptr;
  ctn_saved_graph *s = nullptr;
  check(ctn_graph_load(ctx, in.c_str(), &g, &s), ("ctn_graph_load " + in).c_str());
  e.graph.reset(g);
  uint32_t n = 0;
  ctn_status st = ctn_saved_graph_count(s, CTN_SAVED_OUTPUTS, &n);
  for (uint32_t i = 0; st == CTN_OK && i < n; ++i) {
    const char *name = nullptr;
    ctn_node node = CTN_NODE_NONE;
    st = ctn_saved_graph_entry(s, CTN_SAVED_OUTPUTS, i, &name, &node);
    if (st == CTN_OK) {
      e.outputs.push_back(node);
      e.names.push_back(name);
    }
  }
  ctn_saved_graph_release(s);
  check(st, "ctn_saved_graph_entry");
  if (e.outputs.empty()) throw Failure(in + " names no outputs: nothing to export");
  return e;
}

Exported from_onnx(ctn_context *ctx, const std::string &in) {
  LoadedModel m = load_onnx(ctx, in, {}, 0);
  Exported e;
  e.graph = std::move(m.graph);
  e.outputs = m.output_nodes;
  e.names = m.output_names;
  return e;
}

int export_checkpoint(ctn_context *ctx, const ParsedArgs &args, const std::string &in, const std::string &out,
                      const std::string &model_meta, const std::string &widths_meta) {
  const std::string model = args.str("model", model_meta.empty() ? "mlp" : model_meta);
  const CnnWidths w = parse_widths(args.str("cnn-widths", widths_meta.empty() ? "32,64,128" : widths_meta), "--cnn-widths");
  (void)model_spec(model, w);
  BuiltModel em = build_model(ctx, model, args.integer("batch-size", 1, 1, 100000), 0, false, OptimConfig{}, w);
  PlanPtr plan = compile(em.graph.get(), em.logits, "ctn_plan_compile (export)");
  uint32_t n = 0;
  const char *const *names = nullptr;
  const ctn_node *nodes = nullptr;
  check(ctn_model_variables(em.model.get(), CTN_VAR_PARAMETER | CTN_VAR_BUFFER, &n, &names, &nodes), "ctn_model_variables");
  check(ctn_plan_load_variables(plan.get(), n, names, nodes, in.c_str()), ("loading " + model + " weights from " + in).c_str());
  write_inference_model(em, plan.get(), "", out);
  return kExitOk;
}

}  // namespace

int onnx_export_main(int argc, char **argv) {
  if (argc >= 1 && (!std::strcmp(argv[0], "--help") || !std::strcmp(argv[0], "-h"))) {
    std::fputs(kExportUsage, stdout);
    return kExitOk;
  }
  std::vector<std::string> pos;
  std::vector<char *> opts;
  for (int i = 0; i < argc; ++i) {
    if (argv[i][0] == '-' && argv[i][1] == '-') {
      opts.push_back(argv[i]);
      if (i + 1 < argc) opts.push_back(argv[++i]);
    } else {
      pos.push_back(argv[i]);
    }
  }
  if (pos.size() != 2) throw UsageError("onnx export takes IN and OUT.onnx (see chutney onnx export --help)");
  static const CommandSpec spec{"onnx export", "", nullptr,
                                {{"model", "NAME", ""}, {"cnn-widths", "W", ""}, {"batch-size", "N", ""}}, nullptr};
  const ParsedArgs args(spec, static_cast<int>(opts.size()), opts.data());
  const std::string &in = pos[0], &out = pos[1];
  ContextPtr ctx = open_context("", 0);
  const bool is_onnx = in.size() > 5 && in.compare(in.size() - 5, 5, ".onnx") == 0;
  if (!is_onnx) {
    ctn_checkpoint *ck = nullptr;
    check(ctn_checkpoint_load(in.c_str(), &ck), in.c_str());
    auto meta = [&](const char *key) {
      const char *v = nullptr;
      return std::string(ctn_checkpoint_metadata_get(ck, key, &v) == CTN_OK && v ? v : "");
    };
    const std::string format = meta("chutney.format"), model = meta("model"), widths = meta("cnn_widths");
    ctn_checkpoint_release(ck);
    if (format != "graph") return export_checkpoint(ctx.get(), args, in, out, model, widths);
  }
  Exported e = is_onnx ? from_onnx(ctx.get(), in) : from_graph_file(ctx.get(), in);
  std::vector<const char *> names;
  for (const std::string &s : e.names) names.push_back(s.c_str());
  check(ctn_onnx_export(e.graph.get(), nullptr, static_cast<uint32_t>(e.outputs.size()), e.outputs.data(), names.data(),
                        out.c_str()),
        ("ctn_onnx_export " + out).c_str());
  std::printf("wrote %s\n", out.c_str());
  return kExitOk;
}

}  // namespace ctn_cli
