// `chutney quantize --checkpoint FILE --calib N --out MODEL`: post-training static int8
// quantization of a `chutney train` checkpoint (quantize.h), saved as a chutney graph file that
// `chutney eval --model-file MODEL` scores.
#include <sys/stat.h>
#include <time.h>

#include <chutney/checkpoint.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "ckpt_dir.h"
#include "cli.h"
#include "models.h"
#include "quantize.h"

namespace ctn_cli {
namespace {

constexpr int64_t kCalibBatch = 64;  // images per calibration batch

// The output must be a regular file or a new name: a FIFO, device or directory is refused
// (ctn_graph_save writes a temporary and renames it over `path`, which would replace them).
void check_model_output(const std::string &path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw Failure("--out " + path + " exists and is not a regular file; nothing was written");
  check_output_file("out", path);
}

// --bench R: best CPU seconds per run of each plan on one test batch, the plans interleaved
// (f32, int8, f32, int8...) so both see the same machine load.
void bench(ctn_plan *f32, const QGraph &fg, ctn_plan *i8, const QGraph &qg, ctn_loader *loader, int64_t rounds) {
  ctn_tensor *xi = nullptr, *yi = nullptr;
  check(ctn_loader_batch_create(loader, &xi, &yi), "ctn_loader_batch_create");
  TensorPtr x(xi), y(yi);
  int32_t n = 0;
  check(ctn_loader_reset(loader, 0), "ctn_loader_reset");
  check(ctn_loader_next(loader, x.get(), y.get(), &n), "ctn_loader_next");
  ctn_tensor *raw = nullptr;
  check(ctn_plan_output_create(f32, 0, &raw), "ctn_plan_output_create");
  TensorPtr out(raw);
  const ctn_tensor *feeds[1] = {x.get()};
  ctn_tensor *outs[1] = {out.get()};
  double best[2] = {1e30, 1e30};
  for (int64_t r = 0; r <= rounds; ++r) {  // round 0 warms up
    for (int k = 0; k < 2; ++k) {
      const double t0 = process_cpu_seconds();
      check(ctn_plan_run(k == 0 ? f32 : i8, 1, k == 0 ? &fg.x : &qg.x, feeds, 1, outs), "ctn_plan_run (bench)");
      if (r > 0) best[k] = std::min(best[k], process_cpu_seconds() - t0);
    }
  }
  std::printf("CPU time per batch of %d (best of %lld, interleaved): f32 %.2f ms, int8 %.2f ms (%.2fx)\n", n,
              static_cast<long long>(rounds), best[0] * 1e3, best[1] * 1e3, best[0] / best[1]);
}

int run_quantize(const ParsedArgs &args) {
  if (!args.has("checkpoint")) throw UsageError("--checkpoint FILE is required");
  if (!args.has("out")) throw UsageError("--out MODEL is required");
  const std::string path = args.str("checkpoint", ""), out = args.str("out", "");
  const int64_t calib = args.integer("calib", 16, 1, 100000);
  const int64_t batch = args.integer("batch-size", 1000, 1, 10000);
  const int64_t rounds = args.integer("bench", 0, 0, 1000);
  std::string model, widths;
  checkpoint_model(path, &model, &widths);
  model = args.str("model", model.empty() ? "mlp" : model);
  const CnnWidths w = parse_widths(args.str("cnn-widths", widths.empty() ? "32,64,128" : widths), "--cnn-widths");
  const ModelSpec spec = model_spec(model, w);
  check_model_output(out);

  const QNet net = qnet_from_checkpoint(path, model, w);
  const std::string data_dir = args.str("data-dir", CTN_FASHION_MNIST_DIR);
  DatasetPtr train_ds = open_fashion_mnist(data_dir, "train");
  const bool flat = net.input.size() == 1;
  LoaderPtr calib_loader = make_loader(train_ds.get(), kCalibBatch, flat, true, 1, 0, false, 1);
  ContextPtr ctx = open_context("cpu", static_cast<int32_t>(args.integer("threads", 0, 1, 1024)));
  const std::vector<QRange> ranges = calibrate(build_float_graph(ctx.get(), net, kCalibBatch), calib_loader.get(), calib);
  QGraph q = build_quantized_graph(ctx.get(), net, ranges, batch);

  const std::string meta = "{\"model\":\"" + model + "\",\"cnn_widths\":\"" + widths_text(w) +
                           "\",\"quantization\":\"int8 static\",\"calib_batches\":\"" + std::to_string(calib) + "\"}";
  const char *names[1] = {"logits"};
  check(ctn_graph_save(q.graph.get(), nullptr, 1, &q.logits, names, meta.c_str(), out.c_str()),
        ("ctn_graph_save " + out).c_str());
  std::printf("%s: %s\n", path.c_str(), spec.description.c_str());
  std::printf("calibrated on %lld batches of %lld training images; wrote %s (int8, batch %lld)\n",
              static_cast<long long>(calib), static_cast<long long>(kCalibBatch), out.c_str(),
              static_cast<long long>(batch));
  if (!args.flag("eval") && rounds == 0) return kExitOk;

  DatasetPtr test_ds = open_fashion_mnist(data_dir, "test");
  LoaderPtr test_loader = make_loader(test_ds.get(), batch, flat, false, 0, 0, false, 1);
  QGraph f = build_float_graph(ctx.get(), net, batch);
  PlanPtr fp = compile(f.graph.get(), f.logits, "ctn_plan_compile (f32)");
  PlanPtr qp = compile(q.graph.get(), q.logits, "ctn_plan_compile (int8)");
  std::printf("int8 ops: %s\n", int8_steps(qp.get()).c_str());
  if (args.flag("eval")) {
    BuiltModel fe, qe;
    fe.x = f.x;
    qe.x = q.x;
    const double fa = evaluate(fp.get(), fe, test_loader.get()), qa = evaluate(qp.get(), qe, test_loader.get());
    std::printf("test accuracy: f32 %.4f, int8 %.4f (%+.2f points)\n", fa, qa, (qa - fa) * 100.0);
  }
  if (rounds > 0) bench(fp.get(), f, qp.get(), q, test_loader.get(), rounds);
  return kExitOk;
}

}  // namespace

const CommandSpec &quantize_command() {
  static const CommandSpec spec{
      "quantize",
      "post-training static int8 quantization of a checkpoint into a graph file",
      "Calibrates per-tensor u8 activation ranges (min/max of every conv/linear input) on N\n"
      "batches of 64 training images, quantizes weights per output channel (symmetric i8) with\n"
      "batch norm folded in, and writes the int8 inference model (qlinear_conv2d, qlinear_matmul,\n"
      "matmul_integer) as a chutney graph file: `chutney eval --model-file MODEL` scores it.\n"
      "The file is written atomically; nothing is written on error.\n",
      {
          {"checkpoint", "FILE", "checkpoint of `chutney train` (required)"},
          {"out", "MODEL", "the graph file to write (required)"},
          {"calib", "N", "calibration batches of 64 training images (default 16)"},
          {"model", "NAME", "mlp or cnn (default: the checkpoint's)"},
          {"cnn-widths", "C1,C2[,C3],FC[,bn][,valid][,k3]", "cnn widths (default: the checkpoint's)"},
          {"batch-size", "B", "batch size of the saved model's input (default 1000)"},
          {"eval", nullptr, "also print the f32 and int8 test accuracy"},
          {"bench", "R", "also time f32 vs int8 on one test batch, R interleaved rounds (CPU time)"},
          {"data-dir", "DIR", "directory of the Fashion-MNIST IDX files"},
          {"threads", "N", "host backend threads"},
      },
      run_quantize};
  return spec;
}

}  // namespace ctn_cli
