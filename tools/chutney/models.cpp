// Built-in models of the CLI. Widths are chosen for a 2-core CPU: the CNN reaches >= 92.5 % on
// Fashion-MNIST in a few epochs (docs/BENCHMARKS.md).
#include "models.h"

#include <chutney/checkpoint.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

namespace ctn_cli {

CnnWidths parse_widths(const std::string &text, const std::string &option) {
  CnnWidths w;
  long long v[5] = {};
  std::string t = text;
  for (bool more = true; more;) {
    more = false;
    for (const char *flag : {",bn", ",valid", ",k3", ",k5"}) {
      const size_t n = std::strlen(flag);
      if (t.size() > n && t.compare(t.size() - n, n, flag) == 0) {
        if (flag[1] == 'b') w.bn = true;
        else if (flag[1] == 'v') w.valid = true;
        else w.kernel = flag[2] - '0';
        t.resize(t.size() - n);
        more = true;
      }
    }
  }
  // Three or four positive integers separated by commas, nothing else.
  int got = 0;
  bool ok = true;
  for (size_t pos = 0; ok && pos <= t.size();) {
    const size_t comma = t.find(',', pos), end = comma == std::string::npos ? t.size() : comma;
    const std::string item = t.substr(pos, end - pos);
    ok = got < 4 && !item.empty() && item.size() <= 6 && item.find_first_not_of("0123456789") == std::string::npos;
    if (ok) v[got++] = std::atoll(item.c_str());
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  ok = ok && (got == 3 || got == 4);
  for (int i = 0; ok && i < got; ++i) ok = v[i] >= 1 && v[i] <= (i == got - 1 ? 65536 : 4096);
  if (ok) {
    w.c1 = v[0];
    w.c2 = v[1];
    w.c3 = got == 4 ? v[2] : 0;
    w.fc = v[got - 1];
  }
  if (!ok || w.side() < 1) {
    throw UsageError(option + " expects C1,C2[,C3],FC[,bn][,valid][,k3] (positive integers, e.g. 32,64,128 or 32,64,128,bn,valid), got '" +
                     text + "'");
  }
  return w;
}

std::string widths_text(const CnnWidths &w) {
  return std::to_string(w.c1) + "," + std::to_string(w.c2) + "," + (w.c3 > 0 ? std::to_string(w.c3) + "," : "") +
         std::to_string(w.fc) + (w.bn ? ",bn" : "") + (w.valid ? ",valid" : "") + (w.kernel != 5 ? ",k" + std::to_string(w.kernel) : "");
}

ModelSpec model_spec(const std::string &name, const CnnWidths &w) {
  if (name == "mlp") return {"mlp", 128, "mlp 784-512-256-10"};
  if (name == "onnx") return {"onnx", 64, "an ONNX model (--model-onnx)"};
  if (name == "cnn") {
    const std::string bn = w.bn ? " batchnorm" : "", pad = w.valid ? " valid" : "";
    const std::string k = std::to_string(w.kernel);
    std::string d = "cnn";
    int64_t in = 1;
    for (int64_t c : {w.c1, w.c2, w.c3}) {
      if (c <= 0) continue;
      d += std::string(in == 1 ? " " : ", ") + "conv" + k + "x" + k + pad + "(" + std::to_string(in) + "->" +
           std::to_string(c) + ")" + bn + " relu maxpool2";
      in = c;
    }
    d += ", fc " + std::to_string(w.last() * w.side() * w.side()) + "-" + std::to_string(w.fc) + " relu, fc " +
         std::to_string(w.fc) + "-10";
    return {"cnn", 64, d};
  }
  throw UsageError("unknown model '" + name + "' (available: mlp, cnn)");
}

BuiltModel build_model(ctn_context *ctx, const std::string &name, int64_t batch, uint64_t seed,
                       bool training, const OptimConfig &optim, const CnnWidths &w) {
  model_spec(name);  // validates the name
  BuiltModel b;
  ctn_graph *g = nullptr;
  check(ctn_graph_create(ctx, 0, &g), "ctn_graph_create");
  b.graph.reset(g);
  ctn_model *m = nullptr;
  check(ctn_model_create(g, CTN_F32, seed, &m), "ctn_model_create");
  b.model.reset(m);
  check(ctn_model_set_training(m, training ? 1 : 0), "ctn_model_set_training");

  b.flat = name == "mlp";
  if (b.flat) {
    const int64_t shape[2] = {batch, 784};
    check(ctn_input(g, "x", CTN_F32, 2, shape, &b.x), "ctn_input (x)");
    const ctn_layer layers[] = {CTN_NN_LINEAR(512), CTN_NN_RELU(), CTN_NN_LINEAR(256),
                                CTN_NN_RELU(), CTN_NN_LINEAR(10)};
    check(ctn_nn_sequential(m, b.x, static_cast<uint32_t>(std::size(layers)), layers, &b.logits),
          "ctn_nn_sequential (mlp)");
  } else {
    const int64_t shape[4] = {batch, 1, 28, 28};
    check(ctn_input(g, "x", CTN_F32, 4, shape, &b.x), "ctn_input (x)");
    const auto fc = static_cast<int32_t>(w.fc), k = static_cast<int32_t>(w.kernel);
    std::vector<ctn_layer> layers;
    for (int64_t c : {w.c1, w.c2, w.c3}) {
      if (c <= 0) continue;
      const auto ch = static_cast<int32_t>(c);
      const int32_t pad = w.valid ? 0 : k / 2;  // same: 28, 14(, 7); valid: shrinks by k - 1
      // A batch norm's shift makes a conv bias redundant: leave it out (one pass less each way).
      const ctn_layer conv = CTN_NN_CONV2D(ch, k, 1, pad), conv_nb = CTN_NN_CONV2D_NO_BIAS(ch, k, 1, pad);
      layers.push_back(w.bn ? conv_nb : conv);
      if (w.bn) layers.push_back(CTN_NN_BATCH_NORM());
      layers.push_back(CTN_NN_RELU());
      layers.push_back(CTN_NN_MAX_POOL2D(2));  // halves (floor)
    }
    const ctn_layer head[] = {CTN_NN_FLATTEN(), CTN_NN_LINEAR(fc), CTN_NN_RELU(), CTN_NN_LINEAR(10)};
    layers.insert(layers.end(), std::begin(head), std::end(head));
    check(ctn_nn_sequential(m, b.x, static_cast<uint32_t>(layers.size()), layers.data(), &b.logits),
          "ctn_nn_sequential (cnn)");
  }
  if (training) add_training(b, batch, optim);
  return b;
}

void checkpoint_model(const std::string &path, std::string *model, std::string *widths) {
  ctn_checkpoint *ck = nullptr;
  check(ctn_checkpoint_load(path.c_str(), &ck), ("--checkpoint " + path).c_str());
  auto meta = [&](const char *key) {
    const char *v = nullptr;
    ctn_status st = ctn_checkpoint_metadata_get(ck, key, &v);
    return std::string(st == CTN_OK && v != nullptr ? v : "");
  };
  *model = meta("model");
  *widths = meta("cnn_widths");
  ctn_checkpoint_release(ck);
}

void add_training(BuiltModel &b, int64_t batch, const OptimConfig &optim) {
  ctn_graph *g = b.graph.get();
  ctn_model *m = b.model.get();
  const int64_t lshape[1] = {batch};
  check(ctn_input(g, "labels", CTN_I32, 1, lshape, &b.labels), "ctn_input (labels)");
  check(ctn_cross_entropy(g, b.logits, b.labels, &b.loss), "ctn_cross_entropy");
  ctn_optimizer opt{};
  opt.struct_size = sizeof opt;
  if (optim.name == "sgd") {
    opt.kind = CTN_OPTIM_SGD;
  } else if (optim.name == "adam") {
    opt.kind = CTN_OPTIM_ADAM;
  } else if (optim.name == "adamw") {
    opt.kind = CTN_OPTIM_ADAMW;
  } else {
    throw UsageError("unknown optimizer '" + optim.name + "' (available: sgd, adam, adamw)");
  }
  opt.lr = optim.lr;
  opt.momentum = opt.kind == CTN_OPTIM_SGD ? optim.momentum : 0.0;
  opt.weight_decay = optim.weight_decay;
  opt.clip_norm = optim.clip_norm;
  opt.loss_scale = optim.loss_scale;
  check(ctn_nn_minimize(m, b.loss, &opt, nullptr), "ctn_nn_minimize");
}

DatasetPtr open_fashion_mnist(const std::string &dir, const char *split) {
  ctn_dataset *ds = nullptr;
  try {
    check(ctn_dataset_open_fashion_mnist(dir.empty() ? nullptr : dir.c_str(), split, &ds),
          (std::string("loading the Fashion-MNIST ") + split + " set").c_str());
  } catch (const Failure &e) {
    // The library names the package for missing files; say it for corrupt ones too.
    std::string msg = e.what();
    if (msg.find("dataset-fashion-mnist") == std::string::npos) {
      msg += " (Fashion-MNIST comes with the Debian package dataset-fashion-mnist; --data-dir "
             "picks another directory)";
    }
    throw Failure(msg);
  }
  return DatasetPtr(ds);
}

LoaderPtr make_loader(ctn_dataset *ds, int64_t batch, bool flat, bool shuffle, uint64_t seed,
                      int32_t crop_padding, bool hflip, int32_t workers, int32_t shard_index,
                      int32_t shard_count) {
  ctn_loader_options o{};
  o.struct_size = sizeof o;
  o.flags = (flat ? CTN_LOADER_FLAT : 0u) | (shuffle ? CTN_LOADER_SHUFFLE | CTN_LOADER_DROP_LAST : 0u) |
            (hflip ? CTN_LOADER_HFLIP : 0u);
  o.batch_size = static_cast<int32_t>(batch);
  o.crop_padding = crop_padding;
  o.seed = seed;
  o.mean = kPixelMean;
  o.std = kPixelStd;
  o.num_workers = workers;
  o.shard_index = shard_index;
  o.shard_count = shard_count;
  ctn_loader *l = nullptr;
  check(ctn_loader_create(ds, &o, &l), "ctn_loader_create");
  return LoaderPtr(l);
}

void evaluate_part(ctn_plan *plan, const BuiltModel &eval, ctn_loader *loader, int32_t part, int32_t parts,
                   int64_t *correct, int64_t *total) {
  ctn_tensor *xi = nullptr, *yi = nullptr;
  check(ctn_loader_batch_create(loader, &xi, &yi), "ctn_loader_batch_create");
  TensorPtr x(xi), y(yi);
  ctn_tensor *raw = nullptr;
  check(ctn_plan_output_create(plan, 0, &raw), "ctn_plan_output_create");
  TensorPtr logits(raw);
  uint32_t ndim = 0;
  int64_t shape[CTN_MAX_DIMS] = {};
  check(ctn_tensor_shape(logits.get(), &ndim, shape), "ctn_tensor_shape");
  const int64_t rows = shape[0], classes = shape[1];
  std::vector<float> out(static_cast<size_t>(rows * classes));
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  const ctn_tensor *feeds[1] = {x.get()};
  ctn_tensor *outs[1] = {logits.get()};
  check(ctn_loader_reset(loader, 0), "ctn_loader_reset");
  *correct = 0;
  *total = 0;
  for (int64_t batch = 0;; ++batch) {
    int32_t n = 0;
    check(ctn_loader_next(loader, x.get(), y.get(), &n), "ctn_loader_next");
    if (n == 0) break;
    if (batch % parts != part) continue;  // another part's batch
    check(ctn_plan_run(plan, 1, &eval.x, feeds, 1, outs), "ctn_plan_run (eval)");
    check(ctn_tensor_read(logits.get(), out.data(), out.size() * sizeof(float)), "ctn_tensor_read");
    check(ctn_tensor_read(y.get(), labels.data(), labels.size() * sizeof(int32_t)),
          "ctn_tensor_read (labels)");
    for (int32_t r = 0; r < n; ++r) {
      const float *row = out.data() + static_cast<int64_t>(r) * classes;
      int64_t best = std::max_element(row, row + classes) - row;
      *correct += best == labels[static_cast<size_t>(r)] ? 1 : 0;
    }
    *total += n;
  }
}

double evaluate(ctn_plan *plan, const BuiltModel &eval, ctn_loader *loader) {
  int64_t correct = 0, total = 0;
  evaluate_part(plan, eval, loader, 0, 1, &correct, &total);
  return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
}

std::string placement(ctn_context *ctx, ctn_plan *plan) {
  uint32_t count = 0;
  check(ctn_context_backend_count(ctx, &count), "ctn_context_backend_count");
  std::string out;
  for (uint32_t i = 0; i < count; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    check(ctn_context_backend_info(ctx, i, &info), "ctn_context_backend_info");
    if (!info.available || info.name == nullptr) continue;
    uint32_t steps = 0;
    check(ctn_plan_backend_steps(plan, info.name, nullptr, &steps), "ctn_plan_backend_steps");
    if (steps == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::string(info.name) + " " + std::to_string(steps) + " steps";
  }
  return out.empty() ? "none" : out;
}

PlanPtr compile(ctn_graph *g, ctn_node output, const char *what, uint32_t precision) {
  ctn_plan *p = nullptr;
  ctn_compile_options co{};
  co.struct_size = sizeof co;
  co.precision = precision;
  check(ctn_plan_compile(g, 1, &output, &co, &p), what);
  return PlanPtr(p);
}

uint32_t parse_precision(const std::string &v) {
  if (v == "f32") return CTN_PRECISION_F32;
  if (v == "bf16") return CTN_PRECISION_BF16;
  if (v == "f16") return CTN_PRECISION_F16;
  throw UsageError("--precision expects f32, bf16 or f16, got '" + v + "'");
}

}  // namespace ctn_cli
