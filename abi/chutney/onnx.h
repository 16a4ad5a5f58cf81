/* chutney: importing ONNX models. C99.
 *
 * The conventions of chutney.h apply: every function returns a ctn_status (message from
 * ctn_last_error()), out-parameters are untouched on failure, *_release accepts NULL, nothing
 * aborts or throws.
 *
 * ctn_onnx_load reads an ONNX model file (.onnx, the protobuf ModelProto) with chutney's own
 * bounds-checked protobuf reader (no libprotobuf) and builds a lazy chutney graph from it: one
 * ctn_input per graph input, initializers as variables (so ctn_grad, the optimizers of nn.h and
 * checkpoints work on an imported model) or as constants, and each ONNX node lowered to chutney
 * ops. Shapes are static: a symbolic dimension of a graph input must be given through
 * ctn_onnx_options.inputs. Parts of the graph that depend only on constants are evaluated at
 * import time (shape computations, folded constants). docs/ONNX.md lists the supported ops,
 * opsets (7 to 28; 13 and newer are what the suite tests) and dtypes (float, double, int32,
 * int64, uint8, bool; since 1.5 float16, bfloat16 and int8, kept as CTN_F16/CTN_BF16/CTN_I8).
 *
 * ctn_onnx_export (since 1.3) writes a chutney graph back out as an ONNX model.
 */
#ifndef CHUTNEY_ONNX_H
#define CHUTNEY_ONNX_H

#include "chutney.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctn_onnx_model ctn_onnx_model;

/* A value for (or the shape of) one graph input, by name. Frozen: an array element without
 * struct_size, layout pinned for ABI v1. */
typedef struct ctn_onnx_input_spec {
  const char *name;          /* the ONNX graph input's name */
  const ctn_tensor *value;   /* its dtype and shape replace the model's (symbolic dims) */
  uint32_t as_constant;      /* 1: the value is baked into the graph as a constant (no
                                ctn_input is made), so ops that need a constant operand (a
                                Reshape's shape, a Slice's starts...) can read it */
  uint32_t reserved;         /* zero */
} ctn_onnx_input_spec;

/* Options for ctn_onnx_load. Set struct_size = sizeof(ctn_onnx_options) and zero the rest for
 * defaults. Fields added in later minors are appended. */
typedef struct ctn_onnx_options {
  uint32_t struct_size;
  uint32_t flags;                     /* CTN_ONNX_* */
  uint32_t n_inputs;                  /* entries of `inputs` */
  uint32_t reserved;                  /* zero */
  const ctn_onnx_input_spec *inputs;  /* may be NULL when n_inputs is 0 */
  const char *external_data_dir;      /* where external_data files are; NULL: the model's
                                         directory. Locations are relative; absolute paths and
                                         ".." are refused */
} ctn_onnx_options;

/* Floating initializers become constants instead of variables (integer and bool initializers
 * are always constants). Constants are folded at compile time. */
#define CTN_ONNX_INITIALIZERS_AS_CONSTANTS 1u
/* Parse and check the model only: no graph is built (*out_graph is set to NULL), the model
 * handle lists the inputs, outputs, initializers and op types (CTN_ONNX_OP_TYPES) with whether
 * the importer supports each. Used by `chutney onnx info` on models that do not import. */
#define CTN_ONNX_INSPECT_ONLY 2u
/* A symbolic dimension of a graph input that options.inputs does not give is taken as 1 (batch 1,
 * sequence 1...) instead of failing: for describing a dynamic model without sample inputs
 * (`chutney onnx info`). since 1.4 */
#define CTN_ONNX_SYMBOLIC_DIMS_AS_ONE 4u

/* Loads the ONNX model at `path` into a new lazy graph of `ctx`. On success *out_graph is a new
 * graph (release with ctn_graph_release; NULL with CTN_ONNX_INSPECT_ONLY) and *out_model a
 * handle listing the model's inputs, outputs and initializers with their nodes in that graph
 * (release with ctn_onnx_model_release). `options` may be NULL.
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL arguments, bad options, an options.inputs name the
 * graph lacks, a symbolic input dimension not given without CTN_ONNX_SYMBOLIC_DIMS_AS_ONE); CTN_ERR_IO (the file or an external data
 * file cannot be read); CTN_ERR_CORRUPT (malformed protobuf, a tensor whose data does not match
 * its shape, an external data range beyond its file, a node using an undefined value);
 * CTN_ERR_UNSUPPORTED (an op, attribute, attribute value, dtype or opset chutney does not
 * handle: the message names the node, its op type and what is missing); CTN_ERR_SHAPE /
 * CTN_ERR_DTYPE (the model's own shapes or dtypes do not agree). Nothing of the graph is
 * returned on failure.
 * Thread-safety: as for building any graph; different loads may run concurrently. since 1.2 */
CTN_API ctn_status ctn_onnx_load(ctn_context *ctx, const char *path, const ctn_onnx_options *options,
                                 ctn_graph **out_graph, ctn_onnx_model **out_model);

/* Frees the model handle (not the graph). Accepts NULL. since 1.2 */
CTN_API void ctn_onnx_model_release(ctn_onnx_model *model);

/* What ctn_onnx_model_count / ctn_onnx_model_entry list. */
#define CTN_ONNX_INPUTS 0       /* graph inputs that are not initializers, in model order */
#define CTN_ONNX_OUTPUTS 1      /* graph outputs, in model order */
#define CTN_ONNX_INITIALIZERS 2 /* initializers (variables or constants), in model order */
#define CTN_ONNX_OP_TYPES 3     /* distinct op types used by the graph, in first-use order */

/* Number of entries of `kind` (CTN_ONNX_*). CTN_ERR_INVALID_ARGUMENT for an unknown kind.
 * since 1.2 */
CTN_API ctn_status ctn_onnx_model_count(const ctn_onnx_model *model, int32_t kind, uint32_t *out_count);

/* Entry `index` (< count) of `kind`. *out_name (may be NULL): the ONNX name (the op type for
 * CTN_ONNX_OP_TYPES), owned by the model handle. *out_node (may be NULL): the graph node holding
 * the value (a ctn_input, a variable or constant, any node for an output; CTN_NODE_NONE for op
 * types, for inputs bound as constants, and for everything with CTN_ONNX_INSPECT_ONLY).
 * since 1.2 */
CTN_API ctn_status ctn_onnx_model_entry(const ctn_onnx_model *model, int32_t kind, uint32_t index,
                                        const char **out_name, ctn_node *out_node);

/* For CTN_ONNX_OP_TYPES entry `index`: how many nodes use it, whether the importer supports it
 * (1/0; with the model's opset) and, when imported, the chutney ops it was lowered to as a
 * ','-separated list owned by the handle ("" when everything was folded or for inspect-only
 * handles). Any out-pointer may be NULL. since 1.2 */
CTN_API ctn_status ctn_onnx_model_op_type(const ctn_onnx_model *model, uint32_t index, uint32_t *out_uses,
                                          int32_t *out_supported, const char **out_lowered_to);

/* The default-domain opset the model imports, and its IR version. since 1.2 */
CTN_API ctn_status ctn_onnx_model_version(const ctn_onnx_model *model, int64_t *out_opset,
                                          int64_t *out_ir_version);

/* Reads a serialized TensorProto file (the input_N.pb / output_N.pb files of ONNX's backend
 * test cases) into a new tensor. *out_name (may be NULL) receives the tensor's name in a
 * thread-local buffer valid until the next call on this thread. Errors: CTN_ERR_IO,
 * CTN_ERR_CORRUPT (malformed protobuf, data that does not match the shape), CTN_ERR_UNSUPPORTED
 * (a dtype chutney lacks, named). since 1.2 */
CTN_API ctn_status ctn_onnx_tensor_load(const char *path, ctn_tensor **out, const char **out_name);

/* Writes the part of the lazy graph `g` that its `n_outputs` outputs depend on as an ONNX model
 * (ModelProto, default-domain opset 13, IR version 7) to `path`, atomically (a temporary file in
 * the same directory renamed over `path`; `path` is unchanged on failure). Graph inputs are the
 * ctn_input nodes reached (their names and static shapes), outputs are named output_names[i]
 * (output_names may be NULL: "output0", "output1"...). Variables and constants become
 * initializers; a variable takes its current value in `plan` when `plan` is not NULL and uses it
 * (a plan compiled from `g`), else its initial value. Export an inference graph: assignments
 * (optimizer updates) have no ONNX form. docs/ONNX.md lists the ops that export (elementwise and
 * comparison ops, matmul, reductions, reshape, permute, slice, concat, broadcast_to, softmax,
 * log_softmax, conv2d, max/avg pooling, batch_norm_inference, cast, clamp...).
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL pointers, no outputs, an output id not in the graph,
 * empty or repeated output names, an output name equal to an input's or variable's);
 * CTN_ERR_STATE (an eager graph); CTN_ERR_UNSUPPORTED (an op without an exporter, or an
 * assignment, reached from the outputs: the message names the node and the op); CTN_ERR_IO (the
 * file cannot be written: names the file and the system error).
 * Thread-safety: `g` and `plan` must not be used by another thread during the call. since 1.3 */
CTN_API ctn_status ctn_onnx_export(ctn_graph *g, ctn_plan *plan, uint32_t n_outputs,
                                   const ctn_node *outputs, const char *const *output_names,
                                   const char *path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_ONNX_H */
