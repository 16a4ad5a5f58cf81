// `chutney train --model mlp|cnn`: builds the model with the layer library (chutney/nn.h), one
// compiled training plan (forward, backward, optimizer updates as assign nodes) run once per
// batch from the prefetching loader (chutney/data.h), an inference twin for the test accuracy,
// safetensors checkpoints at every epoch end (chutney/checkpoint.h) and --resume from one.
#include <chutney/checkpoint.h>
#include <chutney/collective.h>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <ctime>
#include <cstdlib>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt_dir.h"
#include "cli.h"
#include "models.h"
#include "onnx_cli.h"
#include "plot.h"
#include "progress.h"

namespace ctn_cli {
namespace {

using Clock = std::chrono::steady_clock;

struct EpochLog {
  int epoch = 0;
  double train_loss = 0;
  double test_accuracy = 0;
  double images_per_s = 0;
  double train_seconds = 0;
  double eval_seconds = 0;
  double wait_seconds = 0;
};

struct TrainOptions {
  std::string model;       // mlp | cnn | onnx (--model-onnx)
  std::string onnx_path;   // --model-onnx
  CnnWidths widths;
  int64_t batch = 0;
  OptimConfig optim;
  std::string schedule;  // none | step | cosine
  int64_t warmup = 0;
  uint64_t seed = 1;
  int64_t epochs = 2;
  int64_t limit = 0;
  int64_t eval_batch = 0;
  std::string export_onnx, save_model;  // --export-onnx, --save-model
  bool augment = false;
  int32_t workers = 1;
  std::string data_dir;
  std::string backend;
  int32_t threads = 0;
  std::string json_path, plot_path, checkpoint_dir, resume_path;
  std::string run_id;  // "run_id" of the checkpoints: new, or the resumed checkpoint's
  bool quiet = false;
  bool print_steps = false;  // one stdout line per update: the bindings compare theirs with it
  bool check_numerics = false;  // --check-numerics: stop at the first op that makes a NaN/inf
  int64_t keep_last = 5;   // --keep-last: epoch checkpoints kept besides the best (0: all)
  int64_t stop_after = 0;  // > 0: run at most this many epochs now (an interruption, for tests)
  // Data-parallel (docs/DISTRIBUTED.md): "" (one process), "mpi" or "nccl".
  std::string distributed;
  uint64_t bucket_bytes = 0;       // 0: CTN_DP_DEFAULT_BUCKET_BYTES
  bool overlap = true;             // --overlap: buckets' allreduces overlap backward (else CTN_DP_BLOCKING)
  double collective_timeout = 60;  // seconds
  bool rank_checkpoints = false;   // every rank saves its own (DIR/rank-R/), for tests
  int32_t rank = 0, ranks = 1;     // this process's rank and the world size
  // --fault STEP:RANK:kill|stop (tests): at update STEP, rank RANK sends itself SIGKILL or SIGSTOP.
  int64_t fault_step = 0;
  int32_t fault_rank = 0;
  int fault_signal = 0;
  uint64_t memory_budget = 0;  // ctn_compile_options.memory_budget of the training plan
  std::string precision = "f32";  // --precision: ctn_compile_options.precision of both plans
  // --time-budget: > 0: training (the updates, not the evaluations) stops after this many
  // seconds and the cosine/linear schedule runs over that time instead of over the updates.
  double time_budget = 0;
};

struct CollectiveDeleter {
  void operator()(ctn_collective *p) const { ctn_collective_release(p); }
};
using CollectivePtr = std::unique_ptr<ctn_collective, CollectiveDeleter>;

// --memory-budget: bytes (suffix k, M or G: KiB, MiB, GiB) or "auto".
uint64_t parse_budget(const std::string &v) {
  if (v == "auto") return CTN_MEMORY_BUDGET_AUTO;
  char *end = nullptr;
  errno = 0;
  const unsigned long long n = v.empty() || v[0] == '-' ? 0 : std::strtoull(v.c_str(), &end, 10);
  uint64_t mul = 1;
  if (end && *end && end[1] == '\0') mul = *end == 'k' || *end == 'K' ? 1ull << 10 : *end == 'M' ? 1ull << 20 : *end == 'G' ? 1ull << 30 : 0;
  else if (end && *end) mul = 0;
  if (v.empty() || !end || end == v.c_str() || errno || n == 0 || mul == 0 || n > UINT64_MAX / 2 / mul)
    throw UsageError("--memory-budget expects a positive number of bytes (suffix k, M, G) or 'auto', got '" + v + "'");
  return n * mul;
}

// Metadata of a checkpoint, read back by --resume.
struct ResumeState {
  std::string path;
  std::map<std::string, std::string> meta;
  int64_t epoch = 0;  // completed epochs
  int64_t step = 0;   // completed updates
  std::vector<EpochLog> history;
};

struct CheckpointDeleter {
  void operator()(ctn_checkpoint *p) const { ctn_checkpoint_release(p); }
};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string short_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
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

// History as "epoch:loss:accuracy:images_per_s;..." so a resumed run can log and plot every
// epoch, not only those it ran itself.
std::string encode_history(const std::vector<EpochLog> &log) {
  std::string s;
  for (const EpochLog &e : log) {
    if (!s.empty()) s += ';';
    s += std::to_string(e.epoch) + ":" + num(e.train_loss) + ":" + num(e.test_accuracy) + ":" +
         num(e.images_per_s);
  }
  return s;
}

std::vector<EpochLog> decode_history(const std::string &s) {
  std::vector<EpochLog> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ';')) {
    EpochLog e;
    if (std::sscanf(item.c_str(), "%d:%lf:%lf:%lf", &e.epoch, &e.train_loss, &e.test_accuracy,
                    &e.images_per_s) == 4) {
      out.push_back(e);
    }
  }
  return out;
}

ResumeState read_resume(const std::string &path) {
  ctn_checkpoint *raw = nullptr;
  check(ctn_checkpoint_load(path.c_str(), &raw), ("--resume " + path).c_str());
  std::unique_ptr<ctn_checkpoint, CheckpointDeleter> ck(raw);
  ResumeState r;
  r.path = path;
  for (const char *key : {"format", "model", "epoch", "step", "seed", "batch_size", "optimizer",
                          "lr", "momentum", "weight_decay", "schedule", "warmup", "epochs",
                          "limit", "augment", "history", "cnn_widths", "ranks", "run_id", "onnx_model",
                          "precision"}) {
    const char *v = nullptr;
    check(ctn_checkpoint_metadata_get(ck.get(), key, &v), "ctn_checkpoint_metadata_get");
    if (v != nullptr) r.meta[key] = v;
  }
  if (r.meta["format"] != "chutney-train-1") {
    throw Failure("--resume " + path +
                  ": not a checkpoint written by `chutney train` (metadata \"format\" is not "
                  "\"chutney-train-1\")");
  }
  try {
    r.epoch = std::stoll(r.meta.at("epoch"));
    r.step = std::stoll(r.meta.at("step"));
  } catch (const std::exception &) {
    throw Failure("--resume " + path + ": metadata \"epoch\"/\"step\" missing or not integers");
  }
  r.history = decode_history(r.meta["history"]);
  return r;
}

// Option values: given on the command line, else the checkpoint's (--resume), else a default.
// A bad value that came from the checkpoint is the file's fault, not the command line's: the
// error names the file and the metadata key (a runtime error, exit 1), not the flag.
class Picker {
 public:
  Picker(const ParsedArgs &args, const ResumeState *r) : args_(args), r_(r) {}

  std::string operator()(const std::string &name, const std::string &meta_key, const std::string &fallback) {
    if (args_.has(name)) return args_.str(name, fallback);
    if (r_ != nullptr) {
      auto it = r_->meta.find(meta_key);
      if (it != r_->meta.end()) {
        from_checkpoint_[name] = meta_key;
        return it->second;
      }
    }
    return fallback;
  }

  // Throws `message` about option `name` as a usage error, or as the checkpoint's error.
  [[noreturn]] void bad(const std::string &name, const std::string &message) const {
    auto it = from_checkpoint_.find(name);
    if (it == from_checkpoint_.end()) throw UsageError(message);
    throw Failure("--resume " + r_->path + ": metadata \"" + it->second + "\" is not a valid --" + name + " (" +
                  message + "); the file was not written by this version of `chutney train`, or was edited");
  }

  // Runs `f` (which may throw UsageError about option `name`) with bad()'s attribution.
  template <class F>
  auto checked(const std::string &name, F &&f) const -> decltype(f()) {
    try {
      return f();
    } catch (const UsageError &e) {
      bad(name, e.what());
    }
  }

  int64_t integer(const std::string &name, const std::string &v, int64_t lo, int64_t hi) const {
    char *end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
      bad(name, "--" + name + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
    return static_cast<int64_t>(x);
  }

  double real(const std::string &name, const std::string &v, double lo, double hi) const {
    char *end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x) || x < lo || x > hi)
      bad(name, "--" + name + " expects a number in [" + num(lo) + ", " + num(hi) + "], got '" + v + "'");
    return x;
  }

 private:
  const ParsedArgs &args_;
  const ResumeState *r_;
  std::map<std::string, std::string> from_checkpoint_;  // option -> metadata key it came from
};

TrainOptions parse(const ParsedArgs &args, const ResumeState *r) {
  TrainOptions o;
  Picker pick(args, r);
  o.model = pick("model", "model", "mlp");
  o.onnx_path = pick("model-onnx", "onnx_model", "");
  if (!o.onnx_path.empty() && args.has("model") && o.model != "onnx")
    throw UsageError("--model-onnx trains the ONNX model it names: leave out --model " + o.model);
  if (!o.onnx_path.empty()) o.model = "onnx";
  if (o.model == "onnx" && o.onnx_path.empty()) pick.bad("model", "--model onnx needs --model-onnx FILE.onnx");
  o.widths = pick.checked("cnn-widths", [&] { return parse_widths(pick("cnn-widths", "cnn_widths", "32,64,128"), "--cnn-widths"); });
  const ModelSpec spec = pick.checked("model", [&] { return model_spec(o.model, o.widths); });
  auto to_int = [&](const std::string &name, const std::string &v, int64_t lo, int64_t hi) {
    return pick.integer(name, v, lo, hi);
  };
  auto to_real = [&](const std::string &name, const std::string &v, double lo, double hi) {
    return pick.real(name, v, lo, hi);
  };
  o.batch = to_int("batch-size", pick("batch-size", "batch_size", std::to_string(spec.default_batch)), 1, 60000);
  // The MLP's defaults: SGD is ~2.5x faster per image than Adam here (the Adam update ops cost
  // as much as the MLP's GEMMs) and reaches the same accuracy with a cosine schedule.
  const bool mlp = o.model == "mlp";
  o.optim.name = pick("optimizer", "optimizer", mlp ? "sgd" : "adam");
  if (o.optim.name != "sgd" && o.optim.name != "adam" && o.optim.name != "adamw") {
    pick.bad("optimizer", "unknown optimizer '" + o.optim.name + "' (available: sgd, adam, adamw)");
  }
  o.optim.lr = to_real("lr", pick("lr", "lr", o.optim.name == "sgd" ? "0.05" : "0.001"), 1e-12, 100.0);
  o.optim.momentum = to_real("momentum", pick("momentum", "momentum", "0.9"), 0.0, 0.999999);
  o.optim.weight_decay = to_real("weight-decay", pick("weight-decay", "weight_decay", o.optim.name == "adamw" ? "0.01" : "0"),
                                 0.0, 10.0);
  // Cosine decay: +2.3 points of CNN test accuracy at epoch 3 over a constant Adam rate.
  o.schedule = pick("schedule", "schedule", "cosine");
  if (o.schedule != "none" && o.schedule != "step" && o.schedule != "cosine" && o.schedule != "linear") {
    pick.bad("schedule", "unknown schedule '" + o.schedule + "' (available: none, step, cosine, linear)");
  }
  o.warmup = to_int("warmup", pick("warmup", "warmup", "0"), 0, INT64_MAX / 2);
  o.seed = static_cast<uint64_t>(to_int("seed", pick("seed", "seed", "1"), 0, INT64_MAX));
  o.precision = pick("precision", "precision", "f32");
  pick.checked("precision", [&] { return parse_precision(o.precision); });
  // f16's range is narrow (6e-8 .. 65504): its gradients need dynamic loss scaling.
  if (o.precision == "f16") o.optim.loss_scale = CTN_LOSS_SCALE_DEFAULT;
  if (args.has("time-budget")) {
    o.time_budget = to_real("time-budget", args.str("time-budget", ""), 0.001, 1e7);
    // The schedule follows the clock: neither resumable nor the same on every rank.
    if (r != nullptr) throw UsageError("--time-budget cannot be combined with --resume");
  }
  // With a time budget, --epochs only caps the run (default: as many as the time allows).
  o.epochs = to_int("epochs", pick("epochs", "epochs", o.time_budget > 0 ? "1000" : "2"), 1, 1000);
  o.limit = to_int("limit", pick("limit", "limit", "0"), 0, 60000);
  o.augment = pick("augment", "augment", "0") != "0";
  o.eval_batch = args.integer("eval-batch-size", o.batch, 1, 10000);
  o.workers = static_cast<int32_t>(args.integer("workers", 1, 1, 64));
  o.threads = static_cast<int32_t>(args.integer("threads", 0, 1, 1024));
  o.backend = args.str("backend", "");
  o.data_dir = args.str("data-dir", CTN_FASHION_MNIST_DIR);
  o.json_path = args.str("json", "");
  o.plot_path = args.str("plot", "");
  o.export_onnx = args.str("export-onnx", "");
  o.save_model = args.str("save-model", "");
  o.checkpoint_dir = args.str("checkpoint-dir", "");
  o.resume_path = args.str("resume", "");
  o.quiet = args.flag("quiet");
  o.print_steps = args.flag("print-steps");
  o.check_numerics = args.flag("check-numerics");
  o.stop_after = args.integer("stop-after", 0, 1, 1000);
  o.distributed = args.str("distributed", "");
  if (!o.distributed.empty() && o.distributed != "mpi" && o.distributed != "nccl") {
    throw UsageError("unknown --distributed '" + o.distributed + "' (available: mpi, nccl)");
  }
  o.bucket_bytes = static_cast<uint64_t>(args.integer("bucket-bytes", 0, 1, INT64_MAX / 2));
  const std::string overlap = args.str("overlap", "on");
  if (overlap != "on" && overlap != "off") throw UsageError("--overlap expects on or off, got '" + overlap + "'");
  o.overlap = overlap == "on";
  o.collective_timeout = to_real("collective-timeout", args.str("collective-timeout", "60"), 0.1, 86400.0);
  o.rank_checkpoints = args.flag("rank-checkpoints");
  if (args.has("fault")) {
    const std::string f = args.str("fault", "");
    long long st = 0;
    int rk = 0;
    char kind[8] = {};
    if (std::sscanf(f.c_str(), "%lld:%d:%7s", &st, &rk, kind) != 3 || st < 1 || rk < 0 ||
        (std::strcmp(kind, "kill") != 0 && std::strcmp(kind, "stop") != 0)) {
      throw UsageError("--fault expects STEP:RANK:kill or STEP:RANK:stop, got '" + f + "'");
    }
    o.fault_step = st;
    o.fault_rank = rk;
    o.fault_signal = std::strcmp(kind, "kill") == 0 ? SIGKILL : SIGSTOP;
  }
  if (!o.distributed.empty() && o.time_budget > 0) {
    throw UsageError("--time-budget cannot be combined with --distributed (the ranks' clocks would give different learning rates)");
  }
  if (o.distributed.empty() && (args.has("bucket-bytes") || args.has("overlap") || args.has("collective-timeout") ||
                                o.rank_checkpoints || args.has("fault"))) {
    throw UsageError("--bucket-bytes, --overlap, --collective-timeout, --rank-checkpoints and --fault need --distributed");
  }
  const std::string budget = args.str("memory-budget", "");
  if (!budget.empty()) o.memory_budget = parse_budget(budget);
  o.keep_last = args.integer("keep-last", 5, 0, 1000000);
  if (o.limit != 0 && o.limit < o.batch) {
    throw UsageError("--limit " + std::to_string(o.limit) + " is smaller than one batch (" +
                     std::to_string(o.batch) + ")");
  }
  return o;
}

// The learning rate of update `step` (from 1); `total` is the number of updates of the run.
// With --time-budget, the cosine or linear decay follows whichever is further along: the
// updates (step / total, as without a budget) or the clock (`elapsed` seconds of training over
// the budget), the clock only once it is more than 1 % of the run ahead. So a machine that
// finishes --epochs within the budget at a steady pace gets exactly the schedule (and the
// results) of a run without it, and a slower one decays with the clock and stops at the
// budget's end. The warm-up counts updates.
double lr_at(const TrainOptions &o, int64_t step, int64_t per_epoch, int64_t total, double elapsed) {
  if (o.time_budget > 0 && (o.schedule == "cosine" || o.schedule == "linear") && step > o.warmup) {
    const int64_t span = std::max(total, o.warmup + 1) - o.warmup;
    const double by_steps = std::min(1.0, static_cast<double>(step - o.warmup - 1) / static_cast<double>(span));
    const double f = std::clamp(elapsed / o.time_budget, 0.0, 1.0);
    if (f > by_steps + 0.01)
      return o.schedule == "cosine" ? o.optim.lr * 0.5 * (1.0 + std::cos(3.14159265358979323846 * f))
                                    : o.optim.lr * (1.0 - f);
  }
  ctn_lr_schedule s{};
  s.base_lr = o.optim.lr;
  s.warmup_steps = o.warmup;
  if (o.schedule == "step") {
    s.kind = CTN_LR_STEP;  // halve the rate every epoch
    s.step_size = std::max<int64_t>(per_epoch, 1);
    s.gamma = 0.5;
  } else if (o.schedule == "cosine" || o.schedule == "linear") {
    s.kind = o.schedule == "cosine" ? CTN_LR_COSINE : CTN_LR_LINEAR;
    s.total_steps = std::max(total, o.warmup + 1);
    s.min_lr = 0.0;
  } else {
    s.kind = CTN_LR_CONSTANT;
  }
  double lr = 0.0;
  check(ctn_nn_lr_at(&s, step, &lr), "ctn_nn_lr_at");
  return lr;
}

std::string metadata_json(const TrainOptions &o, int64_t epoch, int64_t step,
                          const std::vector<EpochLog> &log) {
  std::vector<std::pair<std::string, std::string>> kv = {
      {"format", "chutney-train-1"},
      {"model", o.model},
      {"onnx_model", o.onnx_path},
      {"cnn_widths", widths_text(o.widths)},
      {"epoch", std::to_string(epoch)},
      {"step", std::to_string(step)},
      {"seed", std::to_string(o.seed)},
      {"precision", o.precision},
      // The loader's position: the next batch is batch 0 of epoch `epoch` (0-based), whose
      // order depends only on (loader_seed, loader_epoch).
      {"loader_seed", std::to_string(o.seed)},
      {"loader_epoch", std::to_string(epoch)},
      {"loader_batch", "0"},
      {"batch_size", std::to_string(o.batch)},
      {"ranks", std::to_string(o.ranks)},
      {"optimizer", o.optim.name},
      {"lr", num(o.optim.lr)},
      {"momentum", num(o.optim.momentum)},
      {"weight_decay", num(o.optim.weight_decay)},
      {"schedule", o.schedule},
      {"warmup", std::to_string(o.warmup)},
      {"epochs", std::to_string(o.epochs)},
      {"limit", std::to_string(o.limit)},
      {"augment", o.augment ? "1" : "0"},
      {"history", encode_history(log)},
      {"chutney_version", ctn_version_string()},
      {"run_id", o.run_id},
  };
  std::string s = "{";
  for (size_t i = 0; i < kv.size(); ++i) {
    if (i) s += ",";
    s += "\"" + json_escape(kv[i].first) + "\":\"" + json_escape(kv[i].second) + "\"";
  }
  return s + "}";
}

void write_json(const TrainOptions &o, const std::vector<EpochLog> &log, int64_t train_images,
                const std::string &where, const ctn_plan_stats &stats, double wait_total,
                double images_per_s) {
  std::FILE *f = std::fopen(o.json_path.c_str(), "w");
  if (f == nullptr) throw Failure("cannot write " + o.json_path + ": " + std::strerror(errno));
  std::fprintf(f, "{\n  \"model\": \"%s\",\n  \"batch_size\": %lld,\n  \"optimizer\": \"%s\",\n",
               o.model.c_str(), static_cast<long long>(o.batch), o.optim.name.c_str());
  std::fprintf(f, "  \"lr\": %.9g,\n  \"momentum\": %.9g,\n  \"weight_decay\": %.9g,\n",
               o.optim.lr, o.optim.momentum, o.optim.weight_decay);
  std::fprintf(f, "  \"schedule\": \"%s\",\n  \"warmup\": %lld,\n  \"seed\": %llu,\n  \"precision\": \"%s\",\n",
               o.schedule.c_str(), static_cast<long long>(o.warmup),
               static_cast<unsigned long long>(o.seed), o.precision.c_str());
  std::fprintf(f, "  \"train_images\": %lld,\n  \"placement\": \"%s\",\n",
               static_cast<long long>(train_images), json_escape(where).c_str());
  std::fprintf(f, "  \"planned_peak_bytes\": %llu,\n  \"naive_bytes\": %llu,\n",
               static_cast<unsigned long long>(stats.planned_peak_bytes),
               static_cast<unsigned long long>(stats.naive_bytes));
  std::fprintf(f, "  \"loader_wait_seconds\": %.6f,\n  \"images_per_s\": %.1f,\n", wait_total,
               images_per_s);
  std::fprintf(f, "  \"epochs\": [\n");
  for (size_t i = 0; i < log.size(); ++i) {
    const EpochLog &e = log[i];
    std::fprintf(f,
                 "    {\"epoch\": %d, \"train_loss\": %.9g, \"test_accuracy\": %.4f, "
                 "\"images_per_s\": %.1f, \"train_seconds\": %.3f, \"eval_seconds\": %.3f, "
                 "\"loader_wait_seconds\": %.4f}%s\n",
                 e.epoch, e.train_loss, e.test_accuracy, e.images_per_s, e.train_seconds,
                 e.eval_seconds, e.wait_seconds, i + 1 < log.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"final_test_accuracy\": %.4f\n}\n",
               log.empty() ? 0.0 : log.back().test_accuracy);
  bool ok = std::ferror(f) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw Failure("error while writing " + o.json_path);
}

// What --memory-budget did: peaks, extra FLOPs and the recomputed steps.
// What --precision did: the plan's "autocast ..." line (ctn_plan_describe).
void print_autocast(ctn_plan *p) {
  const char *text = nullptr;
  check(ctn_plan_describe(p, &text), "ctn_plan_describe");
  const char *at = std::strstr(text, "autocast ");
  if (at) std::printf("training plan %.*s\n", static_cast<int>(std::strcspn(at, "\n")), at);
}

void print_memory_report(ctn_plan *p) {
  ctn_plan_memory_report r{};
  r.struct_size = sizeof r;
  check(ctn_plan_memory_report_get(p, &r), "ctn_plan_memory_report_get");
  const uint64_t base = r.flops - r.extra_flops;
  std::printf("memory budget %s (%llu bytes): planned peak %s without budget, %s achieved (%llu bytes); "
              "%u steps recomputed, +%.1f%% FLOPs (%llu of %llu per step)\n",
              human_bytes(r.budget).c_str(), static_cast<unsigned long long>(r.budget),
              human_bytes(r.peak_without_budget).c_str(), human_bytes(r.peak_bytes).c_str(),
              static_cast<unsigned long long>(r.peak_bytes), r.n_recomputed,
              base ? 100.0 * static_cast<double>(r.extra_flops) / static_cast<double>(base) : 0.0,
              static_cast<unsigned long long>(r.extra_flops), static_cast<unsigned long long>(r.flops));
  // The recomputed steps, one line each, counted when repeated.
  std::map<std::string, int> count;
  std::vector<std::string> seen;
  const char *s = r.recomputed ? r.recomputed : "";
  while (*s) {
    const char *e = std::strchr(s, '\n');
    std::string line = e ? std::string(s, e) : std::string(s);
    if (count[line]++ == 0) seen.push_back(line);
    s = e ? e + 1 : s + line.size();
  }
  for (const std::string &line : seen) std::printf("  recomputed: %s%s\n", line.c_str(),
                                                   count[line] > 1 ? (" x" + std::to_string(count[line])).c_str() : "");
}

double loader_wait(ctn_loader *l) {
  ctn_loader_stats s{};
  s.struct_size = sizeof s;
  check(ctn_loader_stats_get(l, &s), "ctn_loader_stats_get");
  return s.wait_seconds;
}

int train(TrainOptions &o, std::unique_ptr<ResumeState> &resume, ContextPtr &ctx, ctn_collective *comm);

// The test accuracy; in a data-parallel job every rank evaluates every ranks-th batch and the
// counts are summed, so the figure is the one a single process gets, on every rank.
double evaluate_shared(ctn_plan *plan, const BuiltModel &em, ctn_loader *loader, ctn_collective *comm, int32_t rank,
                       int32_t ranks) {
  const bool shared = comm != nullptr && ranks > 1;
  int64_t counts[2] = {0, 0};  // correct, total
  evaluate_part(plan, em, loader, shared ? rank : 0, shared ? ranks : 1, &counts[0], &counts[1]);
  if (shared) {
    TensorPtr t = make_tensor(CTN_I64, {2}, counts);
    check(ctn_collective_allreduce(comm, t.get(), CTN_REDUCE_SUM), "ctn_collective_allreduce (test accuracy)");
    check(ctn_tensor_read(t.get(), counts, sizeof counts), "ctn_tensor_read");
  }
  return counts[1] > 0 ? static_cast<double>(counts[0]) / static_cast<double>(counts[1]) : 0.0;
}

// Reports the checkpoint written last (if any) and applies --keep-last to this run's files.
void finish_save(const TrainOptions &o, CheckpointWriter &w, const std::vector<EpochLog> &log) {
  const std::string path = w.finish();
  if (path.empty()) return;
  std::printf("saved checkpoint %s\n", path.c_str());
  int64_t best_epoch = 0;
  double best = -1;
  for (const EpochLog &l : log)
    if (l.test_accuracy > best) best = l.test_accuracy, best_epoch = l.epoch;
  apply_retention(o.checkpoint_dir, o.model, o.keep_last, best_epoch, o.run_id, path);
}

// The epoch's checkpoint. Written in the background when other ranks would wait for it
// (data-parallel: it is finished at the next epoch's end or the run's), else at once.
void save_epoch(const TrainOptions &o, CheckpointWriter &w, ctn_plan *plan, const std::vector<std::string> &names,
                const std::vector<ctn_node> &nodes, int64_t epoch, int64_t step, const std::vector<EpochLog> &log,
                bool background) {
  finish_save(o, w, log);
  const std::string path = epoch_checkpoint_path(o.checkpoint_dir, o.model, epoch);
  ensure_replaceable(path, o.run_id);  // again: another program may have written it since the start
  w.start(plan, names, nodes, path, metadata_json(o, epoch, step, log));
  if (!background) finish_save(o, w, log);
}

// --distributed: joins the job (collective.h) and makes every failure of this rank end the whole
// job with a message naming the rank, instead of leaving the others waiting in an allreduce.
int run_train(const ParsedArgs &args) {
  std::unique_ptr<ResumeState> resume;
  if (args.has("resume")) resume = std::make_unique<ResumeState>(read_resume(args.str("resume", "")));
  TrainOptions o = parse(args, resume.get());
  o.run_id = resume && !resume->meta["run_id"].empty() ? resume->meta["run_id"] : new_run_id();
  ContextPtr ctx = open_context(o.backend, o.threads);
  CollectivePtr comm;
  if (!o.distributed.empty()) {
    ctn_collective_config cc{};
    cc.struct_size = sizeof cc;
    cc.rank = -1;
    cc.world_size = -1;
    cc.timeout_s = o.collective_timeout;
    std::string rendezvous;
    if (o.distributed == "nccl") {
      // NCCL's unique id travels through a file: CHUTNEY_RENDEZVOUS, else one per mpirun job
      // in the checkpoint directory or /tmp (the ranks of one host share it).
      const char *env = std::getenv("CHUTNEY_RENDEZVOUS");
      const char *job = std::getenv("OMPI_MCA_ess_base_jobid");
      rendezvous = env ? env : "file:" + (o.checkpoint_dir.empty() ? std::string("/tmp") : o.checkpoint_dir) +
                                   "/chutney-nccl-" + (job ? job : "0") + ".id";
      cc.rendezvous = rendezvous.c_str();
    }
    ctn_collective *raw = nullptr;
    check(ctn_collective_open(ctx.get(), o.distributed.c_str(), &cc, &raw), ("--distributed " + o.distributed).c_str());
    comm.reset(raw);
    check(ctn_collective_rank(raw, &o.rank, &o.ranks), "ctn_collective_rank");
    // Without --batch-size (and not resuming), the model's default batch is the global one, split
    // over the ranks, so that `mpirun -np N chutney train --distributed mpi` trains what one
    // process does (docs/DISTRIBUTED.md).
    const bool batch_given = args.has("batch-size") || (resume && resume->meta.count("batch_size"));
    if (!batch_given && o.ranks > 1) {
      const int64_t global = model_spec(o.model, o.widths).default_batch;
      if (global % o.ranks != 0) {
        throw UsageError("the default batch " + std::to_string(global) + " does not split over " +
                         std::to_string(o.ranks) + " ranks: give --batch-size (per rank)");
      }
      o.batch = global / o.ranks;
      if (!args.has("eval-batch-size")) o.eval_batch = global;
    }
    if (o.rank != 0) {
      // Rank 0 alone reports: the others print errors only (stderr).
      o.quiet = true;
      if (!std::freopen("/dev/null", "w", stdout)) throw Failure("cannot silence stdout on a rank other than 0");
    }
  }
  try {
    return train(o, resume, ctx, comm.get());
  } catch (const std::exception &e) {
    if (!comm || o.ranks == 1) throw;
    std::fflush(stdout);
    std::string why = std::string(e.what());
    ctn_collective_abort(comm.get(), 1, why.c_str());
  }
  return kExitFailure;
}

// --save-model / --export-onnx: the inference graph with the trained values (batch
// --eval-batch-size), after training.
void write_trained_model(const TrainOptions &o, const BuiltModel &tm, ctn_plan *train_plan, const BuiltModel &em,
                         ctn_plan *eval_plan) {
  if (o.export_onnx.empty() && o.save_model.empty()) return;
  check(ctn_model_copy_state(tm.model.get(), train_plan, em.model.get(), eval_plan, nullptr), "ctn_model_copy_state");
  write_inference_model(em, eval_plan, o.save_model, o.export_onnx);
}

int train(TrainOptions &o, std::unique_ptr<ResumeState> &resume, ContextPtr &ctx, ctn_collective *comm) {
  if (o.rank_checkpoints && !o.checkpoint_dir.empty() && o.rank != 0) {
    prepare_checkpoint_dir(o.checkpoint_dir);
    o.checkpoint_dir += "/rank-" + std::to_string(o.rank);
  } else if (o.rank != 0) {
    o.checkpoint_dir.clear();  // rank 0 alone writes checkpoints
  }
  // Everything this run will write is checked before it trains: a bad path fails now, not after
  // an hour, and no file of another run is ever replaced.
  const int64_t first_epoch = resume ? resume->epoch + 1 : 1;
  const int64_t last_epoch = o.stop_after > 0 ? std::min(o.epochs, first_epoch - 1 + o.stop_after) : o.epochs;
  if (!o.checkpoint_dir.empty()) {
    prepare_checkpoint_dir(o.checkpoint_dir);
    remove_stale_temporaries(o.checkpoint_dir);
    for (int64_t e = first_epoch; e <= last_epoch; ++e)
      ensure_replaceable(epoch_checkpoint_path(o.checkpoint_dir, o.model, e), o.run_id);
  }
  if (!o.json_path.empty()) check_output_file("json", o.json_path);
  if (!o.plot_path.empty()) check_output_file("plot", o.plot_path);
  if (!o.export_onnx.empty()) check_output_file("export-onnx", o.export_onnx);
  if (!o.save_model.empty()) check_output_file("save-model", o.save_model);

  DatasetPtr train_ds = open_fashion_mnist(o.data_dir, "train");
  DatasetPtr test_ds = open_fashion_mnist(o.data_dir, "test");
  const ModelSpec spec = model_spec(o.model, o.widths);
  auto build = [&](int64_t batch, bool training) {
    return o.model == "onnx" ? build_onnx_model(ctx.get(), o.onnx_path, batch, o.seed, training, o.optim)
                             : build_model(ctx.get(), o.model, batch, o.seed, training, o.optim, o.widths);
  };
  BuiltModel tm = build(o.batch, true);
  BuiltModel em = build(o.eval_batch, false);
  const bool flat = tm.flat;
  LoaderPtr train_loader = make_loader(train_ds.get(), o.batch, flat, true, o.seed,
                                       o.augment ? 2 : 0, o.augment, o.workers, o.rank, o.ranks);
  LoaderPtr test_loader = make_loader(test_ds.get(), o.eval_batch, flat, false, o.seed, 0, false,
                                      o.workers);
  int64_t full_batches = 0;
  check(ctn_loader_num_batches(train_loader.get(), &full_batches), "ctn_loader_num_batches");
  // --limit caps the batches per epoch; the loader still shuffles the whole training set, so
  // each epoch sees a different random subset of that size.
  // Distributed: batches of the whole job (each rank holds one shard of each), so --limit and
  // the images per epoch count every rank's.
  const int64_t global_batch = o.batch * o.ranks;
  const int64_t batches = o.limit != 0 ? std::min(full_batches, o.limit / global_batch) : full_batches;
  if (batches == 0) throw UsageError("--batch-size is larger than the training set");
  const int64_t train_images = batches * global_batch;
  ctn_dataset_info test_info{};
  test_info.struct_size = sizeof test_info;
  check(ctn_dataset_info_get(test_ds.get(), &test_info), "ctn_dataset_info_get");

  PlanPtr train_plan;
  {
    // Data-parallel: gradients averaged across the ranks in buckets, variables from rank 0. A
    // memory budget makes the compiler recompute activations instead of keeping them.
    ctn_compile_options co{};
    co.struct_size = sizeof co;
    co.data_parallel = comm;
    co.dp_bucket_bytes = o.bucket_bytes;
    co.dp_flags = o.overlap ? 0 : CTN_DP_BLOCKING;
    co.memory_budget = o.memory_budget;
    co.precision = parse_precision(o.precision);
    ctn_plan *p = nullptr;
    check(ctn_plan_compile(tm.graph.get(), 1, &tm.loss, &co, &p),
          comm ? "ctn_plan_compile (train, data-parallel)" : "ctn_plan_compile (train)");
    train_plan.reset(p);
  }
  PlanPtr eval_plan = compile(em.graph.get(), em.logits, "ctn_plan_compile (eval)", parse_precision(o.precision));

  // Every variable (parameters, batch-norm buffers, optimizer state) is checkpointed.
  uint32_t n_vars = 0;
  const char *const *var_names = nullptr;
  const ctn_node *var_nodes = nullptr;
  check(ctn_model_variables(tm.model.get(), CTN_VAR_PARAMETER | CTN_VAR_BUFFER | CTN_VAR_OPTIMIZER,
                            &n_vars, &var_names, &var_nodes),
        "ctn_model_variables");
  std::vector<std::string> names(var_names, var_names + n_vars);
  std::vector<const char *> name_ptrs;
  for (const std::string &s : names) name_ptrs.push_back(s.c_str());
  std::vector<ctn_node> nodes(var_nodes, var_nodes + n_vars);

  int64_t step = 0;
  std::vector<EpochLog> log;
  if (resume) {
    check(ctn_plan_load_variables(train_plan.get(), n_vars, name_ptrs.data(), nodes.data(),
                                  o.resume_path.c_str()),
          ("--resume " + o.resume_path).c_str());
    step = resume->step;
    log = resume->history;
  }

  ctn_plan_stats stats{};
  stats.struct_size = sizeof stats;
  check(ctn_plan_stats_get(train_plan.get(), &stats), "ctn_plan_stats_get");
  std::string where = placement(ctx.get(), train_plan.get());

  std::printf("chutney %s: %s on Fashion-MNIST, %lld training images (%lld batches of %lld), "
              "%lld test images\n",
              ctn_version_string(), spec.description.c_str(),
              static_cast<long long>(train_images), static_cast<long long>(batches),
              static_cast<long long>(global_batch), static_cast<long long>(test_info.count));
  std::printf("%s lr %g%s%s, schedule %s, warmup %lld, seed %llu; training plan: %u nodes -> "
              "%u steps (%u fused, %u folded), placement: %s\n",
              o.optim.name.c_str(), o.optim.lr,
              o.optim.name == "sgd" ? (" momentum " + short_num(o.optim.momentum)).c_str() : "",
              o.optim.weight_decay > 0 ? (" weight decay " + short_num(o.optim.weight_decay)).c_str()
                                       : "",
              o.schedule.c_str(), static_cast<long long>(o.warmup),
              static_cast<unsigned long long>(o.seed), stats.n_nodes, stats.n_steps,
              stats.n_fused, stats.n_folded, where.c_str());
  if (resume && resume->meta.count("ranks") && resume->meta["ranks"] != std::to_string(o.ranks)) {
    // The shards (and so the data order and the results) depend on the number of ranks.
    std::fprintf(stderr, "chutney: warning: %s was written by a run on %s rank(s), this one has %d: the "
                 "data order differs from the original run's\n", o.resume_path.c_str(),
                 resume->meta["ranks"].c_str(), o.ranks);
  }
  if (comm) {
    const char *cd = nullptr;
    check(ctn_collective_describe(comm, &cd), "ctn_collective_describe");
    std::printf("distributed: %d ranks over %s (%s), %lld images per rank per step, global batch %lld\n",
                o.ranks, o.distributed.c_str(), cd, static_cast<long long>(o.batch),
                static_cast<long long>(global_batch));
    const char *text = nullptr;
    check(ctn_plan_describe(train_plan.get(), &text), "ctn_plan_describe");
    const char *line = std::strstr(text, "data-parallel over");
    if (line) std::printf("%.*s\n", static_cast<int>(std::strcspn(line, "\n")), line);
  }
  if (resume) {
    std::printf("resumed from %s: %lld epochs, %lld updates done\n", o.resume_path.c_str(),
                static_cast<long long>(resume->epoch), static_cast<long long>(step));
  }
  std::fflush(stdout);

  ctn_tensor *xi = nullptr, *yi = nullptr;
  check(ctn_loader_batch_create(train_loader.get(), &xi, &yi), "ctn_loader_batch_create");
  TensorPtr x(xi), y(yi);
  ctn_tensor *loss_raw = nullptr;
  check(ctn_plan_output_create(train_plan.get(), 0, &loss_raw), "ctn_plan_output_create");
  TensorPtr loss(loss_raw);
  const ctn_node feed_nodes[2] = {tm.x, tm.labels};
  const ctn_tensor *feeds[2] = {x.get(), y.get()};
  ctn_tensor *outs[1] = {loss.get()};
  const int64_t total_steps = o.epochs * batches;
  ctn_run_options run_options{};
  run_options.struct_size = sizeof run_options;
  run_options.flags = o.check_numerics ? CTN_RUN_CHECK_NUMERICS : 0u;

  double train_seconds_run = 0.0, wait_run = 0.0, cpu_seconds_run = 0.0;
  int64_t images_run = 0;
  bool out_of_time = false;
  CheckpointWriter writer;
  for (int64_t epoch = first_epoch; epoch <= last_epoch && !out_of_time; ++epoch) {
    check(ctn_loader_reset(train_loader.get(), epoch - 1), "ctn_loader_reset");
    const double wait0 = loader_wait(train_loader.get());
    Progress progress("epoch " + std::to_string(epoch) + (o.time_budget > 0 ? "" : "/" + std::to_string(o.epochs)), batches,
                      global_batch, !o.quiet);
    Clock::time_point t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    double loss_sum = 0.0;
    int64_t done = 0;  // updates of this epoch
    for (int64_t b = 0; b < batches; ++b) {
      const double elapsed = train_seconds_run + std::chrono::duration<double>(Clock::now() - t0).count();
      if (o.time_budget > 0 && elapsed >= o.time_budget) {
        out_of_time = true;
        break;
      }
      int32_t n = 0;
      check(ctn_loader_next(train_loader.get(), x.get(), y.get(), &n), "ctn_loader_next");
      if (n != o.batch) throw Failure("the loader returned a short batch");
      ++step;
      if (o.fault_signal && step == o.fault_step && o.rank == o.fault_rank) {
        std::fprintf(stderr, "chutney: rank %d: --fault: sending itself %s at update %lld\n", o.rank,
                     o.fault_signal == SIGKILL ? "SIGKILL" : "SIGSTOP", static_cast<long long>(step));
        std::raise(o.fault_signal);
      }
      check(ctn_model_set_step(tm.model.get(), step), "ctn_model_set_step");
      const double lr = lr_at(o, step, batches, total_steps, elapsed);
      check(ctn_model_set_lr(tm.model.get(), lr), "ctn_model_set_lr");
      check(ctn_model_run_with_options(tm.model.get(), train_plan.get(), &run_options, 2, feed_nodes, feeds, 1, outs),
            "ctn_model_run (train)");
      float value = 0.0f;
      check(ctn_tensor_read(loss.get(), &value, sizeof value), "ctn_tensor_read (loss)");
      if (!std::isfinite(value)) {
        progress.finish();
        throw Failure("training diverged: loss is " + std::to_string(value) + " at epoch " +
                      std::to_string(epoch) + ", batch " + std::to_string(b + 1) +
                      "; try a smaller --lr" + (o.check_numerics ? "" : ", or --check-numerics to find the op"));
      }
      // %.9g prints a float exactly, so that another program (a language binding) training
      // with the same seed can be compared bit for bit.
      if (o.print_steps) std::printf("step %lld lr %.17g loss %.9g\n", static_cast<long long>(step), lr, value);
      loss_sum += value;
      done = b + 1;
      progress.update(b + 1, loss_sum / static_cast<double>(b + 1));
    }
    progress.finish();
    Clock::time_point t1 = Clock::now();
    cpu_seconds_run += process_cpu_seconds() - cpu0;
    if (done == 0) break;  // the budget ended exactly at an epoch's end
    const int64_t epoch_images = done * global_batch;
    const double wait = loader_wait(train_loader.get()) - wait0;
    if (comm) {
      // The epoch's loss over every rank's images (each rank's mean, averaged).
      TensorPtr ls = make_tensor(CTN_F64, {1}, &loss_sum);
      check(ctn_collective_allreduce(comm, ls.get(), CTN_REDUCE_MEAN), "ctn_collective_allreduce (loss)");
      check(ctn_tensor_read(ls.get(), &loss_sum, sizeof loss_sum), "ctn_tensor_read");
    }
    check(ctn_model_copy_state(tm.model.get(), train_plan.get(), em.model.get(), eval_plan.get(),
                               nullptr),
          "ctn_model_copy_state");
    // Every rank holds the same weights and evaluates its share of the test batches, so that no
    // rank waits in the next collective (with its timeout running) while another evaluates.
    const double acc = evaluate_shared(eval_plan.get(), em, test_loader.get(), comm, o.rank, o.ranks);
    Clock::time_point t2 = Clock::now();

    EpochLog e;
    e.epoch = static_cast<int>(epoch);
    e.train_loss = loss_sum / static_cast<double>(done);
    e.test_accuracy = acc;
    e.train_seconds = std::chrono::duration<double>(t1 - t0).count();
    e.eval_seconds = std::chrono::duration<double>(t2 - t1).count();
    e.images_per_s = static_cast<double>(epoch_images) / std::max(e.train_seconds, 1e-9);
    e.wait_seconds = wait;
    log.push_back(e);
    train_seconds_run += e.train_seconds;
    wait_run += wait;
    images_run += epoch_images;
    if (done < batches) {
      std::printf("time budget of %g s reached after %lld of %lld batches of epoch %d\n", o.time_budget,
                  static_cast<long long>(done), static_cast<long long>(batches), e.epoch);
    }
    std::printf("epoch %d/%lld: train loss %.4f, test accuracy %.4f, %.0f images/s, "
                "%.2f s (train %.2f s, eval %.2f s), loader wait %.3f s\n",
                e.epoch, static_cast<long long>(o.epochs), e.train_loss, e.test_accuracy,
                e.images_per_s, e.train_seconds + e.eval_seconds, e.train_seconds,
                e.eval_seconds, wait);
    if (!o.checkpoint_dir.empty()) save_epoch(o, writer, train_plan.get(), names, nodes, epoch, step, log, comm != nullptr);
    std::fflush(stdout);
  }
  finish_save(o, writer, log);

  if (log.empty()) {
    // Resumed at or past --epochs: report the checkpoint's model as it is.
    check(ctn_model_copy_state(tm.model.get(), train_plan.get(), em.model.get(), eval_plan.get(),
                               nullptr),
          "ctn_model_copy_state");
    EpochLog e;
    e.epoch = static_cast<int>(first_epoch - 1);
    e.test_accuracy = evaluate(eval_plan.get(), em, test_loader.get());
    log.push_back(e);
  }
  const double ips = train_seconds_run > 0 ? static_cast<double>(images_run) / train_seconds_run : 0.0;
  std::printf("final test accuracy: %.4f\n", log.back().test_accuracy);
  std::printf("training: %lld images in %.2f s, %.0f images/s; loader wait %.3f s (%.2f%% of "
              "training time); process CPU time %.2f s\n",
              static_cast<long long>(images_run), train_seconds_run, ips, wait_run,
              train_seconds_run > 0 ? 100.0 * wait_run / train_seconds_run : 0.0, cpu_seconds_run);
  double ratio = stats.naive_bytes > 0 ? static_cast<double>(stats.planned_peak_bytes) /
                                             static_cast<double>(stats.naive_bytes)
                                       : 0.0;
  std::printf("training plan memory: planned peak %s vs naive %s (%.1f%% of naive; "
              "%llu vs %llu bytes), persistent %s\n",
              human_bytes(stats.planned_peak_bytes).c_str(), human_bytes(stats.naive_bytes).c_str(),
              100.0 * ratio, static_cast<unsigned long long>(stats.planned_peak_bytes),
              static_cast<unsigned long long>(stats.naive_bytes),
              human_bytes(stats.persistent_bytes).c_str());
  if (o.memory_budget) print_memory_report(train_plan.get());
  if (o.precision != "f32") print_autocast(train_plan.get());
  if (!o.json_path.empty()) {
    write_json(o, log, train_images, where, stats, wait_run, ips);
    std::printf("wrote %s\n", o.json_path.c_str());
  }
  if (!o.plot_path.empty()) {
    std::vector<PlotPoint> pts;
    for (const EpochLog &e : log) pts.push_back({e.epoch, e.train_loss, e.test_accuracy});
    write_plot(o.plot_path, "chutney train --model " + o.model, pts);
    std::printf("wrote %s\n", o.plot_path.c_str());
  }
  if (o.rank == 0) write_trained_model(o, tm, train_plan.get(), em, eval_plan.get());
  // Plans and tensors go before the context (declaration order does it).
  return kExitOk;
}

}  // namespace

const CommandSpec &train_command() {
  static const CommandSpec spec{
      "train",
      "train a model (mlp, cnn, or an ONNX model) on Fashion-MNIST and report test accuracy",
      "Data: {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from the Debian package\n"
      "dataset-fashion-mnist (default directory " CTN_FASHION_MNIST_DIR ").\n"
      "Progress goes to stderr (a live bar on a terminal); results go to stdout, ending with\n"
      "`final test accuracy: X`. The last partial training batch of an epoch is dropped;\n"
      "the test accuracy always covers the whole test set.\n"
      "Checkpoints (--checkpoint-dir) are safetensors files DIR/<model>-epochNNN.safetensors\n"
      "holding every variable (weights, optimizer state) and, as metadata, the epoch, the\n"
      "update count, the loader's seed and position and the options. --resume FILE continues\n"
      "such a run up to --epochs; options not given are taken from the checkpoint, and the\n"
      "losses are those of an uninterrupted run with the same seed.\n"
      "Distributed: `mpirun -np N chutney train --distributed mpi ...` trains one model on N\n"
      "ranks: each rank takes --batch-size images of a disjoint shard of every epoch, so the\n"
      "global batch is N x --batch-size (without --batch-size: the model's default batch split\n"
      "over the ranks, i.e. what one process trains); rank 0 alone prints and writes checkpoints; a rank that\n"
      "fails or dies ends the whole job with a message naming it (docs/DISTRIBUTED.md).\n"
      "Of this run's own epoch checkpoints (each file carries its run's id; --resume continues\n"
      "a run) only the newest --keep-last are kept, plus the one of the best test accuracy; other\n"
      "runs' files are never removed, and a run that would replace one stops before training.\n"
      "Temporary files left in DIR by a killed writer are removed when it is opened.\n",
      {
          {"model", "NAME", "model to train: mlp (784-512-256-10) or cnn (default mlp)"},
          {"model-onnx", "FILE.onnx", "fine-tune this ONNX model instead: one f32 input [N, 784] or [N, 1, 28, 28] (pixels normalised as for the built-in models), first output the logits [N, 10]; every f32 initializer is trained (docs/ONNX.md, Fine-tuning)"},
          {"cnn-widths", "C1,C2[,C3],FC[,bn][,valid][,k3]", "cnn: conv channels (two or three blocks) and hidden units; ,bn: batch norm after each conv; ,valid: unpadded convs; ,k3: 3x3 kernels instead of 5x5 (default 32,64,128)"},
          {"epochs", "N", "total passes over the training set (default 2)"},
          {"batch-size", "B", "images per training step, per rank with --distributed (default: mlp 128, cnn 64; distributed: that over the ranks)"},
          {"optimizer", "NAME", "sgd, adam or adamw (default: mlp sgd, cnn adam)"},
          {"lr", "X", "learning rate (default: sgd 0.05, adam/adamw 0.001)"},
          {"momentum", "M", "SGD momentum (default 0.9)"},
          {"weight-decay", "W", "weight decay (default: adamw 0.01, else 0)"},
          {"schedule", "NAME",
           "lr schedule: none, step (halve every epoch), cosine, linear (decay to 0; default cosine)"},
          {"time-budget", "SECONDS",
           "stop training after SECONDS of updates (evaluation not counted); the cosine/linear schedule "
           "follows the clock or the updates, whichever is further along, so a slow machine trains fewer "
           "images instead of longer and a fast one runs --epochs exactly (default --epochs: 1000, "
           "i.e. the clock); not with --resume or --distributed"},
          {"warmup", "N", "linear warm-up over the first N updates (default 0)"},
          {"augment", nullptr, "random crop (padding 2) and horizontal flip of training images"},
          {"backend", "NAME", "preferred backends, ','-separated (default: $CHUTNEY_BACKEND, cpu)"},
          {"threads", "N", "host backend threads (default: $CHUTNEY_NUM_THREADS, the cores)"},
          {"workers", "N", "data loader threads (default 1)"},
          {"seed", "S", "seed of the initial weights and the shuffling (default 1)"},
          {"data-dir", "DIR", "directory of the Fashion-MNIST IDX files"},
          {"limit", "N", "train on N (shuffled) images per epoch only"},
          {"eval-batch-size", "N", "images per evaluation step (default: --batch-size)"},
          {"checkpoint-dir", "DIR", "save a checkpoint at the end of every epoch"},
          {"keep-last", "N", "--checkpoint-dir keeps this run's newest N epochs and its best one; 0 keeps all (default 5)"},
          {"resume", "FILE", "continue the run saved in checkpoint FILE"},
          {"stop-after", "N", "stop after N epochs of this invocation (as if interrupted)"},
          {"json", "FILE", "write the per-epoch log as JSON to FILE"},
          {"plot", "FILE.svg", "write an SVG chart of loss and accuracy per epoch"},
          {"export-onnx", "FILE.onnx", "after training, write the inference model with the trained weights as ONNX (batch: --eval-batch-size)"},
          {"save-model", "FILE", "after training, write the inference model with the trained weights as a chutney graph file (docs/MODELS.md)"},
          {"quiet", nullptr, "no progress output on stderr"},
          {"memory-budget", "BYTES|auto",
           "cap the training plan's planned peak (suffix k, M, G); over it, activations are recomputed "
           "(auto: as low as that gets); results are bit-identical"},
          {"precision", "f32|bf16|f16",
           "mixed precision: matmuls and convolutions (and their gradients) in bf16 or f16, the rest and "
           "the weights in f32; f16 adds dynamic loss scaling (default f32; docs/EXECUTION.md)"},
          {"print-steps", nullptr, "print every update's learning rate and loss (\"step N lr X loss Y\")"},
          {"check-numerics", nullptr, "check every step's output for NaN/inf and stop at the first op that makes one, naming it (slow)"},
          {"distributed", "mpi|nccl", "data-parallel over the ranks of `mpirun -np N`: --batch-size per rank, gradients averaged (docs/DISTRIBUTED.md)"},
          {"bucket-bytes", "N", "distributed: gradient fusion bucket size in bytes (default 64 MiB)"},
          {"overlap", "on|off", "distributed: start each bucket's allreduce while backward still runs and wait at the optimizer (default on, where the collective plugin can; off: blocking)"},
          {"collective-timeout", "S", "distributed: a collective not done in S seconds ends the job naming the missing ranks (default 60)"},
          {"rank-checkpoints", nullptr, "distributed: every rank R > 0 also saves its checkpoints to DIR/rank-R (tests)"},
          {"fault", "STEP:RANK:kill|stop", "distributed, tests: at update STEP rank RANK sends itself SIGKILL or SIGSTOP"},
      },
      run_train};
  return spec;
}

}  // namespace ctn_cli
