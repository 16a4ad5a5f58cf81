// `chutney onnx run|info|test|export`: run an ONNX model on .npy/.npz inputs, describe a model and how
// it maps onto the available backends, run ONNX backend-test cases (onnx_test.cpp).
#include "npy.h"
#include "onnx_cli.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <map>

namespace ctn_cli {

LoadedModel load_onnx(ctn_context *ctx, const std::string &path, const NamedTensors &inputs, uint32_t flags) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<ctn_onnx_input_spec> specs;
    for (auto &[name, t] : inputs) specs.push_back({name.c_str(), t.get(), attempt == 1 ? 1u : 0u, 0});
    ctn_onnx_options o{};
    o.struct_size = sizeof o;
    o.flags = flags;
    o.n_inputs = static_cast<uint32_t>(specs.size());
    o.inputs = specs.data();
    ctn_graph *g = nullptr;
    ctn_onnx_model *m = nullptr;
    ctn_status st = ctn_onnx_load(ctx, path.c_str(), &o, &g, &m);
    if (st == CTN_ERR_UNSUPPORTED && attempt == 0 && !inputs.empty() && std::strstr(ctn_last_error(), "must be a constant"))
      continue;
    check(st, ("ctn_onnx_load " + path).c_str());
    LoadedModel r;
    r.graph.reset(g);
    r.model.reset(m);
    r.bound = attempt == 1;
    for (int kind : {CTN_ONNX_INPUTS, CTN_ONNX_OUTPUTS}) {
      uint32_t n = 0;
      check(ctn_onnx_model_count(m, kind, &n), "ctn_onnx_model_count");
      for (uint32_t i = 0; i < n; ++i) {
        const char *name = nullptr;
        ctn_node node = CTN_NODE_NONE;
        check(ctn_onnx_model_entry(m, kind, i, &name, &node), "ctn_onnx_model_entry");
        (kind == CTN_ONNX_INPUTS ? r.input_names : r.output_names).push_back(name);
        (kind == CTN_ONNX_INPUTS ? r.input_nodes : r.output_nodes).push_back(node);
      }
    }
    return r;
  }
  throw Failure("unreachable");
}

NamedTensors run_onnx(LoadedModel &m, const NamedTensors &inputs) {
  ctn_plan *p = nullptr;
  check(ctn_plan_compile(m.graph.get(), static_cast<uint32_t>(m.output_nodes.size()), m.output_nodes.data(), nullptr, &p),
        "ctn_plan_compile");
  PlanPtr plan(p);
  std::vector<ctn_node> feeds;
  std::vector<const ctn_tensor *> values;
  for (size_t i = 0; i < m.input_names.size(); ++i) {
    if (m.input_nodes[i] == CTN_NODE_NONE) continue;
    const ctn_tensor *v = nullptr;
    for (auto &[name, t] : inputs)
      if (name == m.input_names[i]) v = t.get();
    if (!v) throw Failure("no value for model input '" + m.input_names[i] + "' (give it with --input " + m.input_names[i] + "=FILE.npy)");
    feeds.push_back(m.input_nodes[i]);
    values.push_back(v);
  }
  NamedTensors outs;
  std::vector<ctn_tensor *> raw;
  for (size_t i = 0; i < m.output_nodes.size(); ++i) {
    ctn_tensor *t = nullptr;
    check(ctn_plan_output_create(plan.get(), static_cast<uint32_t>(i), &t), "ctn_plan_output_create");
    outs.emplace_back(m.output_names[i], TensorPtr(t));
    raw.push_back(t);
  }
  check(ctn_plan_run(plan.get(), static_cast<uint32_t>(feeds.size()), feeds.data(), values.data(),
                     static_cast<uint32_t>(raw.size()), raw.data()),
        "ctn_plan_run");
  return outs;
}

namespace {

const char kUsage[] =
    "usage: chutney onnx run MODEL.onnx [--input NAME=FILE.npy | --input FILE.npz]... --output-dir DIR\n"
    "                        [--backend LIST] [--initializers-as-constants]\n"
    "       chutney onnx info MODEL.onnx [--input NAME=FILE.npy]...\n"
    "       chutney onnx test DIR [options]        (chutney onnx test --help)\n"
    "       chutney onnx export IN OUT.onnx [options] (chutney onnx export --help)\n"
    "\n"
    "run:  imports the model, feeds each input from its .npy file (or every array of an .npz, by\n"
    "      name; the files' shapes fix symbolic dimensions) and writes each output as DIR/NAME.npy.\n"
    "info: lists inputs, outputs, initializers and op types, whether the importer supports each\n"
    "      and, per available backend, whether the ops it lowers to run there (for the --input\n"
    "      shapes; without --input, symbolic input dimensions are taken as 1).\n"
    "test: runs ONNX backend-test cases (model.onnx + test_data_set_*/input_N.pb, output_N.pb).\n"
    "export: writes a chutney graph file, a `chutney train` checkpoint or an ONNX model as ONNX.\n";

struct Cli {
  std::string model, out_dir, backends;
  NamedTensors inputs;
  bool constants = false;
};

Cli parse(int argc, char **argv) {
  Cli c;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--input") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos) {
        for (auto &e : npz_read(v)) c.inputs.push_back(std::move(e));
      } else {
        std::string file = v.substr(eq + 1);
        bool npz = file.size() > 4 && file.compare(file.size() - 4, 4, ".npz") == 0;
        if (npz) throw UsageError("--input NAME=FILE takes a .npy file; give an .npz alone: --input FILE.npz");
        c.inputs.emplace_back(v.substr(0, eq), npy_read(file));
      }
    } else if (a == "--output-dir") {
      c.out_dir = value();
    } else if (a == "--backend") {
      c.backends = value();
    } else if (a == "--initializers-as-constants") {
      c.constants = true;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option " + a);
    } else if (c.model.empty()) {
      c.model = a;
    } else {
      throw UsageError("unexpected argument " + a);
    }
  }
  if (c.model.empty()) throw UsageError("missing MODEL.onnx");
  return c;
}

std::string file_name(std::string name) {
  for (char &ch : name)
    if (ch == '/' || ch == '\\' || ch == ':' || ch == '\0') ch = '_';
  return name.empty() || name == "." || name == ".." ? "_" + name : name;
}

int run_cmd(int argc, char **argv) {
  Cli c = parse(argc, argv);
  if (c.out_dir.empty()) throw UsageError("missing --output-dir DIR");
  ContextPtr ctx = open_context(c.backends, 0);
  LoadedModel m = load_onnx(ctx.get(), c.model, c.inputs, c.constants ? CTN_ONNX_INITIALIZERS_AS_CONSTANTS : 0);
  NamedTensors outs = run_onnx(m, c.inputs);
  // mkdir -p: every missing component of the output directory.
  for (size_t pos = 1; pos <= c.out_dir.size(); ++pos)
    if (pos == c.out_dir.size() || c.out_dir[pos] == '/') ::mkdir(c.out_dir.substr(0, pos).c_str(), 0777);
  struct stat st;
  if (::stat(c.out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Failure("cannot create the directory " + c.out_dir);
  for (auto &[name, t] : outs) {
    std::string path = c.out_dir + "/" + file_name(name) + ".npy";
    npy_write(path, t.get());
    ctn_dtype dt;
    uint32_t nd = 0;
    int64_t shape[CTN_MAX_DIMS];
    check(ctn_tensor_dtype(t.get(), &dt), "ctn_tensor_dtype");
    check(ctn_tensor_shape(t.get(), &nd, shape), "ctn_tensor_shape");
    std::string s;
    for (uint32_t k = 0; k < nd; ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
    std::printf("%s: %s[%s] -> %s\n", name.c_str(), ctn_dtype_name(dt), s.c_str(), path.c_str());
  }
  return kExitOk;
}

int info_cmd(int argc, char **argv) {
  Cli c = parse(argc, argv);
  ContextPtr ctx = open_context(c.backends, 0);
  ctn_graph *g = nullptr;
  ctn_onnx_model *raw = nullptr;
  ctn_onnx_options o{};
  o.struct_size = sizeof o;
  o.flags = CTN_ONNX_INSPECT_ONLY;
  check(ctn_onnx_load(ctx.get(), c.model.c_str(), &o, &g, &raw), ("ctn_onnx_load " + c.model).c_str());
  OnnxModelPtr inspect(raw);
  int64_t opset = 0, ir = 0;
  check(ctn_onnx_model_version(raw, &opset, &ir), "ctn_onnx_model_version");
  std::printf("model: %s (IR version %lld, opset %lld)\n", c.model.c_str(), static_cast<long long>(ir), static_cast<long long>(opset));
  const char *titles[] = {"inputs", "outputs", "initializers"};
  for (int kind : {CTN_ONNX_INPUTS, CTN_ONNX_OUTPUTS, CTN_ONNX_INITIALIZERS}) {
    uint32_t n = 0;
    check(ctn_onnx_model_count(raw, kind, &n), "ctn_onnx_model_count");
    std::printf("%s: %u", titles[kind], n);
    for (uint32_t i = 0; i < n && kind != CTN_ONNX_INITIALIZERS; ++i) {
      const char *name;
      check(ctn_onnx_model_entry(raw, kind, i, &name, nullptr), "ctn_onnx_model_entry");
      std::printf("%s %s", i ? "," : "", name);
    }
    std::printf("\n");
  }
  // Import for real to see where the lowered ops run. Without --input, symbolic input dims
  // (a dynamic batch) are taken as 1 so that a dynamic model still shows its real op list.
  std::string load_error;
  LoadedModel m;
  try {
    m = load_onnx(ctx.get(), c.model, c.inputs, c.inputs.empty() ? CTN_ONNX_SYMBOLIC_DIMS_AS_ONE : 0);
  } catch (const Failure &e) {
    load_error = e.what();
  }
  if (c.inputs.empty() && load_error.empty())
    std::printf("(no --input: any symbolic input dimension is taken as 1, e.g. batch 1)\n");
  uint32_t backends = 0;
  check(ctn_context_backend_count(ctx.get(), &backends), "ctn_context_backend_count");
  std::vector<std::string> names;
  for (uint32_t b = 0; b < backends; ++b) {
    ctn_backend_info bi{};
    bi.struct_size = sizeof bi;
    check(ctn_context_backend_info(ctx.get(), b, &bi), "ctn_context_backend_info");
    if (bi.available) names.push_back(bi.name);
  }
  std::map<std::string, PlanPtr> plans;
  std::map<std::string, std::string> plan_errors;
  if (load_error.empty()) {
    for (const std::string &b : names) {
      ctn_compile_options co{};
      co.struct_size = sizeof co;
      // The backend first, the CPU behind it: what it cannot run falls back, as in any plan.
      const std::string pref = b == "cpu" ? b : b + ",cpu";
      co.backends = pref.c_str();
      ctn_plan *p = nullptr;
      if (ctn_plan_compile(m.graph.get(), static_cast<uint32_t>(m.output_nodes.size()), m.output_nodes.data(), &co, &p) == CTN_OK)
        plans[b].reset(p);
      else
        plan_errors[b] = ctn_last_error();
    }
  }
  ctn_onnx_model *types = load_error.empty() ? m.model.get() : raw;
  uint32_t n = 0;
  check(ctn_onnx_model_count(types, CTN_ONNX_OP_TYPES, &n), "ctn_onnx_model_count");
  std::printf("\n%-26s %5s  %-9s", "op type", "uses", "importer");
  for (const std::string &b : names) std::printf("  %-10s", b.c_str());
  std::printf("  lowered to\n");
  for (uint32_t i = 0; i < n; ++i) {
    const char *name, *lowered;
    uint32_t uses;
    int32_t supported;
    check(ctn_onnx_model_entry(types, CTN_ONNX_OP_TYPES, i, &name, nullptr), "ctn_onnx_model_entry");
    check(ctn_onnx_model_op_type(types, i, &uses, &supported, &lowered), "ctn_onnx_model_op_type");
    std::printf("%-26s %5u  %-9s", name, uses, supported ? "yes" : "NO");
    for (const std::string &b : names) {
      const char *cell = "-";
      std::string fallback;
      auto it = plans.find(b);
      if (supported && it != plans.end()) {
        cell = "yes";
        std::string ops = lowered;
        size_t pos = 0;
        while (!ops.empty() && pos != std::string::npos) {
          size_t comma = ops.find(',', pos);
          std::string op = ops.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
          pos = comma == std::string::npos ? comma : comma + 1;
          uint32_t here = 0, total = 0;
          ctn_plan_backend_steps(it->second.get(), b.c_str(), op.c_str(), &here);
          for (const std::string &o2 : names) {
            uint32_t k = 0;
            ctn_plan_backend_steps(it->second.get(), o2.c_str(), op.c_str(), &k);
            total += k;
          }
          if (here < total) fallback += (fallback.empty() ? "" : ",") + op;
        }
        if (!fallback.empty()) cell = "partly";
      }
      std::printf("  %-10s", cell);
    }
    const char *how = !supported ? "" : !load_error.empty() ? "(not imported: see below)" : *lowered ? lowered : "(folded at import)";
    std::printf("  %s\n", how);
  }
  if (!load_error.empty()) std::printf("\nnot imported: %s\n", load_error.c_str());
  for (auto &[b, e] : plan_errors) std::printf("\n%s: not compiled: %s\n", b.c_str(), e.c_str());
  std::printf("\n'partly': some of the chutney ops it lowers to fall back to another backend on that one.\n");
  return kExitOk;
}

int onnx_main_impl(int argc, char **argv) {
  if (argc < 1 || !std::strcmp(argv[0], "--help") || !std::strcmp(argv[0], "-h")) {
    std::fputs(kUsage, argc < 1 ? stderr : stdout);
    return argc < 1 ? kExitUsage : kExitOk;
  }
  std::string sub = argv[0];
  const bool help = argc > 1 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"));
  if (help && (sub == "run" || sub == "info")) {  // test and export have their own --help
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (sub == "run") return run_cmd(argc - 1, argv + 1);
  if (sub == "info") return info_cmd(argc - 1, argv + 1);
  if (sub == "test") return onnx_test_main(argc - 1, argv + 1);
  if (sub == "export") return onnx_export_main(argc - 1, argv + 1);
  throw UsageError("unknown subcommand '" + sub + "'");
}

}  // namespace

int onnx_main(int argc, char **argv) {
  try {
    return onnx_main_impl(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "chutney onnx: %s\n%s", e.what(), kUsage);
    return kExitUsage;
  }
}

}  // namespace ctn_cli
