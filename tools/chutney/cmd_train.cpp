// `chutney train --model mlp`: trains a 2-layer MLP on Fashion-MNIST with one compiled training
// plan (forward, backward and the SGD-momentum update as assign nodes) run once per batch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "cli.h"
#include "idx.h"
#include "mlp.h"
#include "progress.h"

namespace ctn_cli {
namespace {

using Clock = std::chrono::steady_clock;

// Fashion-MNIST training-set statistics of pixels scaled to [0, 1].
constexpr float kPixelMean = 0.2860f;
constexpr float kPixelStd = 0.3530f;

struct EpochLog {
  int epoch;
  double train_loss;
  double test_accuracy;
  double images_per_s;
  double train_seconds;
  double eval_seconds;
};

struct TrainOptions {
  MlpConfig cfg;
  int64_t epochs;
  int64_t limit;
  int64_t eval_batch;
  std::string data_dir;
  std::string backend;
  int32_t threads;
  std::string json_path;
  bool quiet;
};

// Xorshift-based Fisher-Yates shuffle: deterministic for a seed on every platform, unlike
// std::shuffle whose algorithm is left to the standard library.
void shuffle(std::vector<uint32_t> &idx, uint64_t &state) {
  for (size_t i = idx.size(); i > 1; --i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    size_t j = static_cast<size_t>(state % i);
    std::swap(idx[i - 1], idx[j]);
  }
}

// Writes `n` images (by index) normalised into x[rows, 784] and their labels into y; rows past
// `n` are zero padding (their predictions are ignored).
void fill_batch(const ImageSet &set, const uint32_t *idx, int64_t n, int64_t rows,
                const float lut[256], float *x, int32_t *y) {
  const int64_t pixels = set.rows * set.cols;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t *src = set.pixels.data() + static_cast<size_t>(idx[r]) * pixels;
    float *dst = x + r * pixels;
    for (int64_t p = 0; p < pixels; ++p) dst[p] = lut[src[p]];
    if (y != nullptr) y[r] = set.labels[idx[r]];
  }
  std::fill(x + n * pixels, x + rows * pixels, 0.0f);
  if (y != nullptr) std::fill(y + n, y + rows, 0);
}

template <typename T>
T *tensor_data(ctn_tensor *t) {
  void *p = nullptr;
  check(ctn_tensor_data(t, &p), "ctn_tensor_data");
  return static_cast<T *>(p);
}

// Copies the trained variables into the inference plan, which holds its own copies.
void sync_params(ctn_plan *train, const MlpTrainGraph &tg, ctn_plan *eval,
                 const MlpEvalGraph &eg) {
  for (int i = 0; i < 4; ++i) {
    ctn_tensor *raw = nullptr;
    check(ctn_plan_variable_read(train, tg.params[i], &raw), "ctn_plan_variable_read");
    TensorPtr value(raw);
    check(ctn_plan_variable_write(eval, eg.params[i], value.get()), "ctn_plan_variable_write");
  }
}

// Accuracy over every test image: full batches, then the remainder zero-padded to the plan's
// batch size with the padded rows' predictions discarded.
double evaluate(ctn_plan *plan, const MlpEvalGraph &eg, int64_t rows, const ImageSet &test,
                const float lut[256], int64_t classes) {
  TensorPtr x = make_tensor(CTN_F32, {rows, test.rows * test.cols}, nullptr);
  ctn_tensor *raw = nullptr;
  check(ctn_plan_output_create(plan, 0, &raw), "ctn_plan_output_create");
  TensorPtr logits(raw);
  std::vector<float> out(static_cast<size_t>(rows * classes));
  std::vector<uint32_t> idx(static_cast<size_t>(test.count));
  std::iota(idx.begin(), idx.end(), 0u);

  float *xd = tensor_data<float>(x.get());
  const ctn_tensor *feeds[1] = {x.get()};
  ctn_tensor *outs[1] = {logits.get()};
  int64_t correct = 0;
  for (int64_t start = 0; start < test.count; start += rows) {
    int64_t n = std::min(rows, test.count - start);
    fill_batch(test, idx.data() + start, n, rows, lut, xd, nullptr);
    check(ctn_plan_run(plan, 1, &eg.x, feeds, 1, outs), "ctn_plan_run (eval)");
    check(ctn_tensor_read(logits.get(), out.data(), out.size() * sizeof(float)),
          "ctn_tensor_read");
    for (int64_t r = 0; r < n; ++r) {
      const float *row = out.data() + r * classes;
      int64_t best = std::max_element(row, row + classes) - row;
      correct += best == test.labels[static_cast<size_t>(start + r)] ? 1 : 0;
    }
  }
  return static_cast<double>(correct) / static_cast<double>(test.count);
}

std::string json_escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

void write_json(const TrainOptions &o, const std::vector<EpochLog> &log, int64_t train_images,
                const std::string &backend, const ctn_plan_stats &stats) {
  std::FILE *f = std::fopen(o.json_path.c_str(), "w");
  if (f == nullptr) throw Failure("cannot write " + o.json_path);
  std::fprintf(f, "{\n  \"model\": \"mlp\",\n  \"hidden\": %lld,\n  \"batch_size\": %lld,\n",
               static_cast<long long>(o.cfg.hidden), static_cast<long long>(o.cfg.batch));
  std::fprintf(f, "  \"lr\": %.9g,\n  \"momentum\": %.9g,\n  \"seed\": %llu,\n", o.cfg.lr,
               o.cfg.momentum, static_cast<unsigned long long>(o.cfg.seed));
  std::fprintf(f, "  \"train_images\": %lld,\n  \"placement\": \"%s\",\n",
               static_cast<long long>(train_images), json_escape(backend).c_str());
  std::fprintf(f, "  \"planned_peak_bytes\": %llu,\n  \"naive_bytes\": %llu,\n",
               static_cast<unsigned long long>(stats.planned_peak_bytes),
               static_cast<unsigned long long>(stats.naive_bytes));
  std::fprintf(f, "  \"epochs\": [\n");
  for (size_t i = 0; i < log.size(); ++i) {
    const EpochLog &e = log[i];
    std::fprintf(f,
                 "    {\"epoch\": %d, \"train_loss\": %.6f, \"test_accuracy\": %.4f, "
                 "\"images_per_s\": %.1f, \"train_seconds\": %.3f, \"eval_seconds\": %.3f}%s\n",
                 e.epoch, e.train_loss, e.test_accuracy, e.images_per_s, e.train_seconds,
                 e.eval_seconds, i + 1 < log.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"final_test_accuracy\": %.4f\n}\n",
               log.empty() ? 0.0 : log.back().test_accuracy);
  bool ok = std::ferror(f) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw Failure("error while writing " + o.json_path);
}

// "cpu 12 steps" for every backend that runs part of the plan.
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

TrainOptions parse(const ParsedArgs &args) {
  TrainOptions o;
  std::string model = args.str("model", "mlp");
  if (model != "mlp") throw UsageError("unknown model '" + model + "' (available: mlp)");
  const MlpConfig d;  // the defaults
  o.cfg.hidden = args.integer("hidden", d.hidden, 1, 1 << 16);
  o.cfg.batch = args.integer("batch-size", d.batch, 1, 60000);
  o.cfg.lr = args.real("lr", d.lr, 0.0, 100.0);
  o.cfg.momentum = args.real("momentum", d.momentum, 0.0, 0.999999);
  o.cfg.seed =
      static_cast<uint64_t>(args.integer("seed", static_cast<int64_t>(d.seed), 0, INT64_MAX));
  o.epochs = args.integer("epochs", 2, 1, 1000);
  o.limit = args.integer("limit", 0, 1, 60000);
  o.eval_batch = args.integer("eval-batch-size", o.cfg.batch, 1, 10000);
  o.threads = static_cast<int32_t>(args.integer("threads", 0, 1, 1024));
  o.backend = args.str("backend", "");
  o.data_dir = args.str("data-dir", kDefaultFashionMnistDir);
  o.json_path = args.str("json", "");
  o.quiet = args.flag("quiet");
  if (o.limit != 0 && o.limit < o.cfg.batch) {
    throw UsageError("--limit " + std::to_string(o.limit) + " is smaller than one batch (" +
                     std::to_string(o.cfg.batch) + ")");
  }
  return o;
}

int run_train(const ParsedArgs &args) {
  TrainOptions o = parse(args);
  FashionMnist data = load_fashion_mnist(o.data_dir);
  const int64_t train_images = o.limit != 0 ? std::min(o.limit, data.train.count)
                                            : data.train.count;
  const int64_t batches = train_images / o.cfg.batch;  // the last partial batch is dropped
  if (batches == 0) throw UsageError("--batch-size is larger than the training set");
  o.cfg.inputs = data.train.rows * data.train.cols;

  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = (static_cast<float>(v) / 255.0f - kPixelMean) / kPixelStd;

  ContextPtr ctx = open_context(o.backend, o.threads);
  MlpParams init = mlp_init(o.cfg);
  MlpTrainGraph tg = mlp_train_graph(ctx.get(), o.cfg, init);
  MlpEvalGraph eg = mlp_eval_graph(ctx.get(), o.cfg, o.eval_batch, init);

  ctn_plan *raw = nullptr;
  check(ctn_plan_compile(tg.graph.get(), 1, &tg.loss, nullptr, &raw), "ctn_plan_compile (train)");
  PlanPtr train_plan(raw);
  check(ctn_plan_compile(eg.graph.get(), 1, &eg.logits, nullptr, &raw), "ctn_plan_compile (eval)");
  PlanPtr eval_plan(raw);
  // The plans own everything they need; the graphs' memory can go now.
  tg.graph.reset();
  eg.graph.reset();

  ctn_plan_stats stats{};
  stats.struct_size = sizeof stats;
  check(ctn_plan_stats_get(train_plan.get(), &stats), "ctn_plan_stats_get");
  std::string where = placement(ctx.get(), train_plan.get());

  std::printf("chutney %s: mlp %lld-%lld-%lld on Fashion-MNIST, %lld training images "
              "(%lld batches of %lld), %lld test images\n",
              ctn_version_string(), static_cast<long long>(o.cfg.inputs),
              static_cast<long long>(o.cfg.hidden), static_cast<long long>(o.cfg.classes),
              static_cast<long long>(train_images), static_cast<long long>(batches),
              static_cast<long long>(o.cfg.batch), static_cast<long long>(data.test.count));
  std::printf("sgd lr %g momentum %g, seed %llu; training plan: %u nodes -> %u steps "
              "(%u fused, %u folded), placement: %s\n",
              o.cfg.lr, o.cfg.momentum, static_cast<unsigned long long>(o.cfg.seed),
              stats.n_nodes, stats.n_steps, stats.n_fused, stats.n_folded, where.c_str());
  std::fflush(stdout);

  TensorPtr x = make_tensor(CTN_F32, {o.cfg.batch, o.cfg.inputs}, nullptr);
  TensorPtr y = make_tensor(CTN_I32, {o.cfg.batch}, nullptr);
  ctn_tensor *loss_raw = nullptr;
  check(ctn_plan_output_create(train_plan.get(), 0, &loss_raw), "ctn_plan_output_create");
  TensorPtr loss(loss_raw);
  float *xd = tensor_data<float>(x.get());
  int32_t *yd = tensor_data<int32_t>(y.get());
  const ctn_node feed_nodes[2] = {tg.x, tg.labels};
  const ctn_tensor *feeds[2] = {x.get(), y.get()};
  ctn_tensor *outs[1] = {loss.get()};

  std::vector<uint32_t> order(static_cast<size_t>(train_images));
  std::iota(order.begin(), order.end(), 0u);
  uint64_t shuffle_state = o.cfg.seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
  if (shuffle_state == 0) shuffle_state = 1;  // xorshift must not start at 0

  std::vector<EpochLog> log;
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    shuffle(order, shuffle_state);
    Progress progress("epoch " + std::to_string(epoch) + "/" + std::to_string(o.epochs), batches,
                      o.cfg.batch, !o.quiet);
    Clock::time_point t0 = Clock::now();
    double loss_sum = 0.0;
    for (int64_t b = 0; b < batches; ++b) {
      fill_batch(data.train, order.data() + b * o.cfg.batch, o.cfg.batch, o.cfg.batch, lut, xd, yd);
      check(ctn_plan_run(train_plan.get(), 2, feed_nodes, feeds, 1, outs), "ctn_plan_run (train)");
      float value = 0.0f;
      check(ctn_tensor_read(loss.get(), &value, sizeof value), "ctn_tensor_read (loss)");
      if (!std::isfinite(value)) {
        progress.finish();
        throw Failure("training diverged: loss is " + std::to_string(value) + " at epoch " +
                      std::to_string(epoch) + ", batch " + std::to_string(b + 1) +
                      "; try a smaller --lr");
      }
      loss_sum += value;
      progress.update(b + 1, loss_sum / static_cast<double>(b + 1));
    }
    progress.finish();
    Clock::time_point t1 = Clock::now();
    sync_params(train_plan.get(), tg, eval_plan.get(), eg);
    double acc = evaluate(eval_plan.get(), eg, o.eval_batch, data.test, lut, o.cfg.classes);
    Clock::time_point t2 = Clock::now();

    EpochLog e{};
    e.epoch = static_cast<int>(epoch);
    e.train_loss = loss_sum / static_cast<double>(batches);
    e.test_accuracy = acc;
    e.train_seconds = std::chrono::duration<double>(t1 - t0).count();
    e.eval_seconds = std::chrono::duration<double>(t2 - t1).count();
    e.images_per_s = static_cast<double>(batches * o.cfg.batch) / std::max(e.train_seconds, 1e-9);
    log.push_back(e);
    std::printf("epoch %d/%lld: train loss %.4f, test accuracy %.4f, %.0f images/s, "
                "%.2f s (train %.2f s, eval %.2f s)\n",
                e.epoch, static_cast<long long>(o.epochs), e.train_loss, e.test_accuracy,
                e.images_per_s, e.train_seconds + e.eval_seconds, e.train_seconds,
                e.eval_seconds);
    std::fflush(stdout);
  }

  std::printf("final test accuracy: %.4f\n", log.back().test_accuracy);
  double ratio = stats.naive_bytes > 0 ? static_cast<double>(stats.planned_peak_bytes) /
                                             static_cast<double>(stats.naive_bytes)
                                       : 0.0;
  std::printf("training plan memory: planned peak %s vs naive %s (%.1f%% of naive; "
              "%llu vs %llu bytes), persistent %s\n",
              human_bytes(stats.planned_peak_bytes).c_str(), human_bytes(stats.naive_bytes).c_str(),
              100.0 * ratio, static_cast<unsigned long long>(stats.planned_peak_bytes),
              static_cast<unsigned long long>(stats.naive_bytes),
              human_bytes(stats.persistent_bytes).c_str());
  if (!o.json_path.empty()) {
    write_json(o, log, train_images, where, stats);
    std::printf("wrote %s\n", o.json_path.c_str());
  }
  // Plans and tensors go before the context (declaration order does it; spelled out for
  // the reader).
  train_plan.reset();
  eval_plan.reset();
  return kExitOk;
}

}  // namespace

const CommandSpec &train_command() {
  static const CommandSpec spec{
      "train",
      "train a model on Fashion-MNIST and report test accuracy",
      "Data: {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from the Debian package\n"
      "dataset-fashion-mnist (default directory " "/usr/share/datasets/fashion-mnist" ").\n"
      "Progress goes to stderr (a live bar on a terminal); results go to stdout, ending with\n"
      "`final test accuracy: X`. The last partial training batch of an epoch is dropped;\n"
      "the test accuracy always covers the whole test set.\n",
      {
          {"model", "NAME", "model to train (only: mlp; default mlp)"},
          {"epochs", "N", "passes over the training set (default 2)"},
          {"batch-size", "B", "images per training step (default 128)"},
          {"lr", "X", "SGD learning rate (default 0.02)"},
          {"momentum", "M", "SGD momentum (default 0.9)"},
          {"hidden", "N", "hidden units of the MLP (default 256)"},
          {"backend", "NAME", "preferred backends, ','-separated (default: $CHUTNEY_BACKEND, cpu)"},
          {"threads", "N", "host backend threads (default: $CHUTNEY_NUM_THREADS, the cores)"},
          {"seed", "S", "seed of the initial weights and the shuffling (default 1)"},
          {"data-dir", "DIR", "directory of the Fashion-MNIST IDX files"},
          {"limit", "N", "train on the first N training images only"},
          {"eval-batch-size", "N", "images per evaluation step (default: --batch-size)"},
          {"json", "FILE", "write the per-epoch log as JSON to FILE"},
          {"quiet", nullptr, "no progress output on stderr"},
      },
      run_train};
  return spec;
}

}  // namespace ctn_cli
