// The CLI's built-in models (mlp, cnn) built with the layer library (chutney/nn.h), and the
// pieces every command shares: a training graph (forward, loss, gradients, optimizer updates)
// and an inference twin whose variables carry the same names, so checkpoints and
// ctn_model_copy_state move state between them by name.
#pragma once

#include <chutney/data.h>
#include <chutney/nn.h>

#include <string>

#include "cli.h"

namespace ctn_cli {

struct ModelDeleter {
  void operator()(ctn_model *p) const { ctn_model_release(p); }
};
using ModelPtr = std::unique_ptr<ctn_model, ModelDeleter>;

// What the model needs to know about the optimizer when its graph is built.
struct OptimConfig {
  std::string name = "adam";  // sgd | adam | adamw
  double lr = 1e-3;
  double momentum = 0.9;      // sgd
  double weight_decay = 0.0;
  double clip_norm = 0.0;
  double loss_scale = 0.0;    // > 0: dynamic loss scaling from this scale (--precision f16)
};

// Shape of the CNN: conv KxK(1->c1) [batch norm] relu pool2, conv KxK(c1->c2) [batch norm] relu
// pool2, [conv KxK(c2->c3) [batch norm] relu pool2,] fc(last*S->fc) relu, fc(fc->10). K is 5
// (default) or 3 (",k3"); "same" padding gives 28-14-7(-3), "valid" convolutions shrink by K-1
// first (28-24-12-8-4 for K = 5: a third of the work). Stored in checkpoints' metadata
// ("cnn_widths": "32,64,128", "32,64,128,bn,valid", "32,64,128,128,bn,k3"...).
struct CnnWidths {
  int64_t c1 = 32, c2 = 64, c3 = 0, fc = 128;  // c3 0: two conv blocks
  int64_t kernel = 5;
  bool bn = false;     // batch norm after each convolution
  bool valid = false;  // no padding
  int64_t last() const { return c3 > 0 ? c3 : c2; }  // channels before the fc layers
  int64_t side() const {                             // feature-map side before the fc layers
    int64_t s = 28;
    for (int i = 0; i < (c3 > 0 ? 3 : 2); ++i) s = (s - (valid ? kernel - 1 : 0)) / 2;
    return s;
  }
};

// Parses "C1,C2[,C3],FC" followed by any of ",bn", ",valid" and ",k3" / ",k5" (throws UsageError
// naming `option`, also when a valid network would shrink to nothing).
CnnWidths parse_widths(const std::string &text, const std::string &option);
std::string widths_text(const CnnWidths &w);

struct ModelSpec {
  std::string name;         // "mlp" | "cnn"
  int64_t default_batch;    // 128 | 64
  std::string description;  // "mlp 784-512-256-10"
};

// Throws UsageError for an unknown name.
ModelSpec model_spec(const std::string &name, const CnnWidths &w = CnnWidths{});

// A built graph. `graph` must outlive `model`: members are destroyed in reverse order.
struct BuiltModel {
  GraphPtr graph;
  ModelPtr model;
  ctn_node x = CTN_NODE_NONE;       // images: [B, 784] (mlp) or [B, 1, 28, 28] (cnn)
  ctn_node labels = CTN_NODE_NONE;  // i32 [B]
  ctn_node logits = CTN_NODE_NONE;  // [B, 10]
  ctn_node loss = CTN_NODE_NONE;    // training only: mean cross entropy
  bool flat = false;                // the input is [B, 784]
};

// training: forward + loss + ctn_nn_minimize(optim); otherwise forward only (inference mode:
// batch norm uses running statistics, dropout is the identity).
BuiltModel build_model(ctn_context *ctx, const std::string &name, int64_t batch, uint64_t seed,
                       bool training, const OptimConfig &optim, const CnnWidths &w = CnnWidths{});

// The ONNX model at `path` as a CLI model (models_onnx.cpp): its one input, f32 [N, 784] or
// [N, 1, 28, 28] with any N (taken as `batch`), its first output the logits [batch, 10]; every
// floating initializer becomes a trainable parameter under its ONNX name (ctn_model_adopt_variable),
// so checkpoints, --resume and the train -> eval copy work as for the built-in models. A Failure
// says what does not fit (the model's shapes named).
BuiltModel build_onnx_model(ctn_context *ctx, const std::string &path, int64_t batch, uint64_t seed, bool training,
                            const OptimConfig &optim);

// The training half of a model: a "labels" input (i32 [batch]), the mean cross entropy of the
// logits as `loss`, and ctn_nn_minimize with `optim` over the model's parameters.
void add_training(BuiltModel &b, int64_t batch, const OptimConfig &optim);

// The "model" and "cnn_widths" metadata of checkpoint `path` ("" when absent); the file is
// loaded, so a missing, truncated or corrupt one is a Failure naming `--checkpoint PATH`.
void checkpoint_model(const std::string &path, std::string *model, std::string *widths);

// ---- data -------------------------------------------------------------------------------------
struct DatasetDeleter {
  void operator()(ctn_dataset *p) const { ctn_dataset_release(p); }
};
struct LoaderDeleter {
  void operator()(ctn_loader *p) const { ctn_loader_release(p); }
};
using DatasetPtr = std::unique_ptr<ctn_dataset, DatasetDeleter>;
using LoaderPtr = std::unique_ptr<ctn_loader, LoaderDeleter>;

// Fashion-MNIST training-set statistics of pixels scaled to [0, 1].
inline constexpr double kPixelMean = 0.2860;
inline constexpr double kPixelStd = 0.3530;

// Opens split "train" or "test" of Fashion-MNIST in `dir`; a Failure names the files and the
// Debian package when they are missing or corrupt.
DatasetPtr open_fashion_mnist(const std::string &dir, const char *split);

// A loader over `ds` with the CLI's normalisation; `flat` gives [B, 784] images. shard_count > 1:
// this rank's shard of every epoch (data.h, docs/DISTRIBUTED.md).
LoaderPtr make_loader(ctn_dataset *ds, int64_t batch, bool flat, bool shuffle, uint64_t seed,
                      int32_t crop_padding, bool hflip, int32_t workers, int32_t shard_index = 0,
                      int32_t shard_count = 1);

// evaluate()'s counts over batches b with b % parts == part only (a data-parallel rank's share).
void evaluate_part(ctn_plan *plan, const BuiltModel &eval, ctn_loader *loader, int32_t part, int32_t parts,
                   int64_t *correct, int64_t *total);
// Accuracy of inference plan `plan` (compiled from `eval`, logits as output 0) over every sample
// of `loader` (epoch 0, no shuffling); padded rows of the last batch are ignored.
double evaluate(ctn_plan *plan, const BuiltModel &eval, ctn_loader *loader);

// "cpu 12 steps" for every backend that runs part of `plan`.
std::string placement(ctn_context *ctx, ctn_plan *plan);

// ctn_plan_compile with one output, in `precision` (CTN_PRECISION_*).
PlanPtr compile(ctn_graph *g, ctn_node output, const char *what, uint32_t precision = CTN_PRECISION_F32);

// CTN_PRECISION_* of "f32", "bf16", "f16"; UsageError naming --precision otherwise.
uint32_t parse_precision(const std::string &v);

}  // namespace ctn_cli
