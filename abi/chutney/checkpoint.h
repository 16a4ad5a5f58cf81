/* chutney checkpoints in the safetensors layout. C99.
 *
 * The conventions of chutney.h apply: every function returns a ctn_status (message from
 * ctn_last_error()), out-parameters are untouched on failure, *_release accepts NULL, nothing
 * aborts or throws.
 *
 * File layout (https://github.com/huggingface/safetensors, readable by its Python package):
 *   8 bytes   N, the header length, unsigned little-endian
 *   N bytes   a UTF-8 JSON object, padded with spaces to a multiple of 8:
 *               {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
 *                "__metadata__": {"<key>": "<string value>", ...}}
 *   rest      the data section: each tensor's elements row-major, little-endian, at
 *             [begin, end) relative to the start of the data section; tensors tile the section
 *             exactly (no gaps, no overlaps, nothing after the last one).
 * dtypes: F32 F64 I32 I64 U8 BOOL map to the chutney dtypes of the same name, and since 1.5 F16
 * BF16 I8 to CTN_F16 CTN_BF16 CTN_I8 (bit for bit). Files holding other safetensors dtypes (I16,
 * U16, F8_E4M3, ...) load; only ctn_checkpoint_get of such a tensor fails.
 *
 * Atomicity: ctn_checkpoint_save writes a temporary file in the target's directory, fsyncs it,
 * renames it over the target and fsyncs the directory. At every instant `path` is either the old
 * file or the complete new one; a failing save removes its temporary file and leaves `path` as
 * it was.
 */
#ifndef CHUTNEY_CHECKPOINT_H
#define CHUTNEY_CHECKPOINT_H

#include "chutney.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctn_checkpoint ctn_checkpoint;

/* =============================================================================================
 * Saving and loading tensors
 * =========================================================================================== */

/* Writes `n` tensors under `names` to `path`, atomically (see above). Tensors may be
 * non-contiguous views; they are written row-major. `metadata_json` is NULL or a JSON object
 * whose values are all strings (the safetensors rule), stored as "__metadata__".
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL pointers, an empty, duplicate or "__metadata__" name,
 * metadata that is not a JSON object of strings); CTN_ERR_IO (the temporary file cannot be
 * created, written, synced or renamed: the message names the file and the system error).
 * Thread-safety: concurrent saves to different paths are fine; the tensors must not be written
 * by another thread during the call. since 1.1 */
CTN_API ctn_status ctn_checkpoint_save(const char *path, uint32_t n, const char *const *names,
                                       const ctn_tensor *const *tensors,
                                       const char *metadata_json);

/* Reads and validates the whole file into memory; the file is closed before this returns.
 * Errors: CTN_ERR_IO (cannot open or read); CTN_ERR_CORRUPT (file shorter than 8 bytes, header
 * length beyond the file or over 100 MB, invalid JSON, an entry without dtype/shape/
 * data_offsets, an unknown dtype, negative or non-integer numbers, a shape whose byte size
 * differs from its offsets, offsets out of range, overlapping, leaving gaps or not covering the
 * data section, duplicate names, metadata values that are not strings). The message names the
 * file and the offending tensor. Never crashes on hostile input. since 1.1 */
CTN_API ctn_status ctn_checkpoint_load(const char *path, ctn_checkpoint **out);

/* Frees the checkpoint and its strings. Accepts NULL. since 1.1 */
CTN_API void ctn_checkpoint_release(ctn_checkpoint *ckpt);

/* Number of tensors. A loaded checkpoint is immutable: the getters below are thread-safe.
 * since 1.1 */
CTN_API ctn_status ctn_checkpoint_count(const ctn_checkpoint *ckpt, uint32_t *out_count);

/* Name of tensor `index` (< count), in the order of the file's header. The string is owned by
 * the checkpoint and valid until it is released. since 1.1 */
CTN_API ctn_status ctn_checkpoint_name(const ctn_checkpoint *ckpt, uint32_t index,
                                       const char **out_name);

/* dtype and shape of tensor `name` without copying it; `out_shape` (may be NULL) receives ndim
 * values. CTN_ERR_INVALID_ARGUMENT when the name is absent; CTN_ERR_UNSUPPORTED for a
 * safetensors dtype chutney lacks (the message names it). since 1.1 */
CTN_API ctn_status ctn_checkpoint_info(const ctn_checkpoint *ckpt, const char *name,
                                       ctn_dtype *out_dtype, uint32_t *out_ndim,
                                       int64_t *out_shape);

/* A new contiguous tensor holding a copy of tensor `name`; the caller releases it.
 * CTN_ERR_INVALID_ARGUMENT when the name is absent (the message names it and the file);
 * CTN_ERR_UNSUPPORTED for a safetensors dtype chutney lacks; CTN_ERR_SHAPE for more than
 * CTN_MAX_DIMS dimensions. since 1.1 */
CTN_API ctn_status ctn_checkpoint_get(const ctn_checkpoint *ckpt, const char *name,
                                      ctn_tensor **out);

/* The "__metadata__" object as compact JSON ("{}" when the file has none). Owned by the
 * checkpoint. since 1.1 */
CTN_API ctn_status ctn_checkpoint_metadata(const ctn_checkpoint *ckpt, const char **out_json);

/* The metadata value of `key`, or NULL in *out_value when the key is absent (still CTN_OK).
 * Owned by the checkpoint. since 1.1 */
CTN_API ctn_status ctn_checkpoint_metadata_get(const ctn_checkpoint *ckpt, const char *key,
                                               const char **out_value);

/* =============================================================================================
 * Plans: saving and restoring variables
 * =========================================================================================== */

/* Reads the current value of each variable nodes[i] of `plan` (ctn_plan_variable_read) and saves
 * them under names[i] with ctn_checkpoint_save (atomic). Errors: those of both functions.
 * Thread-safety: the plan must not run concurrently. since 1.1 */
CTN_API ctn_status ctn_plan_save_variables(ctn_plan *plan, uint32_t n, const char *const *names,
                                           const ctn_node *nodes, const char *path,
                                           const char *metadata_json);

/* Loads `path` and writes tensor names[i] into variable nodes[i] (ctn_plan_variable_write).
 * Every name must be present (CTN_ERR_INVALID_ARGUMENT naming it and the file otherwise) with
 * the variable's dtype (CTN_ERR_DTYPE) and shape (CTN_ERR_SHAPE), both sides printed in the
 * message. Everything is checked before the first write, so on failure the plan is unchanged.
 * Tensors of the file that are not named are ignored. Errors of ctn_checkpoint_load apply.
 * since 1.1 */
CTN_API ctn_status ctn_plan_load_variables(ctn_plan *plan, uint32_t n, const char *const *names,
                                           const ctn_node *nodes, const char *path);

/* =============================================================================================
 * Whole graphs: the graph, its weights and its inputs/outputs in one file (since 1.3)
 *
 * A graph file is a checkpoint (the safetensors layout above) whose "__metadata__" holds
 *   "chutney.format": "graph"          the magic: other checkpoints lack it
 *   "chutney.format_version": "1"       files of a newer version are refused (CTN_ERR_UNSUPPORTED)
 *   "chutney.graph": "<JSON>"           the nodes in id order, the named outputs (docs/MODELS.md)
 * and one tensor per constant and variable: a variable under its own name when that name is
 * unique (so ctn_plan_load_variables and `chutney train --resume` read a graph file like any
 * checkpoint), else "var.<id>"; a constant under "const.<id>". Ops are stored by name with their
 * attributes (floats as the bits of the double, so the round trip is exact) and resolved at load
 * in the loading context: an op library's op needs its library loaded there first. Loaded graphs
 * keep every node id, so ids the application kept for the original graph hold for the loaded one,
 * and a loaded graph compiled and run gives exactly the outputs of the original.
 * =========================================================================================== */

typedef struct ctn_saved_graph ctn_saved_graph;

/* Saves every node of the lazy graph `g` to `path`, atomically (as ctn_checkpoint_save), with
 * `n_outputs` outputs named output_names[i] (output_names may be NULL: "output0", "output1"...).
 * Weights: a variable's current value in `plan` when `plan` is not NULL and uses the variable
 * (a plan compiled from `g`; a value whose dtype or shape differs from the variable's is
 * CTN_ERR_INVALID_ARGUMENT), else its initial value. `metadata_json` is NULL or a JSON object of
 * strings stored beside the graph's own keys; its keys must not start with "chutney.".
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL pointers, an output id not in the graph, empty or
 * duplicate output names, bad metadata); CTN_ERR_STATE (an eager graph: build the model in a
 * lazy one); CTN_ERR_IO (as ctn_checkpoint_save). `path` is unchanged on failure.
 * Thread-safety: `g` and `plan` must not be used by another thread during the call. since 1.3 */
CTN_API ctn_status ctn_graph_save(ctn_graph *g, ctn_plan *plan, uint32_t n_outputs,
                                  const ctn_node *outputs, const char *const *output_names,
                                  const char *metadata_json, const char *path);

/* Loads a graph file into a new lazy graph of `ctx` (release it with ctn_graph_release) and a
 * handle listing its inputs, outputs and variables (release with ctn_saved_graph_release; it does
 * not own the graph). Errors: CTN_ERR_IO (cannot open or read); CTN_ERR_CORRUPT (everything
 * ctn_checkpoint_load refuses, no "chutney.format" key, invalid graph JSON, an unknown node kind
 * or dtype, an input id that does not precede its node, an attribute list too long, a tensor
 * missing or of the wrong dtype/shape, a node whose inferred dtype/shape differs from the
 * recorded one, an output id out of range: the message names the file and the node);
 * CTN_ERR_UNSUPPORTED (a newer format version; an op `ctx` does not know, named, e.g. an op
 * library's op whose library is not loaded). Nothing is returned on failure. Never crashes on
 * hostile input. Thread-safety: loads into different contexts or the same one may run
 * concurrently as any graph building may. since 1.3 */
CTN_API ctn_status ctn_graph_load(ctn_context *ctx, const char *path, ctn_graph **out_graph,
                                  ctn_saved_graph **out_saved);

/* Frees the handle (not the graph). Accepts NULL. since 1.3 */
CTN_API void ctn_saved_graph_release(ctn_saved_graph *saved);

/* What ctn_saved_graph_count / ctn_saved_graph_entry list. */
#define CTN_SAVED_INPUTS 0    /* ctn_input nodes, in id order */
#define CTN_SAVED_OUTPUTS 1   /* the outputs given to ctn_graph_save, in that order */
#define CTN_SAVED_VARIABLES 2 /* variables, in id order */

/* Number of entries of `kind` (CTN_SAVED_*); CTN_ERR_INVALID_ARGUMENT for an unknown kind. The
 * handle is immutable: its getters are thread-safe. since 1.3 */
CTN_API ctn_status ctn_saved_graph_count(const ctn_saved_graph *saved, int32_t kind,
                                         uint32_t *out_count);

/* Entry `index` (< count) of `kind`: its name (owned by the handle, valid until it is released;
 * may be NULL) and its node in the loaded graph (may be NULL). CTN_ERR_INVALID_ARGUMENT for an
 * unknown kind or an index out of range. since 1.3 */
CTN_API ctn_status ctn_saved_graph_entry(const ctn_saved_graph *saved, int32_t kind, uint32_t index,
                                         const char **out_name, ctn_node *out_node);

/* The value of the user metadata key `key` given to ctn_graph_save, or NULL in *out_value when
 * absent (still CTN_OK). Owned by the handle. since 1.3 */
CTN_API ctn_status ctn_saved_graph_metadata_get(const ctn_saved_graph *saved, const char *key,
                                                const char **out_value);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_CHECKPOINT_H */
