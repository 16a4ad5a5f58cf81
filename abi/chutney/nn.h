/* chutney layer library: models, layers, initialisers, optimizers, schedules. C99.
 *
 * A thin layer over the graph API of chutney.h: every layer call appends ordinary graph nodes
 * (matmul, conv2d, batch_norm...) and variables to a graph, so what it builds can be inspected,
 * differentiated, compiled and run like any hand-written graph.
 *
 *   ctn_graph *g;  ctn_model *m;
 *   ctn_graph_create(ctx, 0, &g);
 *   ctn_model_create(g, CTN_F32, 42, &m);               // f32 parameters, seed 42
 *   ctn_input(g, "x", CTN_F32, 2, (int64_t[]){128, 784}, &x);
 *   const ctn_layer mlp[] = {CTN_NN_LINEAR(512), CTN_NN_RELU(), CTN_NN_LINEAR(256),
 *                            CTN_NN_RELU(), CTN_NN_LINEAR(10)};
 *   ctn_nn_sequential(m, x, 5, mlp, &logits);
 *   ctn_cross_entropy(g, logits, labels, &loss);
 *   ctn_optimizer opt = {sizeof opt, CTN_OPTIM_ADAM, 1e-3};
 *   ctn_nn_minimize(m, loss, &opt, NULL);              // grads + update ops + ctn_assign
 *   ctn_plan_compile(g, 1, &loss, NULL, &plan);
 *   for (step = 1; ...) { ctn_model_set_step(m, step); ctn_model_run(m, plan, ...); }
 *
 * Conventions: those of chutney.h (status returns, ctn_last_error(), out-parameters untouched
 * on failure, *_release accepts NULL, nothing aborts or throws). Errors name the layer
 * ("ctn_nn_linear(linear2): ...") and keep the status of the graph call that failed.
 *
 * Ownership: a ctn_model borrows its graph (the graph must outlive the model) and owns only its
 * bookkeeping (variable names, the step/lr feed tensors). Nodes it returns belong to the graph.
 *
 * Thread-safety: a model must not be used from two threads at once, nor its graph while a
 * layer call on the model runs (as for a graph).
 *
 * Modes: the model's training flag (default 1) is read when a layer is BUILT: batch norm uses
 * batch statistics and updates its running statistics, dropout drops. Build the inference graph
 * with a second model (same seed, same layers, training 0) and copy the trained variables into
 * its plan with ctn_model_copy_state, or load them from a checkpoint by name.
 *
 * Everything here is since 1.1.
 */
#ifndef CHUTNEY_NN_H
#define CHUTNEY_NN_H

#include "chutney.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctn_model ctn_model;

/* =============================================================================================
 * Models
 * =========================================================================================== */

/* Creates a model that adds its layers to lazy or eager graph `g` (borrowed; it must outlive the
 * model). `dtype` (CTN_F32 or CTN_F64) is the dtype of every parameter. `seed` fixes every
 * initialisation and dropout mask: parameter `name` is initialised from a stream derived from
 * (seed, name), so the same seed and names give the same values whatever the creation order.
 * since 1.1 */
CTN_API ctn_status ctn_model_create(ctn_graph *g, ctn_dtype dtype, uint64_t seed,
                                    ctn_model **out);

/* Frees the model's bookkeeping; the graph and its nodes stay. Accepts NULL. since 1.1 */
CTN_API void ctn_model_release(ctn_model *m);

/* The graph the model builds into (borrowed). since 1.1 */
CTN_API ctn_status ctn_model_graph(const ctn_model *m, ctn_graph **out);

/* Training (1, the default) or inference (0) for the layers built after this call. since 1.1 */
CTN_API ctn_status ctn_model_set_training(ctn_model *m, int32_t training);

/* Names the next layer `name` (copied): its variables become "<name>.weight" and so on. Without
 * it a layer is named after its kind and a per-kind counter from 1: "linear1", "conv2",
 * "batch_norm1", "lstm1", "embedding1". A name already in use with the same shape REUSES the
 * variable (weight sharing); with another shape the layer fails with CTN_ERR_SHAPE. since 1.1 */
CTN_API ctn_status ctn_model_name_next(ctn_model *m, const char *name);

/* Restarts the automatic layer counters, so that building the same layers again reuses their
 * variables (for instance a second tower over the same weights). since 1.1 */
CTN_API ctn_status ctn_model_reset_names(ctn_model *m);

/* ---- initialisers -------------------------------------------------------------------------- */

typedef enum ctn_init {
  CTN_INIT_ZEROS = 0,
  CTN_INIT_ONES = 1,
  CTN_INIT_KAIMING_UNIFORM = 2, /* U(-b, b), b = gain * sqrt(3 / fan_in); gain sqrt(2) default */
  CTN_INIT_KAIMING_NORMAL = 3,  /* N(0, s^2), s = gain / sqrt(fan_in); gain sqrt(2) default */
  CTN_INIT_XAVIER_UNIFORM = 4,  /* U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)); gain 1 */
  CTN_INIT_XAVIER_NORMAL = 5,   /* N(0, s^2), s = gain * sqrt(2 / (fan_in + fan_out)); gain 1 */
  CTN_INIT_UNIFORM = 6,         /* U(-gain, gain) */
  CTN_INIT_NORMAL = 7           /* N(0, gain^2) */
} ctn_init;

/* Fills every element of contiguous f32/f64 tensor `t` by `kind`; `gain` 0 picks the default
 * gain of the kind (above; 1 for UNIFORM and NORMAL). fan_in/fan_out >= 1 where the kind uses
 * them. Deterministic: the values depend only on (kind, fans, gain, seed, numel), never on the
 * platform (splitmix64 + Box-Muller in double). since 1.1 */
CTN_API ctn_status ctn_nn_init_fill(ctn_tensor *t, ctn_init kind, int64_t fan_in,
                                    int64_t fan_out, double gain, uint64_t seed);

/* Initialiser of the weights of layers built afterwards (Linear, Conv2d; default
 * CTN_INIT_KAIMING_UNIFORM with gain 0 = its default). Biases start at zero, batch-norm scale at
 * one. since 1.1 */
CTN_API ctn_status ctn_model_set_init(ctn_model *m, ctn_init weight_init, double gain);

/* ---- variables ----------------------------------------------------------------------------- */

/* Kinds of model variables. */
#define CTN_VAR_PARAMETER 1u /* trainable: what ctn_nn_minimize differentiates */
#define CTN_VAR_BUFFER 2u    /* layer state that is not trained: batch-norm running statistics */
#define CTN_VAR_OPTIMIZER 4u /* optimizer state: SGD velocity, Adam moments */

/* Adds a variable of the model's dtype named `name` (used as is), initialised by `init`
 * (fan_in/fan_out/gain as in ctn_nn_init_fill; the seed is derived from the model's seed and the
 * name). kind is one CTN_VAR_* value. An existing variable of that name and shape is returned
 * instead (CTN_ERR_SHAPE for another shape). since 1.1 */
CTN_API ctn_status ctn_model_variable(ctn_model *m, const char *name, uint32_t kind,
                                      uint32_t ndim, const int64_t *shape, ctn_init init,
                                      int64_t fan_in, int64_t fan_out, double gain,
                                      ctn_node *out);

/* Makes the existing variable node `var` of the model's graph (made by ctn_variable, or by
 * ctn_onnx_load for a floating initializer) a model variable of `kind` (CTN_VAR_*) named `name`
 * (NULL: the variable's own name), so ctn_nn_minimize trains it, ctn_model_variables lists it and
 * ctn_model_copy_state moves it: how an imported model is fine-tuned with this header's
 * optimizers. Errors: CTN_ERR_INVALID_ARGUMENT (NULL model, `var` not a variable of the graph,
 * an empty name, a name the model has for another node, an unknown kind); CTN_ERR_DTYPE (a dtype
 * other than the model's). Adopting the same node under the same name and kind again is a no-op.
 * since 1.5 */
CTN_API ctn_status ctn_model_adopt_variable(ctn_model *m, ctn_node var, uint32_t kind,
                                            const char *name);

/* Every variable of the kinds in the bit mask `kinds` (CTN_VAR_*), in creation order: names
 * ("fc1.weight", "fc1.weight.adam_m", "bn1.running_mean"...) and variable nodes. This is the
 * list to checkpoint (all kinds) or to differentiate (CTN_VAR_PARAMETER). The arrays are owned
 * by the model and valid until the next call on the model that adds a variable or asks for
 * another list. since 1.1 */
CTN_API ctn_status ctn_model_variables(ctn_model *m, uint32_t kinds, uint32_t *out_count,
                                       const char *const **out_names,
                                       const ctn_node **out_nodes);

/* Copies, for every variable name present in both models, the current value from plan `src`
 * (compiled from src_model's graph) into plan `dst` (compiled from dst_model's graph): train ->
 * eval. Names absent on either side are skipped; *out_copied (may be NULL) counts the copies. A
 * name with another dtype or shape fails with CTN_ERR_SHAPE / CTN_ERR_DTYPE. since 1.1 */
CTN_API ctn_status ctn_model_copy_state(const ctn_model *src_model, ctn_plan *src,
                                        const ctn_model *dst_model, ctn_plan *dst,
                                        uint32_t *out_copied);

/* ---- per-step feeds: step and learning rate ------------------------------------------------ */

/* The model's 0-d i64 input "step" (created on first use): the update number, from 1. Dropout
 * masks and Adam's bias correction read it. since 1.1 */
CTN_API ctn_status ctn_model_step(ctn_model *m, ctn_node *out);
/* The model's 0-d input "lr" of the model's dtype (created on first use). since 1.1 */
CTN_API ctn_status ctn_model_lr(ctn_model *m, ctn_node *out);
/* Values that ctn_model_run feeds to "step" (initially 1; must be >= 1) and "lr" (initially the
 * lr of the last ctn_nn_minimize, else 0.01). Set them before each run, e.g. with
 * ctn_nn_lr_at. since 1.1 */
CTN_API ctn_status ctn_model_set_step(ctn_model *m, int64_t step);
CTN_API ctn_status ctn_model_set_lr(ctn_model *m, double lr);

/* ctn_plan_run with the model's step and lr appended to the caller's feeds (a plan that does
 * not use them ignores them). `p` must be compiled from the model's graph. since 1.1 */
CTN_API ctn_status ctn_model_run(ctn_model *m, ctn_plan *p, uint32_t n_feeds,
                                 const ctn_node *feed_nodes,
                                 const ctn_tensor *const *feed_values, uint32_t n_outputs,
                                 ctn_tensor *const *outputs);
/* ctn_model_run with run options (ctn_plan_run_with_options; NULL: as ctn_model_run). since 1.3 */
CTN_API ctn_status ctn_model_run_with_options(ctn_model *m, ctn_plan *p, const ctn_run_options *options,
                                              uint32_t n_feeds, const ctn_node *feed_nodes,
                                              const ctn_tensor *const *feed_values, uint32_t n_outputs,
                                              ctn_tensor *const *outputs);

/* =============================================================================================
 * Layers
 *
 * Each takes the model, an input node and the layer's sizes, creates the layer's variables
 * (named as ctn_model_name_next says) and writes the output node. x must have the model's
 * dtype. The sizes given are checked against x's shape (CTN_ERR_SHAPE naming both).
 * =========================================================================================== */

/* y = x @ weight^T + bias: x [..., in] -> [..., out]; weight [out, in] (PyTorch's layout, so
 * checkpoints map 1:1), bias [out] when `bias` is 1. since 1.1 */
CTN_API ctn_status ctn_nn_linear(ctn_model *m, ctn_node x, int64_t in_features,
                                 int64_t out_features, int32_t bias, ctn_node *out);

/* 2-d convolution with bias: x [N, in_ch, H, W] -> [N, out_ch, Ho, Wo]; weight
 * [out_ch, in_ch, k, k], bias [out_ch]; square kernel k, stride >= 1, pad >= 0. since 1.1 */
CTN_API ctn_status ctn_nn_conv2d(ctn_model *m, ctn_node x, int64_t in_channels,
                                 int64_t out_channels, int32_t kernel, int32_t stride,
                                 int32_t pad, ctn_node *out);

/* Batch normalisation over axis 1 of x [N, C, ...] with scale "weight" [C] (ones) and shift
 * "bias" [C] (zeros), buffers "running_mean" (zeros) and "running_var" (ones). Training: batch
 * statistics, and the running statistics are assigned
 *   running = (1 - momentum) * running + momentum * batch_stat
 * (the variance unbiased, as PyTorch does); inference: the running statistics. momentum in
 * (0, 1] (0 picks 0.1), eps > 0 (0 picks 1e-5). since 1.1 */
CTN_API ctn_status ctn_nn_batch_norm(ctn_model *m, ctn_node x, int64_t channels,
                                     double momentum, double eps, ctn_node *out);

/* Layer normalisation over the last axis (size `features`), scale and shift [features].
 * eps 0 picks 1e-5. since 1.1 */
CTN_API ctn_status ctn_nn_layer_norm(ctn_model *m, ctn_node x, int64_t features, double eps,
                                     ctn_node *out);

/* Dropout with probability p in [0, 1): training, a mask from (a per-layer seed derived from the
 * model's seed, the model's step input, element index); inference or p == 0, the identity
 * (*out = x). since 1.1 */
CTN_API ctn_status ctn_nn_dropout(ctn_model *m, ctn_node x, double p, ctn_node *out);

/* Rows of "weight" [num, dim] (N(0, 1) initialised, as PyTorch) picked by integer ids [...]
 * -> [..., dim]. since 1.1 */
CTN_API ctn_status ctn_nn_embedding(ctn_model *m, ctn_node ids, int64_t num, int64_t dim,
                                    ctn_node *out);

/* An LSTM over x_seq [T, N, I] unrolled over T (one cell per time step sharing the weights),
 * zero initial state. Variables: weight_ih [4H, I], weight_hh [4H, H], bias [4H], gates in the
 * order input, forget, cell, output (PyTorch's), initialised U(-1/sqrt(H), 1/sqrt(H)). Per step:
 *   z = x_t @ weight_ih^T + h @ weight_hh^T + bias;  i, f, o = sigmoid(.), g = tanh(.)
 *   c = f * c + i * g;  h = o * tanh(c)
 * h_seq [T, N, H] (all steps) and h_last [N, H]; either out-pointer may be NULL. since 1.1 */
CTN_API ctn_status ctn_nn_lstm(ctn_model *m, ctn_node x_seq, int64_t hidden, ctn_node *h_seq,
                               ctn_node *h_last);

/* Activations and reshapes, for symmetry (no variables). max_pool2d: square window `kernel`,
 * stride 0 picks the window size. flatten: [N, ...] -> [N, prod(...)]. since 1.1 */
CTN_API ctn_status ctn_nn_relu(ctn_model *m, ctn_node x, ctn_node *out);
CTN_API ctn_status ctn_nn_max_pool2d(ctn_model *m, ctn_node x, int32_t kernel, int32_t stride,
                                     ctn_node *out);
CTN_API ctn_status ctn_nn_flatten(ctn_model *m, ctn_node x, ctn_node *out);

/* ---- sequential composition ---------------------------------------------------------------- */

typedef enum ctn_layer_kind {
  CTN_LAYER_LINEAR = 1,     /* units = out features (in: x's last dim); flags CTN_LAYER_NO_BIAS */
  CTN_LAYER_CONV2D = 2,     /* units = out channels, kernel, stride (0: 1), pad; flags CTN_LAYER_NO_BIAS
                               (since 1.1: e.g. before a batch norm, whose shift makes a bias moot) */
  CTN_LAYER_BATCH_NORM = 3, /* p = momentum (0: 0.1), eps (0: 1e-5); channels from x */
  CTN_LAYER_DROPOUT = 4,    /* p */
  CTN_LAYER_RELU = 5,
  CTN_LAYER_TANH = 6,
  CTN_LAYER_SIGMOID = 7,
  CTN_LAYER_MAX_POOL2D = 8, /* kernel, stride (0: kernel), pad */
  CTN_LAYER_AVG_POOL2D = 9, /* kernel, stride (0: kernel), pad; padding counted */
  CTN_LAYER_FLATTEN = 10,
  CTN_LAYER_LAYER_NORM = 11 /* eps (0: 1e-5); features from x's last dim */
} ctn_layer_kind;

#define CTN_LAYER_NO_BIAS 1

/* One layer of a sequential stack; unused fields zero. Field order lets C99 write the common
 * cases positionally: {CTN_LAYER_CONV2D, 32, 5, 1, 2} is a 5x5 conv with 32 outputs, stride 1,
 * pad 2; {CTN_LAYER_MAX_POOL2D, 0, 2} a 2x2 max pool. Frozen: an array element without
 * struct_size, its layout and size pinned for ABI v1 (core/capi/abi_layout.h); a layer that needs
 * more parameters gets a new kind reading the existing fields, or a new struct. */
typedef struct ctn_layer {
  int32_t kind;      /* ctn_layer_kind */
  int32_t units;     /* LINEAR: out features; CONV2D: out channels */
  int32_t kernel;    /* CONV2D, pools: square window */
  int32_t stride;    /* CONV2D, pools */
  int32_t pad;       /* CONV2D, pools */
  int32_t flags;     /* CTN_LAYER_* flags */
  double p;          /* DROPOUT: drop probability; BATCH_NORM: momentum */
  double eps;        /* BATCH_NORM, LAYER_NORM */
  const char *name;  /* NULL: automatic (see ctn_model_name_next) */
} ctn_layer;

/* Complete initialisers for the common layers (complete, so -Wextra's
 * missing-field-initializers stays quiet):
 *   const ctn_layer cnn[] = {CTN_NN_CONV2D(32, 5, 1, 2), CTN_NN_RELU(), CTN_NN_MAX_POOL2D(2),
 *                            CTN_NN_FLATTEN(), CTN_NN_LINEAR(10)}; */
#define CTN_NN_LAYER_(kind, units, k, s, p, flags, fp, eps) \
  {(kind), (units), (k), (s), (p), (flags), (fp), (eps), NULL}
#define CTN_NN_LINEAR(out) CTN_NN_LAYER_(CTN_LAYER_LINEAR, out, 0, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_LINEAR_NO_BIAS(out) \
  CTN_NN_LAYER_(CTN_LAYER_LINEAR, out, 0, 0, 0, CTN_LAYER_NO_BIAS, 0.0, 0.0)
#define CTN_NN_CONV2D(out, k, stride, pad) \
  CTN_NN_LAYER_(CTN_LAYER_CONV2D, out, k, stride, pad, 0, 0.0, 0.0)
#define CTN_NN_CONV2D_NO_BIAS(out, k, stride, pad) \
  CTN_NN_LAYER_(CTN_LAYER_CONV2D, out, k, stride, pad, CTN_LAYER_NO_BIAS, 0.0, 0.0)
#define CTN_NN_BATCH_NORM() CTN_NN_LAYER_(CTN_LAYER_BATCH_NORM, 0, 0, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_LAYER_NORM() CTN_NN_LAYER_(CTN_LAYER_LAYER_NORM, 0, 0, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_DROPOUT(p) CTN_NN_LAYER_(CTN_LAYER_DROPOUT, 0, 0, 0, 0, 0, p, 0.0)
#define CTN_NN_RELU() CTN_NN_LAYER_(CTN_LAYER_RELU, 0, 0, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_TANH() CTN_NN_LAYER_(CTN_LAYER_TANH, 0, 0, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_SIGMOID() CTN_NN_LAYER_(CTN_LAYER_SIGMOID, 0, 0, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_MAX_POOL2D(k) CTN_NN_LAYER_(CTN_LAYER_MAX_POOL2D, 0, k, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_AVG_POOL2D(k) CTN_NN_LAYER_(CTN_LAYER_AVG_POOL2D, 0, k, 0, 0, 0, 0.0, 0.0)
#define CTN_NN_FLATTEN() CTN_NN_LAYER_(CTN_LAYER_FLATTEN, 0, 0, 0, 0, 0, 0.0, 0.0)

/* Applies `n` layers in order to x; input sizes (features, channels) come from the running
 * shape. A failing layer is named in the message with its index. since 1.1 */
CTN_API ctn_status ctn_nn_sequential(ctn_model *m, ctn_node x, uint32_t n,
                                     const ctn_layer *layers, ctn_node *out);

/* =============================================================================================
 * Optimizers
 *
 * Each adds, for every trainable parameter (ctn_model_variables with CTN_VAR_PARAMETER, in that
 * order; grads[i] is the gradient of parameter i), its state variables (zeros, kind
 * CTN_VAR_OPTIMIZER, named "<param>.<state>") and the update ops of ops.h (sgd_velocity,
 * sgd_apply, adam_moment1/2, adam_apply) with a ctn_assign of every new value. The updates read
 * the model's "lr" and "step" inputs. Call once per graph, after every layer is built.
 * =========================================================================================== */

/* SGD: v = momentum v + (g + wd w); w -= lr (nesterov ? (g + wd w) + momentum v : v). State
 * "<param>.momentum" only when momentum > 0. since 1.1 */
CTN_API ctn_status ctn_nn_sgd(ctn_model *m, const ctn_node *grads, double momentum,
                              int32_t nesterov, double weight_decay);
/* Adam (L2 weight decay added to the gradient) and AdamW (decoupled decay): state
 * "<param>.adam_m", "<param>.adam_v". betas in [0, 1), eps >= 0. since 1.1 */
CTN_API ctn_status ctn_nn_adam(ctn_model *m, const ctn_node *grads, double beta1, double beta2,
                               double eps, double weight_decay);
CTN_API ctn_status ctn_nn_adamw(ctn_model *m, const ctn_node *grads, double beta1, double beta2,
                                double eps, double weight_decay);

/* Global-norm clipping of `n` gradients: norm = sqrt(sum of every element squared), each
 * clipped[i] = grads[i] * min(1, max_norm / (norm + 1e-6)) (PyTorch's clip_grad_norm_: the
 * scale is exactly 1, the gradients unchanged, while norm + 1e-6 <= max_norm). max_norm > 0.
 * out_clipped receives n nodes; out_norm (may be NULL) the 0-d norm, handy to log. since 1.1 */
CTN_API ctn_status ctn_nn_clip_grad_norm(ctn_model *m, uint32_t n, const ctn_node *grads,
                                         double max_norm, ctn_node *out_clipped,
                                         ctn_node *out_norm);

#define CTN_OPTIM_SGD 0
#define CTN_OPTIM_ADAM 1
#define CTN_OPTIM_ADAMW 2

/* Everything ctn_nn_minimize needs. Zero fields pick the defaults shown. */
typedef struct ctn_optimizer {
  uint32_t struct_size; /* sizeof(ctn_optimizer) */
  int32_t kind;         /* CTN_OPTIM_* */
  double lr;            /* initial value fed to "lr" (0: 0.01) */
  double momentum;      /* SGD */
  int32_t nesterov;     /* SGD */
  int32_t reserved;
  double weight_decay;
  double beta1, beta2, eps; /* Adam/AdamW (0: 0.9, 0.999, 1e-8) */
  double clip_norm;     /* > 0: global-norm clipping before the update */
  /* --- since 1.5: dynamic loss scaling (f16 training; PyTorch's GradScaler) --- */
  double loss_scale;    /* > 0: the initial scale (CTN_LOSS_SCALE_DEFAULT = 65536); 0: off. The
                         * gradients are taken of loss * scale and divided by the scale; a step in
                         * which any gradient is inf or NaN changes no variable (weights,
                         * optimizer state) and halves the scale; after loss_scale_interval clean
                         * steps in a row it doubles. Kept in the optimizer variables
                         * "loss_scale" and "loss_scale.clean_steps" (so checkpoints keep it) */
  int64_t loss_scale_interval; /* clean steps before the scale doubles (0: 2000) */
} ctn_optimizer;

/* ctn_optimizer.loss_scale: PyTorch's initial scale, 2^16. since 1.5 */
#define CTN_LOSS_SCALE_DEFAULT 65536

/* The whole training step in one call: gradients of `loss` w.r.t. every trainable parameter
 * (ctn_grad), optional clipping, the optimizer's updates. out_grad_norm (may be NULL) receives
 * the 0-d global gradient norm (before clipping), computed even without clipping (since 1.5,
 * with loss scaling: of the unscaled gradients). since 1.1 */
CTN_API ctn_status ctn_nn_minimize(ctn_model *m, ctn_node loss, const ctn_optimizer *opt,
                                   ctn_node *out_grad_norm);

/* =============================================================================================
 * Learning-rate schedules (host side: the value is fed each step, nothing recompiles)
 * =========================================================================================== */

#define CTN_LR_CONSTANT 0
#define CTN_LR_STEP 1   /* base * gamma ^ floor(e / step_size) */
#define CTN_LR_COSINE 2 /* min + (base - min) (1 + cos(pi min(e, T) / T)) / 2 */
#define CTN_LR_LINEAR 3 /* base + (min - base) min(e, T) / T */

/* step counts updates from 1. With warmup_steps W > 0 the first W steps ramp linearly,
 * lr = base * step / W; afterwards e = step - W - 1 (0 at the first step after warm-up) and
 * T = total_steps - W drives the decay above. */
typedef struct ctn_lr_schedule {
  int32_t kind;          /* CTN_LR_* */
  int32_t reserved;
  double base_lr;        /* > 0 */
  int64_t warmup_steps;  /* >= 0 */
  int64_t step_size;     /* STEP: >= 1 */
  double gamma;          /* STEP: factor per step_size */
  int64_t total_steps;   /* COSINE, LINEAR: > warmup_steps */
  double min_lr;         /* COSINE, LINEAR: final value */
} ctn_lr_schedule;

/* The learning rate at update `step` (>= 1). CTN_ERR_INVALID_ARGUMENT for a bad schedule or
 * step. Pure: thread-safe. since 1.1 */
CTN_API ctn_status ctn_nn_lr_at(const ctn_lr_schedule *s, int64_t step, double *out_lr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_NN_H */
